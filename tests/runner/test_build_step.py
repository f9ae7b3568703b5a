"""The judge's check of a prebuilt C++ extension: used only under the same name and build
identity and when its bytes hash to what the host verified (no compile needed: the build is only
planned)."""

import hashlib
import sys
from pathlib import Path

import torch

from kernelarc.runner.build_step import build_identity, install_prebuilt
from kernelarc.runner.cpp_build import BuildPlan, plan_build
from kernelarc.runner.staging import build_dir_for, write_sources
from kernelarc.schema import Solution
from kernelarc.schema.build import PrebuiltExtension

AXPBY = Path(__file__).resolve().parents[1] / "samples" / "cpp" / "axpby"


def _plan(root: Path) -> BuildPlan:
    solution = Solution.model_validate(
        {
            "name": "axpby",
            "definition": "d",
            "author": "t",
            "spec": {
                "languages": ["cuda_cpp"],
                "target_hardware": ["LOCAL"],
                "entry_point": "main.cpp::run",
                "destination_passing_style": True,
            },
            "sources": [
                {"path": p.relative_to(AXPBY).as_posix(), "content": p.read_text()}
                for p in sorted(AXPBY.rglob("*"))
                if p.is_file()
            ],
        }
    )
    src = write_sources(solution, root)
    return plan_build(solution, src, build_dir_for(src), local_capability=None)


def test_a_prebuilt_copy_is_used_only_when_name_identity_and_hash_match(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    name = plan.built.name
    identity = build_identity(name)
    staged = tmp_path / "prebuilt.so"
    staged.write_bytes(b"\x7fELF the verified build")
    digest = hashlib.sha256(staged.read_bytes()).hexdigest()

    other_name = PrebuiltExtension(name="ka_000000000000", sha256=digest, identity=identity)
    assert "this build is" in install_prebuilt(other_name, plan, identity, staged)
    other_torch = PrebuiltExtension(name=name, sha256=digest, identity=f"{name} torch-0.0")
    assert "was built for" in install_prebuilt(other_torch, plan, identity, staged)
    wrong_hash = PrebuiltExtension(name=name, sha256="0" * 64, identity=identity)
    assert "does not hash" in install_prebuilt(wrong_hash, plan, identity, staged)
    assert not plan.done  # nothing installed by any of them

    right = PrebuiltExtension(name=name, sha256=digest, identity=identity)
    assert install_prebuilt(right, plan, identity, staged) == ""
    assert plan.done
    assert plan.built.path.read_bytes() == b"\x7fELF the verified build"


def test_the_identity_names_the_torch_build_and_python() -> None:
    identity = build_identity("ka_0123456789ab")
    assert identity.startswith("ka_0123456789ab ")
    assert f"torch-{torch.__version__}" in identity
    assert sys.implementation.cache_tag in identity
