"""`sqlite_store_lock`: one process at a time per SQLite store, and no lock file left behind.

Real processes contend for the lock; each increments a counter file inside it with a pause
between read and write, so two holders at once would lose an increment. The lock file is
unlinked by each holder on release, which is where a naive lock lets two in at once.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelarc.tracking.mlflow_payload import sqlite_store_lock

_WORKER = """
import sys, time
from pathlib import Path
from kernelarc.tracking.mlflow_payload import sqlite_store_lock
uri, counter = sys.argv[1], Path(sys.argv[2])
for _ in range(15):
    with sqlite_store_lock(uri):
        value = int(counter.read_text())
        time.sleep(0.002)
        counter.write_text(str(value + 1))
"""


def _locks(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.glob("kernelarc-sqlite-*.lock"))


def test_the_lock_excludes_other_processes_and_leaves_no_file(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    counter = tmp_path / "counter"
    counter.write_text("0")
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, uri, str(counter)], env=env)
        for _ in range(3)
    ]
    assert [w.wait(timeout=300) for w in workers] == [0, 0, 0]
    assert counter.read_text() == "45", "two processes held the lock at once"
    assert _locks(tmpdir) == [], "the lock file was left in the temp dir"


def test_the_lock_file_goes_when_the_holder_is_done(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    temp = Path(tempfile.gettempdir())
    before = set(_locks(temp))
    with sqlite_store_lock(uri):
        held = set(_locks(temp)) - before
        assert len(held) == 1
    assert not (set(_locks(temp)) & held)
    with sqlite_store_lock("http://127.0.0.1:5000"):  # not a local store: no file at all
        assert set(_locks(temp)) - before == set()
