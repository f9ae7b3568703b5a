"""Reading and writing files where a candidate may have planted links: the host's side of the
build and JIT caches (`build_cache.py`, `jit_cache.py`).

A runner's dir belongs to the candidate's uid, so anything in it may be a symlink or a FIFO put
there to make the host (root) read or write elsewhere. These helpers open every path component
relative to a directory fd with O_NOFOLLOW, read only regular files and cap their size, and
create files with O_EXCL (never through an existing name).
"""

import contextlib
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

#: Larger files are refused (CUTLASS builds for several targets stay well below this).
MAX_FILE_BYTES = 1 << 30
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file, not following a final symlink; OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return _read_open(handle.fileno(), path.name)


def read_below(root: Path, parts: Sequence[str]) -> bytes:
    """Read `root/parts...` following no symlink below `root`; OSError when a component is a
    link, the file is not regular, or it is larger than MAX_FILE_BYTES."""
    _check_parts(parts)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        return _read_open(handle.fileno(), parts[-1])


def write_below(root: Path, parts: Sequence[str], data: bytes, mode: int = 0o644) -> None:
    """Create `root/parts...` (and missing dirs, mode 0755) with `data`, following no symlink
    below `root` and never writing through an existing file; OSError otherwise."""
    _check_parts(parts)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], _NEW_FILE, mode, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "wb") as handle:
        handle.write(data)


def write_private(path: Path, data: bytes) -> None:
    """Create `path` (mode 0600) with `data`, fsync'd; never through an existing name."""
    fd = os.open(path, _NEW_FILE, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def publish_dir(staging: Path, entry: Path) -> None:
    """Move a fully written `staging` dir to `entry`, replacing an old entry; when another
    process published the same entry first, keep theirs. `staging` is gone afterwards."""
    try:
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_parts(parts: Sequence[str]) -> None:
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts):
        msg = f"bad relative path {list(parts)!r}"
        raise OSError(msg)


def _read_open(fd: int, name: str) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        msg = f"{name} is not a regular file"
        raise OSError(msg)
    if info.st_size > MAX_FILE_BYTES:
        msg = f"{name} is larger than {MAX_FILE_BYTES} bytes"
        raise OSError(msg)
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > MAX_FILE_BYTES:
            msg = f"{name} grew past {MAX_FILE_BYTES} bytes"
            raise OSError(msg)
        chunks.append(chunk)
    return b"".join(chunks)
