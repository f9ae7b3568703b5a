"""Staging the host's cached JIT files into a runner's dir (`HostCaches.stage_into`) when the
runner got there first: a spare that initialised CUDA before its request has already written
Triton's launcher module into its own cache dir, under the name the cache would stage. The
staging must keep going, write over nothing, and leave every staged dir to the runner's user
(an H100 suite run lost a correct generated kernel to EACCES when it stopped half-way)."""

import os
from pathlib import Path

import pytest
from test_jit_cache import _fake_jit

from kernelarc.sandboxes.build_cache import Staged
from kernelarc.sandboxes.host_caches import HostCaches, Prepared
from kernelarc.sandboxes.jit_cache import JitStaged

pytestmark = pytest.mark.slow

RUNNER = (65534, 65534)


def _prepared(files: dict[str, bytes]) -> Prepared:
    request = _fake_jit()
    jit = JitStaged(request=request, files=files, key="k", notes=[])
    return Prepared(request, Staged(request=request, files={}, key=None, notes=[]), jit, [])


def test_a_file_the_runner_made_first_is_kept_and_the_rest_is_staged(tmp_path: Path) -> None:
    files = {
        "cache/triton/AAA/cuda_utils.so": b"from the host cache",
        "cache/triton/AAA/__grp__k.json": b"{}",
        "cache/triton/BBB/k.cubin": b"cubin",
    }
    workdir = tmp_path / "eval"
    (workdir / "cache" / "triton" / "AAA").mkdir(parents=True)
    made = workdir / "cache" / "triton" / "AAA" / "cuda_utils.so"
    made.write_bytes(b"the runner's own")
    owner = RUNNER if os.getuid() == 0 else None

    notes = HostCaches(tmp_path / "caches").stage_into(_prepared(files), workdir, owner)

    assert notes == []
    assert made.read_bytes() == b"the runner's own"  # nothing written over
    assert (workdir / "cache" / "triton" / "BBB" / "k.cubin").read_bytes() == b"cubin"
    assert (workdir / "cache" / "triton" / "AAA" / "__grp__k.json").read_bytes() == b"{}"
    if owner is not None:
        for path in [workdir / "cache", *(workdir / "cache").rglob("*")]:
            assert (path.stat().st_uid, path.stat().st_gid) == RUNNER, path


def test_a_failed_staging_still_leaves_the_runner_its_dirs(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("giving dirs to another user needs root")
    workdir = tmp_path / "eval"
    workdir.mkdir()
    files = {"cache/triton/AAA/k.json": b"{}", "cache/triton/AAA/k.json/x": b"not below a file"}
    notes = HostCaches(tmp_path / "caches").stage_into(_prepared(files), workdir, RUNNER)
    assert any("cached files not staged" in n for n in notes), notes
    for path in [workdir / "cache", *(workdir / "cache").rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == RUNNER, path
