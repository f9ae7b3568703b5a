"""Correct vector add that first asks who it runs as, as Inductor and Triton do.

Fails (KeyError) under a uid that has no name; records which uid found its identity's cache.
"""

import getpass
import grp
import os
import pwd
from pathlib import Path

from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

# Once per worker process (one per evaluation in the tests): which uid found this cache.
with (Path(os.environ["TRITON_CACHE_DIR"]).parent / "seen.txt").open("a") as _seen:
    _seen.write(f"{os.getuid()}\n")


def run(x, y):
    name = getpass.getuser()
    entry = pwd.getpwuid(os.getuid())
    assert entry.pw_name == name, (entry, name)
    assert grp.getgrgid(os.getgid()).gr_gid == os.getgid()
    assert os.path.expanduser("~") == os.environ["HOME"]
    cache_dir()
    default_cache_dir()
    return x + y
