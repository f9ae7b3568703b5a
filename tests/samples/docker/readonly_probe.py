import errno
import os
import tempfile
from pathlib import Path


def run(x, y):
    for target in ("/usr/kernelarc_probe", "/kernelarc_probe", "/etc/kernelarc_probe"):
        try:
            Path(target).write_text("x")
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise RuntimeError(f"{target}: expected EROFS, got {exc!r}") from exc
        else:
            raise RuntimeError(f"wrote {target}: the root filesystem is writable")
    with tempfile.NamedTemporaryFile(dir="/tmp") as scratch:  # the tmpfs scratch works
        scratch.write(b"ok")
    if os.getuid() == 0:
        raise RuntimeError("the candidate runs as root")
    return x + y
