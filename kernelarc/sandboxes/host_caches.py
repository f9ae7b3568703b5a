"""A local sandbox's caches as one step before a runner gets its request and one after it ended:
the C++ build cache (`build_cache.py`) and the candidates' JIT caches (`jit_cache.py`).

Place in the flow: the local sandbox's side of the lifecycle (`local/sandbox.py`, `_Evaluation`:
`request_for` and `collect`) calls `prepare` (the request as the runner gets it, and the files to
stage), `stage_into` (writes them into the runner's dir, without following links, and gives the JIT
dirs to the runner's user so its compilers can add to them) before the runner's `go`, and `collect`
once the runner's processes are dead (stores what its judge built or hashed). Both caches share one
directory (`sandbox.build_cache_dir`).
"""

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelarc.sandboxes.build_cache import BuildCache, Staged
from kernelarc.sandboxes.jit_cache import JitCache, JitStaged
from kernelarc.sandboxes.result_file import RunReport
from kernelarc.sandboxes.safe_files import write_below
from kernelarc.schema import EvalRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """One evaluation's cache step: the request to send and what each cache staged."""

    request: EvalRequest
    build: Staged
    jit: JitStaged | None
    notes: list[str]

    @property
    def jit_hit(self) -> bool:
        """The runner starts with the candidate's JIT caches."""
        return self.jit is not None and self.jit.hit


class HostCaches:
    """The build cache and, unless the sandbox shares one cache dir among runners, the JIT cache,
    under one root directory."""

    def __init__(self, root: str | Path, *, jit: bool = True) -> None:
        """Caches under `root`; `jit` False keeps no JIT caches."""
        self.builds = BuildCache(root)
        self.jit = JitCache(root) if jit else None

    def prepare(self, request: EvalRequest, python: str) -> Prepared:
        """Look the request's build and JIT caches up."""
        build = self.builds.stage(request, python)
        jit = self.jit.stage(build.request, python) if self.jit is not None else None
        sent = jit.request if jit is not None else build.request
        return Prepared(sent, build, jit, [*build.notes, *(jit.notes if jit else [])])

    def stage_into(
        self, prepared: Prepared, workdir: Path, owner: tuple[int, int] | None
    ) -> list[str]:
        """Write the staged files into the runner's dir; `owner` (uid, gid) gets the JIT dirs
        (None: the runner runs as this user). A failure costs a cold cache, never a verdict."""
        jit_files = prepared.jit.files if prepared.jit is not None else {}
        notes: list[str] = []
        try:
            for path, data in {**prepared.build.files, **jit_files}.items():
                try:
                    write_below(workdir, path.split("/"), data)
                except FileExistsError:
                    # The runner made it first: a spare that initialised CUDA before the
                    # request wrote Triton's launcher module into its own cache. Cache entries
                    # are named by content hash, so its copy serves; nothing is written over.
                    continue
        except OSError as exc:
            logger.warning("cannot stage cached files into %s: %s", workdir, exc)
            notes.append(f"cached files not staged ({exc})")
        finally:
            # Whatever was staged, even in part, must be the runner's: a JIT dir left to this
            # user makes the candidate's compiler fail with EACCES (an H100 suite run lost a
            # correct generated kernel to RUNTIME_ERROR that way).
            if owner is not None:
                for top in {path.split("/")[0] for path in jit_files}:
                    notes += _give(workdir / top, owner)
        return notes

    def collect(self, prepared: Prepared, workdir: Path, report: RunReport) -> list[str]:
        """Store what the finished runner's judge built or hashed; notes saying what."""
        notes = self.builds.collect(prepared.build, workdir, report.build)
        if self.jit is not None and prepared.jit is not None:
            notes += self.jit.collect(prepared.jit, workdir, report.jit_cache)
        return notes


def _give(top: Path, owner: tuple[int, int]) -> list[str]:
    """chown `top` (when it exists) and everything below it, following no link; if that
    fails, `top` is removed (the runner's compilers start cold rather than meet a dir they
    cannot write) and a note says so."""
    uid, gid = owner
    try:
        if not os.path.lexists(top):
            return []
        os.chown(top, uid, gid, follow_symlinks=False)
        for current, dirs, names in os.walk(top, followlinks=False):
            for name in [*dirs, *names]:
                os.chown(Path(current) / name, uid, gid, follow_symlinks=False)
    except OSError as exc:
        logger.warning("cannot give the staged %s to uid %d: %s", top, uid, exc)
        shutil.rmtree(top, ignore_errors=True)
        return [f"staged {top.name}/ removed: not given to the runner ({exc})"]
    return []
