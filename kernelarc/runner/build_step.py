"""The judge's build step: a C++ solution is built, or the host's prebuilt copy of it verified,
before the first workload, and the artefact's hash is recorded for the host's build cache.

Place in the flow: `evaluate.evaluate_request` calls `build_before_workloads` once, before any
worker starts and before any input is drawn; the worker then finds the build done (its stamp) and
only imports it. The `BuildInfo` it returns goes into the signed result; the host stores the
shared object in its build cache (`kernelarc/sandboxes/build_cache.py`) only when the file's
bytes still hash to `BuildInfo.sha256`.

Why here and why then: candidate code can run during a build (the compile flags are the
candidate's, and the build child imports the extension once, which runs its static
constructors), so the bytes of the artefact may be the candidate's own doing, but nothing of the
evaluation exists yet: no inputs, no reference outputs, no timing. The hash fixes those bytes;
whatever changes the file afterwards (the candidate's code during the workloads) no longer
matches it and is never cached. A prebuilt copy is used only when its name (sources, flags,
include dirs) and build identity (torch, CUDA, Python, machine) equal this build's and its bytes
hash to what the host says it verified; otherwise the solution is built as if there was none,
and the reason is reported.
"""

import hashlib
import logging
import platform
import sys
import time
from pathlib import Path

from kernelarc.runner.cpp_build import (
    DEFAULT_BUILD_TIMEOUT_S,
    BuildPlan,
    is_cpp_solution,
    mark_done,
    plan_build,
    run_build,
)
from kernelarc.runner.outcome import Outcome, exception_log
from kernelarc.runner.staging import BuildError, build_dir_for, write_sources
from kernelarc.schema import EvalRequest, EvalStatus
from kernelarc.schema.build import BuildInfo, PrebuiltExtension

logger = logging.getLogger(__name__)

#: Where the host stages a prebuilt shared object: next to request.json in the runner's dir.
PREBUILT_FILE = "prebuilt.so"


def build_identity(name: str) -> str:
    """What a build depends on beyond its name: the torch build it links against, the Python ABI
    and the machine. A prebuilt copy is used only under an equal identity."""
    import torch

    cuda = torch.version.cuda or "none"
    python = sys.implementation.cache_tag
    return f"{name} torch-{torch.__version__} cuda-{cuda} {python} {platform.machine()}"


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_before_workloads(
    request: EvalRequest, root: Path, timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
) -> tuple[BuildInfo | None, Outcome | None]:
    """Build the request's C++ solution in `root/build`: (what was done, None), or (None, the
    COMPILE_ERROR outcome of every workload) when it failed; (None, None) for Python."""
    try:
        return _build(request, root, timeout_s), None
    except BuildError as exc:
        return None, Outcome(EvalStatus.COMPILE_ERROR, str(exc))
    except Exception:
        return None, Outcome(EvalStatus.COMPILE_ERROR, exception_log("the C++ build step failed"))


def _build(request: EvalRequest, root: Path, timeout_s: float) -> BuildInfo | None:
    solution = request.solution
    if not is_cpp_solution(solution):
        return None
    started = time.monotonic()
    src = write_sources(solution, root)
    plan = plan_build(solution, src, build_dir_for(src))
    name = plan.built.name
    identity = build_identity(name)
    note = ""
    if request.prebuilt is not None:
        note = install_prebuilt(request.prebuilt, plan, identity, root / PREBUILT_FILE)
        if not note:
            logger.info("C++ build: prebuilt %s verified and used", name)
            return BuildInfo(
                name=name,
                identity=identity,
                sha256=request.prebuilt.sha256,
                seconds=round(time.monotonic() - started, 3),
                cached=True,
            )
        logger.warning("C++ build: prebuilt copy not used (%s); building", note)
    run_build(plan, timeout_s)
    return BuildInfo(
        name=name,
        identity=identity,
        sha256=file_sha256(plan.built.path),
        seconds=round(time.monotonic() - started, 3),
        cached=False,
        note=note,
    )


def install_prebuilt(
    prebuilt: PrebuiltExtension, plan: BuildPlan, identity: str, staged: Path
) -> str:
    """Put the prebuilt copy staged at `staged` where `plan` would build, if its name and
    identity are this build's and its bytes hash to `prebuilt.sha256`; '' when installed (the
    plan is done), else why not (nothing installed)."""
    if prebuilt.name != plan.built.name:
        return f"it is {prebuilt.name}, this build is {plan.built.name}"
    if prebuilt.identity != identity:
        return f"it was built for {prebuilt.identity!r}, this runner is {identity!r}"
    try:
        data = staged.read_bytes()  # read once: the bytes hashed are the bytes installed
    except OSError as exc:
        return f"cannot read {staged.name}: {exc}"
    if hashlib.sha256(data).hexdigest() != prebuilt.sha256:
        return f"{staged.name} does not hash to the sha256 the host verified"
    plan.built.path.parent.mkdir(parents=True, exist_ok=True)
    plan.built.path.write_bytes(data)
    mark_done(plan)
    return ""
