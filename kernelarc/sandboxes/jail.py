"""The local sandbox's jail: runs as root in the sandbox's new mount namespace, before the runner.

`LocalSandbox` starts `unshare -n -m [...] python -I -S jail.py --rw DIR ... -- RUNNER...` when it
runs as root. This script then, still privileged and before any candidate code exists:

1. makes every mount of the namespace private and read-only, except bind mounts of the `--rw`
   dirs (the evaluation's temp dir and cache), mounts a private tmpfs on /dev/shm and makes
   /proc/sys read-only: nothing outside the temp dir can be written, and what is written there
   disappears with it; first, when the host passes `--passwd-line`/`--group-line` (the runner's
   uid or gid has no entry: `runner_accounts.py`), it bind-mounts copies of /etc/passwd and
   /etc/group with those lines appended over the originals, in this namespace only, so
   `pwd.getpwuid` works for the runner (a failure there is a note, not a set-up failure: the
   runner's USER/LOGNAME still name it);
2. forks the runner, which drops to `--uid`/`--gid` (no supplementary groups), keeps no
   capability except CAP_DAC_READ_SEARCH when that user could not otherwise read the Python
   installation (`--needs`), and sets no_new_privs; a different uid cannot read the host's
   /proc/PID/environ, signal host processes or reach root-only sockets (Docker's), and
   RLIMIT_NPROC, which never applies to root, now brakes fork bombs;
3. stays the runner's parent as a child subreaper: every process the candidate leaves behind,
   even one that left the process group with setsid, becomes its child; when the runner exits,
   or on SIGTERM from the host, it SIGKILLs the whole tree, reaps it and exits with the runner's
   status. The candidate's uid cannot signal it.

Only the standard library: it runs with `-I -S` before the venv is on the path. `--probe` does
everything up to the privilege drop and exits 0 (how `network.probe_isolation` tests a host);
`--open PATH` makes the dropped process open PATH read-write first (CUDA device nodes), so a
host whose GPU the sandbox user cannot use falls back to no jail instead of failing every
evaluation.
"""

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
_KEPT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}

PR_SET_PDEATHSIG = 1
PR_SET_KEEPCAPS = 8
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
#: Set in the runner's environment when /dev/shm is the jail's private tmpfs (a resident judge
#: empties it between candidates, `kernelarc/runner/resident.py`; never the host's /dev/shm).
PRIVATE_SHM_VARIABLE = "KERNELARC_PRIVATE_SHM"
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_DAC_READ_SEARCH = 2
_CAP_VERSION_3 = 0x20080522

#: Exit status when the jail itself cannot be set up (the host reports it as a sandbox failure).
SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class JailError(Exception):
    """A step of the jail set-up failed; the message names it."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        msg = f"{what}: {os.strerror(err)} (errno {err})"
        raise JailError(msg)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    result = _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(result, f"mount {target}")


def _prctl(option: int, arg: int, what: str, arg3: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0), what)


def _unescape(field: str) -> str:
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and len(field) >= i + 4:
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts() -> Iterator[tuple[str, int]]:
    """(mount point, flags to keep) of every mount, parents first."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        kept = 0
        for option in fields[5].split(","):
            kept |= _KEPT_FLAGS.get(option, 0)
        yield _unescape(fields[4]), kept


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _mount_accounts(lines: dict[str, list[str]], scratch_root: str) -> list[str]:
    """Bind-mount copies of /etc/passwd and /etc/group with `lines` appended over them (before
    the remount below makes them read-only); returns what could not be done. The copies are
    written by root into a fresh root-only dir of the runner's temp dir and unlinked once
    mounted (a mount keeps its source file), so nothing of them is left to the runner."""
    notes: list[str] = []
    wanted = {target: extra for target, extra in lines.items() if extra}
    if not wanted:
        return notes
    try:
        scratch = Path(tempfile.mkdtemp(prefix=".jail-accounts-", dir=scratch_root))
    except OSError as exc:
        return [f"no scratch dir for the account files: {exc}"]
    try:
        for target, extra in wanted.items():
            try:
                base = Path(target).read_text(encoding="utf-8")
                copy = scratch / Path(target).name
                body = base if not base or base.endswith("\n") else base + "\n"
                copy.write_text(body + "".join(f"{line}\n" for line in extra), encoding="utf-8")
                copy.chmod(0o644)
                _mount(str(copy), target, None, MS_BIND)
            except (JailError, OSError) as exc:
                notes.append(f"{target} not extended: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return notes


def _read_only_filesystem(
    writable: list[str], shm_size_mb: int, accounts: dict[str, list[str]]
) -> tuple[list[str], list[str]]:
    """Step 1; returns the mounts that could not be made read-only (the root is required) and
    the account notes."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for folder in writable:
        _mount(folder, folder, None, MS_BIND | MS_REC)
    account_notes = _mount_accounts(accounts, writable[0]) if writable else []
    skipped = []
    for point, kept in list(_mounts()):
        if _under(point, [*writable, "/proc"]):
            continue
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
        except JailError as exc:
            if point == "/":
                raise
            skipped.append(f"{point} ({exc})")
    if Path("/dev/shm").is_dir():
        options = f"size={shm_size_mb}m,mode=1777"
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options)
        os.environ[PRIVATE_SHM_VARIABLE] = "1"  # the runner's: a resident judge empties it
    if Path("/proc/sys").is_dir():
        _mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount(None, "/proc/sys", None, flags)
    return skipped, account_notes


def _last_cap() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40


def _set_caps(effective: int, permitted: int, inheritable: int) -> None:
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)(_CapData(effective, permitted, inheritable), _CapData(0, 0, 0))
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def _readable(paths: list[str]) -> bool:
    """Whether the current (real) uid can read (and, for dirs, traverse) every path."""
    for path in paths:
        try:
            is_dir = Path(path).is_dir()
        except OSError:  # a parent dir closed to this uid
            return False
        if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
            return False
    return True


def _drop_privileges(uid: int, gid: int, needs: list[str]) -> None:
    """Step 2, in the runner's process: uid/gid, no capabilities (or only DAC_READ_SEARCH)."""
    for cap in range(_last_cap() + 1):
        if cap != CAP_DAC_READ_SEARCH:
            _prctl(PR_CAPBSET_DROP, cap, f"drop capability {cap}")
    _prctl(PR_SET_KEEPCAPS, 1, "keep capabilities")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    read_search = 1 << CAP_DAC_READ_SEARCH
    _set_caps(0, read_search, read_search)  # permitted shrinks to at most this, for good
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "clear ambient capabilities")
    # access(2) ignores capabilities for a non-root real uid: this asks about the uid alone.
    if _readable(needs):
        _set_caps(0, 0, 0)
    else:
        _set_caps(read_search, read_search, read_search)
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, "raise DAC_READ_SEARCH", CAP_DAC_READ_SEARCH)
    _prctl(PR_SET_KEEPCAPS, 0, "stop keeping capabilities")
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap_exited() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_tree(limit_s: float = 20.0) -> None:
    """SIGKILL every descendant until none is left (orphans are re-parented to us)."""
    me = os.getpid()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        pids = _descendants(me)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap_exited()
        time.sleep(0.005)


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _supervise(runner: int) -> int:
    """Step 3: reap everything until the runner ends, then kill what is left."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == runner:
            _kill_tree()
            return _status_code(status)


def _on_term(signum: int, _frame: object) -> None:
    _kill_tree()
    os._exit(128 + signum)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jail.py", description=__doc__)
    parser.add_argument("--rw", action="append", default=[], help="a dir that stays writable")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--needs", action="append", default=[], help="paths the runner reads")
    parser.add_argument("--open", action="append", default=[], help="device nodes to open rw")
    parser.add_argument("--passwd-line", action="append", default=[], help="appended to passwd")
    parser.add_argument("--group-line", action="append", default=[], help="appended to group")
    parser.add_argument("--shm-mb", type=int, default=1024)
    parser.add_argument("--probe", action="store_true", help="set up, drop, exit 0")
    parser.add_argument("command", nargs="*")
    return parser.parse_args(argv)


def _child(args: argparse.Namespace) -> None:
    """In the forked child: drop privileges, check the devices, exec the runner."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
        _drop_privileges(args.uid, args.gid, args.needs)
        for device in args.open:
            os.close(os.open(device, os.O_RDWR))
    except (JailError, OSError) as exc:
        sys.stderr.write(f"jail: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)
    if args.probe:
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execv(args.command[0], args.command)
    except OSError as exc:
        sys.stderr.write(f"jail: cannot run {args.command[0]}: {exc}\n")
        os._exit(SETUP_FAILED)


def main(argv: list[str]) -> int:
    """Set up the jail and run `command` in it; its exit status, or SETUP_FAILED."""
    args = _parse(argv)
    if not args.probe and not args.command:
        sys.stderr.write("jail: no command\n")
        return SETUP_FAILED
    try:
        accounts = {"/etc/passwd": args.passwd_line, "/etc/group": args.group_line}
        writable = [str(Path(d).resolve()) for d in args.rw]
        skipped, account_notes = _read_only_filesystem(writable, args.shm_mb, accounts)
        # The cwd still points into the mount it was set on (now read-only): look it up again,
        # through the new bind mount, so relative paths in the runner land in the writable dir.
        os.chdir(Path.cwd())
        _prctl(PR_SET_CHILD_SUBREAPER, 1, "child subreaper")
    except (JailError, OSError) as exc:
        sys.stderr.write(f"jail: {exc}\n")
        return SETUP_FAILED
    for line in skipped:
        sys.stderr.write(f"jail: left writable: {line}\n")
    for line in account_notes:
        sys.stderr.write(f"jail: accounts: {line}\n")
    signal.signal(signal.SIGTERM, _on_term)
    child = os.fork()
    if child == 0:
        _child(args)
    return _supervise(child)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
