"""The host's C++ build cache: a repeated candidate is not rebuilt (in the same sandbox and in a
new one, as in a later campaign), a poisoned entry is detected and rebuilt, the runner refuses a
prebuilt copy that does not hash, and a candidate cannot write the cache.

The C++ candidate is the CPU axpby sample (tests/samples/cpp/axpby), evaluated end to end in
real LocalSandbox runners (jailed on a root host); one cold build takes ~35 s here, so the module
builds it once and once more for the poisoned entry. The store/lookup checks run on plain files.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.build_cache import ARTEFACT, MANIFEST, BuildCache, cache_key
from kernelarc.schema import (
    Definition,
    EvalRequest,
    EvalResult,
    EvalStatus,
    Solution,
    TimingConfig,
    Workload,
)
from kernelarc.schema.build import BuildInfo

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
TIMEOUT_S = 600.0

DEFINITION = Definition.model_validate(
    {
        "name": "axpby_f32",
        "op_type": "elementwise",
        "axes": {"N": {"type": "var"}},
        "inputs": {
            "x": {"shape": ["N"], "dtype": "float32"},
            "y": {"shape": ["N"], "dtype": "float32"},
            "alpha": {"shape": None, "dtype": "float32"},
        },
        "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
        "reference": "def run(x, y, alpha):\n    return alpha * x + y\n",
    }
)
WORKLOAD = Workload.model_validate(
    {
        "uuid": "axpby-n1000",
        "axes": {"N": 1000},
        "inputs": {"alpha": {"type": "scalar", "value": 0.5}},
    }
)


def _sources(root: Path) -> list[dict[str, str]]:
    return [
        {"path": p.relative_to(root).as_posix(), "content": p.read_text(encoding="utf-8")}
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def _request(sources: list[dict[str, str]], language: str, entry: str, dps: bool) -> EvalRequest:
    solution = Solution.model_validate(
        {
            "name": "axpby_candidate",
            "definition": DEFINITION.name,
            "author": "tests",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": entry,
                "destination_passing_style": dps,
            },
            "sources": sources,
        }
    )
    return EvalRequest(
        definition=DEFINITION,
        workloads=[WORKLOAD],
        solution=solution,
        correctness_rounds=2,
        timing=TimingConfig(warmup=0, iterations=1, flush_l2=False),
    )


def _cpp_request() -> EvalRequest:
    return _request(_sources(SAMPLES / "cpp" / "axpby"), "cuda_cpp", "main.cpp::run", True)


def _status(result: EvalResult) -> EvalStatus | None:
    evaluation = result.traces[0].evaluation
    return evaluation.status if evaluation is not None else None


def _evaluate(cache: Path, request: EvalRequest) -> EvalResult:
    with LocalSandbox(build_cache=cache, warm_spare=False) as sandbox:
        return sandbox.evaluate(request, timeout_s=TIMEOUT_S)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build cache holding the axpby build; the first evaluation's result is asserted here."""
    root = tmp_path_factory.mktemp("builds")
    first = _evaluate(root, _cpp_request())
    assert _status(first) == EvalStatus.PASSED, first.traces[0]
    assert first.build is not None and not first.build.cached
    assert f"build cache: stored {first.build.name}" in first.sandbox_notes
    assert first.stage_s.get("build", 0.0) > 0
    return root


def _entry(cache: Path) -> Path:
    return cache / cache_key(_cpp_request(), sys.executable)  # LocalSandbox's default python


def test_a_repeated_cpp_candidate_is_not_rebuilt(cache: Path) -> None:
    entry = _entry(cache)
    stored = json.loads((entry / MANIFEST).read_text())
    # A new sandbox, as a later campaign on this host would make.
    again = _evaluate(cache, _cpp_request())
    assert _status(again) == EvalStatus.PASSED
    assert again.build is not None and again.build.cached
    assert again.build.sha256 == stored["sha256"]
    assert f"build cache hit: {stored['name']}" in again.sandbox_notes
    assert not any("stored" in note for note in again.sandbox_notes)  # nothing was built
    # Every file in the cache is the host user's and private to it.
    for path in [cache, entry, *entry.iterdir()]:
        assert path.stat().st_uid == os.geteuid()
        assert path.stat().st_mode & 0o077 == 0


def test_a_poisoned_entry_is_detected_and_rebuilt(cache: Path) -> None:
    entry = _entry(cache)
    artefact = entry / ARTEFACT
    poisoned = bytearray(artefact.read_bytes())
    poisoned[len(poisoned) // 2] ^= 0xFF  # a flipped byte somewhere in the code
    artefact.write_bytes(bytes(poisoned))
    result = _evaluate(cache, _cpp_request())
    assert _status(result) == EvalStatus.PASSED
    assert result.build is not None and not result.build.cached  # compiled again
    assert any("failed its check" in n and "sha256" in n for n in result.sandbox_notes)
    # The rebuilt entry replaced the poisoned one and verifies.
    found = BuildCache(cache).lookup(entry.name)
    assert found.hit is not None
    assert hashlib.sha256(found.hit.data).hexdigest() == result.build.sha256


def test_a_candidate_cannot_write_the_cache(cache: Path) -> None:
    target = cache / "planted"
    kernel = (
        "def run(x, y, alpha):\n"
        "    try:\n"
        f"        open({str(target)!r}, 'w').write('x')\n"
        "    except OSError:\n"
        "        return alpha * x + y\n"
        "    return x - y  # wrong on purpose: the write went through\n"
    )
    request = _request([{"path": "k.py", "content": kernel}], "pytorch", "k.py::run", False)
    result = _evaluate(cache, request)
    jailed = not any(note.startswith("no jail") for note in result.sandbox_notes)
    if not jailed:
        pytest.skip("no jail on this host: candidates run as the host user")
    assert _status(result) == EvalStatus.PASSED
    assert not target.exists()


# ---- the cache's own checks, on plain files ------------------------------------------------


def _fake_build(workdir: Path, data: bytes, name: str = "ka_0123456789ab") -> BuildInfo:
    (workdir / "build").mkdir(parents=True)
    (workdir / "build" / f"{name}.so").write_bytes(data)
    return BuildInfo(
        name=name,
        identity=f"{name} torch-x",
        sha256=hashlib.sha256(data).hexdigest(),
        seconds=1.0,
        cached=False,
    )


def test_store_then_lookup_round_trips(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    info = _fake_build(tmp_path / "run", b"\x7fELF shared object")
    assert cache.store("k" * 64, tmp_path / "run", info) == f"build cache: stored {info.name}"
    found = cache.lookup("k" * 64)
    assert found.hit is not None and found.hit.data == b"\x7fELF shared object"
    assert found.hit.prebuilt.sha256 == info.sha256
    assert cache.lookup("0" * 64).hit is None  # a miss


def test_a_build_changed_after_the_judge_hashed_it_is_not_stored(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    info = _fake_build(tmp_path / "run", b"what the judge hashed")
    (tmp_path / "run" / "build" / f"{info.name}.so").write_bytes(b"what the candidate left")
    note = cache.store("k" * 64, tmp_path / "run", info)
    assert "changed after the judge hashed it" in note
    assert cache.lookup("k" * 64).hit is None


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"host secret")
    info = _fake_build(tmp_path / "run", b"host secret")
    link = tmp_path / "run" / "build" / f"{info.name}.so"
    link.unlink()
    link.symlink_to(secret)  # even with the right hash, a link is not read
    note = BuildCache(tmp_path / "cache").store("k" * 64, tmp_path / "run", info)
    assert "cannot read the build" in note
    build_dir = tmp_path / "run" / "build"
    build_dir.rename(tmp_path / "real_build")
    build_dir.symlink_to(tmp_path / "real_build")  # nor a linked directory
    note = BuildCache(tmp_path / "cache").store("k" * 64, tmp_path / "run", info)
    assert "cannot read the build" in note


def test_an_entry_for_another_key_is_rejected_and_removed(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    info = _fake_build(tmp_path / "run", b"a build")
    cache.store("a" * 64, tmp_path / "run", info)
    (tmp_path / "cache" / ("a" * 64)).rename(tmp_path / "cache" / ("b" * 64))
    found = cache.lookup("b" * 64)
    assert found.hit is None and "manifest names another key" in found.note
    assert not (tmp_path / "cache" / ("b" * 64)).exists()
