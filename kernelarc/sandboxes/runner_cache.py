"""Compile caches per runner identity, kept between the candidates of one sandbox.

Place in the flow: LocalSandbox (and DockerSandbox, in its pool dir) points every runner's
`TRITON_CACHE_DIR`, `TORCHINDUCTOR_CACHE_DIR`, `CUDA_CACHE_PATH` and `XDG_CACHE_HOME` into
`<root>/<uid>-<gid>/`, the dir of the uid:gid the runner runs as (`local/runner_identities.py`).
The dir is owned by that uid with mode 0700 and outlives the runner, so a candidate finds what
earlier candidates of the same identity compiled (a guard re-run of a `torch.compile` candidate
does not compile it again); the other identity's dir is closed to it, so a candidate never
writes where the spare started beside it reads. The jail bind-mounts only the runner's own
identity dir writable; in Docker it is `/work/eval/cache/<uid>-<gid>/` (gone with the container).

With per-candidate JIT caches (a sandbox with a build cache and no shared `cache_dir`, as
campaigns run), Triton's and Inductor's caches are the runner's own instead
(`per_candidate_env`): the identity's dir then keeps only the CUDA and XDG caches.

A dir that grew past `limit_bytes` is emptied once no runner of its identity is alive (a
candidate that fills it only costs the next ones a recompile). Without a root given, the
sandbox makes its own (`kernelarc_cache_<host>_*`, removed by `close()`, swept like the eval
dirs when the host was killed).

What a hostile candidate can do with its identity's cache, and why that is acceptable: it can
write anything there, and later candidates of that identity in that sandbox load what Triton
and Inductor find (kernels and generated Python, run in their workers with the privileges they
have anyway).
- It cannot make another candidate pass: the judge never imports candidate code or the caches,
  and draws inputs, computes reference outputs and compares itself, so a poisoned kernel fails
  the candidate that loaded it. It can make a later one fail or run slower (sabotage), within
  one identity of one sandbox; the other identity's dir (0700, not mounted) is out of reach.
- It can keep data between its own runs. The one use is replaying outputs for inputs seen
  before (the guard's re-timing reuses the first evaluation's input seed); a new best is then
  confirmed on a fresh seed, with full correctness rounds and timing, which no cache can answer.
  Static rules also block file I/O and hashing in Python sources (KA-S010, KA-S016).
- It can fill the disk: the dir is emptied past its limit, and RLIMIT_FSIZE caps each file.
The caches hold compiler output only: each candidate still gets its own worker processes,
emptied temp dir and result key.
"""

import logging
import os
import shutil
import threading
from pathlib import Path

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.owned_dirs import make_owned_dir

logger = logging.getLogger(__name__)

#: Default size above which an identity's cache is emptied.
CACHE_LIMIT_BYTES = 8 * 1024**3
#: Subdirs of an identity's cache, per variable (the runner's environment).
CACHE_VARIABLES = {
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "CUDA_CACHE_PATH": "cuda",
    "XDG_CACHE_HOME": "xdg",
}


#: The JIT caches a sandbox that keeps them per candidate (`jit_cache.py`) points into the
#: runner's own dir instead: what a candidate compiles there is hashed by the judge and handed
#: back only to that candidate, never to the next candidate of the identity.
JIT_VARIABLES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def cache_env(folder: Path | str) -> dict[str, str]:
    """The cache variables of a runner whose identity's cache is `folder`."""
    return {name: f"{folder}/{sub}" for name, sub in CACHE_VARIABLES.items()}


def per_candidate_env(workdir: Path | str) -> dict[str, str]:
    """The JIT cache variables of a runner whose JIT caches are the candidate's own:
    `<workdir>/cache/triton` and `<workdir>/cache/inductor` (where `jit_cache.py` stages them)."""
    return {name: f"{workdir}/cache/{CACHE_VARIABLES[name]}" for name in JIT_VARIABLES}


def identity_folder(root: Path, uid: int, gid: int) -> Path:
    """`<root>/<uid>-<gid>`: where an identity's caches live."""
    return root / f"{uid}-{gid}"


def give_to(folder: Path, uid: int, gid: int) -> None:
    """Make `folder` (and its parents) exist, owned by uid:gid with mode 0700 where this
    process may chown (root); else mode 0700 when uid is this process's own, 0777 when it is
    not (a container user a non-root host cannot chown to, as its eval dirs).

    Raises:
        SandboxError: the dir cannot be made or given away.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        info = folder.stat(follow_symlinks=False)
        if folder.is_symlink() or not folder.is_dir():
            msg = f"{folder} is not a directory"
            raise OSError(msg)
        if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (uid, gid):
            os.chown(folder, uid, gid, follow_symlinks=False)
        if os.geteuid() == 0 or uid == os.geteuid():
            folder.chmod(0o700)
        elif info.st_uid == os.geteuid():
            folder.chmod(0o777)
    except OSError as exc:
        msg = f"cannot prepare the compile cache {folder} for uid {uid}:{gid}: {exc}"
        raise SandboxError(msg) from exc


def size_over(folder: Path, limit_bytes: int) -> bool:
    """Whether the files under `folder` take more than `limit_bytes` (stops counting there)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                continue
            if total > limit_bytes:
                return True
    return False


def trim(folder: Path, limit_bytes: int | None) -> bool:
    """Empty `folder` if it holds more than `limit_bytes`; whether it did. Call only when no
    runner of its identity is alive."""
    if limit_bytes is None or not folder.is_dir() or not size_over(folder, limit_bytes):
        return False
    logger.warning("compile cache %s grew past %d bytes; emptying it", folder, limit_bytes)
    try:
        for entry in list(folder.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    except OSError as exc:  # what stays only costs disk; the next trim tries again
        logger.warning("cannot empty the compile cache %s: %s", folder, exc)
    return True


class IdentityCaches:
    """The cache root of one sandbox: given, or made on first use and removed by `close`."""

    def __init__(self, root: Path | None, temp_root: Path, limit_bytes: int | None) -> None:
        """`root` None: a dir of the sandbox's own in `temp_root` (made on first use)."""
        self._given = root
        self._temp_root = temp_root
        self.limit_bytes = limit_bytes
        self._owned: Path | None = None
        self._lock = threading.Lock()

    def folder(self, uid: int, gid: int) -> Path:
        """The identity's cache dir, ready for a runner as uid:gid.

        Raises:
            SandboxError: the root or the dir cannot be made.
        """
        with self._lock:
            root = self._given
            if root is None:
                if self._owned is None:
                    try:
                        self._owned = make_owned_dir("cache", self._temp_root)
                    except OSError as exc:
                        msg = f"cannot create the sandbox's compile cache dir: {exc}"
                        raise SandboxError(msg) from exc
                    self._owned.chmod(0o711)  # each identity enters its own dir only
                root = self._owned
        folder = identity_folder(root, uid, gid)
        give_to(folder, uid, gid)
        return folder

    def close(self) -> None:
        """Remove the root this sandbox made (a given root stays)."""
        with self._lock:
            owned, self._owned = self._owned, None
        if owned is not None:
            shutil.rmtree(owned, ignore_errors=True)
