"""Temp dirs a sandbox host makes, named for that host, and the sweep of those a dead host left.

A host process killed with SIGKILL (or by the OOM killer) runs no `close()` and no finalizer, so its
sandboxes' dirs stay behind: the eval dir of the runner it was waiting for and its spare's dir
(LocalSandbox, `kernelarc_eval_*`), its compile caches (`kernelarc_cache_*`), its Docker pool dirs
(`kernelarc_pool_*`), with whatever candidates wrote there. So each such dir is named for its host:
`kernelarc_<kind>_<owner>_<random>`, where `<owner>` is `<pid>-<8 random hex>` of a host process
that holds an exclusive `flock` on `kernelarc_host_<owner>.lock` in the same root for as long as it
lives. The kernel drops that lock when the process dies, however it dies, and a lock cannot outlive
its process the way a pid can be reused; it also holds across PID namespaces sharing the dir. The
lock file is locked before it gets its name (created under a temporary name, then renamed), so a
sweep never finds a live host's lock free.

When the host process exits normally, `release_host_locks` (atexit) removes its lock files
whose dirs are all gone (its sandboxes' `close()` removed them), so an ordinary run leaves
nothing in the temp dir; a lock whose host still has a dir there stays for the sweep. The
file is unlinked while it is still locked: a sweep that opened it meanwhile finds either the
name gone or the lock held, and an owner name is never used twice.

`sweep_stale(root, kinds)` (every sandbox runs it when it is created, for the kinds of dir it makes:
LocalSandbox `eval` and `cache`, DockerSandbox `pool`) takes each host lock in `root` that it can:
its owner is dead, so the dirs of those kinds named for it are removed (as this process: root can
delete what the sandbox users and their candidates wrote), after `on_dead` (DockerSandbox: remove
that host's containers) said the rest of that host is gone too; the lock file goes once no dir of
any kind is left for it (a pool dir waits for a DockerSandbox, which can also remove its container).
Nothing else is touched: not a live host's dirs (its lock is held), not dirs of the older naming
(`kernelarc_eval_` + random chars, no owner: nothing proves their host dead), not symlinks or files,
not a lock file whose dirs could not all be removed (a later sweep tries again).
"""

import atexit
import contextlib
import fcntl
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

DirKind = Literal["eval", "pool", "cache"]
_OWNER = r"\d+-[0-9a-f]{8}"
#: `-` is not among mkdtemp's random characters: no name of the older naming matches.
_DIR = re.compile(rf"kernelarc_(eval|pool|cache)_({_OWNER})_[a-z0-9_]+")
_LOCK = re.compile(rf"kernelarc_host_({_OWNER})\.lock")
_OPEN_LOCK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_lock = threading.Lock()
_owner = ""
_held: dict[str, int] = {}
"""Root dir -> fd of this process's locked host lock file there."""


def _forget_after_fork() -> None:
    """A forked child is another host: it gets its own owner name and locks when it needs them
    (closing the inherited fds leaves the parent's locks held by the parent)."""
    global _lock, _owner
    for fd in _held.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()
    _lock, _owner = threading.Lock(), ""


os.register_at_fork(after_in_child=_forget_after_fork)


def host_owner(root: Path) -> str:
    """This process's owner name, its host lock in `root` taken (once per root, held until the
    process ends).

    Raises:
        OSError: the lock file cannot be made in `root`.
    """
    with _lock:
        return _take_host_lock(root)


def _take_host_lock(root: Path) -> str:
    """`host_owner` with `_lock` held."""
    global _owner
    key = str(root)
    if not _owner:
        _owner = f"{os.getpid()}-{secrets.token_hex(4)}"
    if key not in _held:
        final = root / f"kernelarc_host_{_owner}.lock"
        building = final.with_name(final.name + ".new")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(building, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            building.rename(final)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                building.unlink()
            raise
        _held[key] = fd
    return _owner


def make_owned_dir(kind: DirKind, root: Path) -> Path:
    """A fresh dir (mode 0700) in `root` named for this host, which a sweep leaves alone while
    this process lives.

    Raises:
        OSError: the lock file or the dir cannot be made.
    """
    # Under the lock, so `release_host_locks` never removes a lock a new dir needs.
    with _lock:
        owner = _take_host_lock(root)
        return Path(tempfile.mkdtemp(prefix=f"kernelarc_{kind}_{owner}_", dir=root))


def release_host_locks() -> list[Path]:
    """Remove this process's host lock files that no dir of this host needs any more (run at
    exit); the ones removed. A lock with a dir of this host beside it stays (and stays held
    until the process ends), so the sweep after it removes both."""
    removed: list[Path] = []
    with _lock:
        if not _owner:
            return removed
        for key, fd in list(_held.items()):
            root = Path(key)
            lock_path = root / f"kernelarc_host_{_owner}.lock"
            if _has_dirs(root, _owner):
                continue
            with contextlib.suppress(OSError):
                lock_path.unlink()  # still locked by this process: no sweep can be inside
                removed.append(lock_path)
            with contextlib.suppress(OSError):
                os.close(fd)
            del _held[key]
    return removed


def _has_dirs(root: Path, owner: str) -> bool:
    """Whether a dir of `owner` is in `root` (or `root` cannot be listed: keep the lock)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return True
    for entry in entries:
        found = _DIR.fullmatch(entry.name)
        if found and found.group(2) == owner:
            return True
    return False


atexit.register(release_host_locks)


def sweep_stale(
    root: Path, kinds: Iterable[DirKind], on_dead: Callable[[str], bool] | None = None
) -> list[Path]:
    """Remove the dirs of `kinds` in `root` whose host is dead (module docstring); the ones
    removed. `on_dead(owner)` runs first for a dead host that has such dirs (its lock held);
    False keeps them for a later sweep. Never raises: what cannot be read or removed stays."""
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        logger.debug("cannot list %s for stale sandbox dirs: %s", root, exc)
        return []
    dirs: dict[str, list[tuple[str, Path]]] = {}
    locks: dict[str, Path] = {}
    for entry in entries:
        with contextlib.suppress(OSError):
            if (found := _DIR.fullmatch(entry.name)) and entry.is_dir(follow_symlinks=False):
                dirs.setdefault(found.group(2), []).append((found.group(1), Path(entry.path)))
            elif (found := _LOCK.fullmatch(entry.name)) and entry.is_file(follow_symlinks=False):
                locks[found.group(1)] = Path(entry.path)
    wanted: set[str] = set(kinds)
    removed: list[Path] = []
    for owner, lock_path in locks.items():
        if owner != _owner:
            removed += _sweep_owner(owner, lock_path, dirs.get(owner, []), wanted, on_dead)
    if removed:
        logger.info("removed %d sandbox dir(s) of dead host processes in %s", len(removed), root)
    return removed


def _sweep_owner(
    owner: str,
    lock_path: Path,
    dirs: list[tuple[str, Path]],
    kinds: set[str],
    on_dead: Callable[[str], bool] | None,
) -> list[Path]:
    """If the lock can be taken (its host is dead): remove the dirs of `kinds`, then the lock
    file when no dir is left."""
    try:
        fd = os.open(lock_path, _OPEN_LOCK)
    except OSError:
        return []  # gone meanwhile (another sweep), or not ours to open
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []  # held: its host lives
        doomed = [folder for kind, folder in dirs if kind in kinds]
        if doomed and on_dead is not None and not on_dead(owner):
            return []
        removed = []
        for folder in doomed:
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
        if len(removed) == len(dirs):
            with contextlib.suppress(OSError):
                lock_path.unlink()
        return removed
    finally:
        os.close(fd)
