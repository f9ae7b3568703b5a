"""Tries to overwrite the test's canary files and to create files outside its temp dir.

The canaries exist only on the host, so overwriting one is an escape: the output is then wrong
(INCORRECT_NUMERICAL). Files it creates may land in private mounts (a tmpfs /dev/shm): the test
looks for them on the host.
"""

import glob
import os
from pathlib import Path

MARK = "__MARKER__"


def _dirs():
    cwd = Path.cwd().resolve()
    dirs = {"/", "/tmp", "/var/tmp", "/dev/shm", "/root", "/home", str(cwd.parent)}
    dirs.add(str(cwd.parent.parent))
    try:
        import pwd

        dirs |= {entry.pw_dir for entry in pwd.getpwall()}
    except Exception:
        pass
    return sorted(d for d in dirs if not Path(d).resolve().is_relative_to(cwd))


def _attack():
    escaped = []
    for folder in _dirs():
        for canary in glob.glob(os.path.join(folder, "kernelarc_canary_*")):
            try:
                Path(canary).write_text("overwritten by a candidate")
                escaped.append(canary)
            except OSError:
                pass
        try:
            Path(folder, f"{MARK}-escaped").write_text("escaped")
        except OSError:
            pass
    return escaped


ESCAPED = _attack()


def run(x, y):
    if ESCAPED:
        return x - y
    return x + y
