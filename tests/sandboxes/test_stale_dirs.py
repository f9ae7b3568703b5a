"""Temp dirs a SIGKILLed host left behind are removed by the next sandbox; a live host's never.

Real host processes (python subprocesses holding a LocalSandbox) on device cpu: one is killed
with SIGKILL mid-evaluation (its in-flight runner's dir and, where a second runner user exists,
the spare's), another stays alive with its spare, and a sandbox created afterwards in this
process sweeps only the dead one's dirs. The naming rules themselves are checked on a private
root with `owned_dirs.sweep_stale`.
"""

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_warm_spare import APPEAR_S, ROOT, _gone, _marked, _runner_pid

from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.owned_dirs import make_owned_dir, sweep_stale

_HOST = """
import sys, threading
from kernelarc.sandboxes import LocalSandbox
sys.path[:0] = [sys.argv[1], str(__import__("pathlib").Path(sys.argv[1]).parent)]
from test_warm_spare import MARK_VAR, _request, _warm
from vector_add_request import vector_add_request
sandbox = LocalSandbox(extra_env={MARK_VAR: sys.argv[2]}, spare_start="concurrent")
sandbox.prepare("cpu", 180)
print("prepared", flush=True)
for line in sys.stdin:
    if line.strip() == "slow":  # in flight until the host is killed
        slow = vector_add_request("import time\\n\\ndef run(x, y):\\n    time.sleep(600)\\n")
        threading.Thread(target=sandbox.evaluate, args=(slow,), kwargs={"timeout_s": 180}).start()
    else:
        result = sandbox.evaluate(_request(), timeout_s=180)
        statuses = {t.evaluation.status.value for t in result.traces if t.evaluation}
        print(("warm" if _warm(result) else "cold"), *sorted(statuses), flush=True)
"""


def _host(marker: str) -> "subprocess.Popen[bytes]":
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-c", _HOST, str(Path(__file__).parent), marker],
        env={**os.environ, "PYTHONPATH": path},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )


def _say(host: "subprocess.Popen[bytes]", line: str) -> None:
    assert host.stdin is not None
    host.stdin.write(line.encode() + b"\n")
    host.stdin.flush()


def _read(host: "subprocess.Popen[bytes]") -> str:
    assert host.stdout is not None
    return host.stdout.readline().decode().strip()


def _owned_by(pid: int) -> list[Path]:
    """The sandbox dirs and host lock a host process `pid` made in the temp root."""
    root = Path(tempfile.gettempdir())
    return sorted([*root.glob(f"kernelarc_eval_{pid}-*"), *root.glob(f"kernelarc_host_{pid}-*")])


def _in_flight(marker: str) -> Path:
    """The dir of the marked runner that got its request (request.json written at `go`)."""
    deadline = time.monotonic() + APPEAR_S
    while time.monotonic() < deadline:
        for pid in _marked(marker):
            try:
                cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                continue
            if (cwd / "request.json").exists():
                return cwd
        time.sleep(0.05)
    pytest.fail(f"no runner with marker {marker} got its request within {APPEAR_S:.0f} s")


def test_a_killed_hosts_dirs_are_swept_and_a_live_hosts_are_not() -> None:
    live_marker = f"live-{os.getpid()}-{secrets.token_hex(4)}"
    dead_marker = f"dead-{os.getpid()}-{secrets.token_hex(4)}"
    live, dead = _host(live_marker), _host(dead_marker)
    leftovers: list[Path] = []
    try:
        assert _read(live) == "prepared"
        assert _read(dead) == "prepared"
        live_spare = Path(os.readlink(f"/proc/{_runner_pid(live_marker)}/cwd"))
        _say(dead, "slow")
        in_flight = _in_flight(dead_marker)
        doomed = _marked(dead_marker)
        dead.kill()
        dead.wait()
        assert _gone(doomed) == []  # its runners died with it; their dirs did not
        leftovers = _owned_by(dead.pid)
        # A sandbox made meanwhile by a test in another xdist worker sweeps the temp root too
        # and may have removed them already (fresh-clone CI run, 2026-12-04): either they are
        # still here for the sweep below, or that sweep took them; never do they outlive one.
        swept_elsewhere = not in_flight.exists()
        if not swept_elsewhere:
            assert in_flight in leftovers
            assert any(p.name.startswith("kernelarc_host_") for p in leftovers)
        live_dirs = _owned_by(live.pid)
        assert live_spare in live_dirs

        LocalSandbox().close()  # a new sandbox sweeps the temp root

        assert [p for p in leftovers if p.exists()] == []
        assert [p for p in live_dirs if not p.exists()] == []
        _say(live, "evaluate")  # its prepared spare is intact and serves
        assert _read(live) == "warm PASSED"
    finally:
        for host in (live, dead):
            if host.poll() is None:
                host.kill()
                host.wait()
        for path in [*leftovers, *_owned_by(live.pid)]:  # a failed sweep's leftovers
            subprocess.run(["rm", "-rf", str(path)], check=False)


_MAKE = """
import sys
from pathlib import Path
from kernelarc.sandboxes.owned_dirs import make_owned_dir
folder = make_owned_dir(sys.argv[2], Path(sys.argv[1]))
(folder / "sub").mkdir()
(folder / "sub" / "file").write_text("candidate output")
print(folder)
"""


def _owner(folder: Path) -> str:
    return folder.name.split("_")[2]


def test_sweep_removes_only_dead_owners_dirs(tmp_path: Path) -> None:
    """Processes that exited without cleaning up (their locks are free) lose their dirs of the
    swept kind, and their lock file once no dir is left; a pool dir waits until `on_dead` (a
    DockerSandbox removing that host's containers) agrees. This live process's dir, dirs of the
    older unowned naming, a symlink named like an owned dir (and its target) and unrelated
    entries stay."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    made: dict[str, Path] = {}
    for kind in ("eval", "cache", "pool"):
        out = subprocess.run(
            [sys.executable, "-c", _MAKE, str(tmp_path), kind],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=True,
        )
        made[kind] = Path(out.stdout.strip())
    ours = make_owned_dir("eval", tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("keep")
    link = tmp_path / f"kernelarc_eval_{_owner(made['eval'])}_link0000"
    link.symlink_to(target)
    unowned = tmp_path / "kernelarc_eval_ab_cd123"
    unowned.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()

    def locks() -> set[str]:
        return {p.name for p in tmp_path.glob("kernelarc_host_*.lock")}

    assert locks() == {f"kernelarc_host_{_owner(d)}.lock" for d in (*made.values(), ours)}

    assert sorted(sweep_stale(tmp_path, ["eval", "cache"])) == sorted([made["eval"], made["cache"]])
    assert made["pool"].is_dir()  # not a kind a LocalSandbox sweeps
    assert locks() == {f"kernelarc_host_{_owner(d)}.lock" for d in (made["pool"], ours)}

    asked: list[str] = []

    def refuse(owner: str) -> bool:
        asked.append(owner)
        return False  # e.g. the engine could not list that host's containers

    assert sweep_stale(tmp_path, ["pool"], on_dead=refuse) == []
    assert asked == [_owner(made["pool"])]
    assert made["pool"].is_dir()
    assert sweep_stale(tmp_path, ["pool"], on_dead=lambda owner: True) == [made["pool"]]

    assert locks() == {f"kernelarc_host_{_owner(ours)}.lock"}
    assert ours.is_dir() and unowned.is_dir() and other.is_dir()
    assert link.is_symlink() and (target / "keep").read_text() == "keep"
    assert sweep_stale(tmp_path, ["eval", "pool"]) == []  # ours is held


_MAKE_AND_CLEAN = """
import shutil, sys
from pathlib import Path
from kernelarc.sandboxes.owned_dirs import make_owned_dir
kept = make_owned_dir("eval", Path(sys.argv[1]))
done = make_owned_dir("eval", Path(sys.argv[2]))
shutil.rmtree(done)  # what a sandbox's close() does
print(kept)
"""


def test_a_host_that_exits_removes_its_lock_unless_a_dir_of_it_is_left(tmp_path: Path) -> None:
    """An ordinary exit leaves no `kernelarc_host_*.lock` where the host's dirs are all gone
    (every `kernelarc eval` used to leave one in /tmp); where one of its dirs is left the lock
    stays, so the next sweep can tell the host is dead and remove both."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    messy, clean = tmp_path / "messy", tmp_path / "clean"
    messy.mkdir()
    clean.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _MAKE_AND_CLEAN, str(messy), str(clean)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=True,
    )
    kept = Path(out.stdout.strip())
    assert list(clean.iterdir()) == []
    assert {p.name for p in messy.iterdir()} == {
        kept.name,
        f"kernelarc_host_{_owner(kept)}.lock",
    }
    assert sweep_stale(messy, ["eval"]) == [kept]
    assert list(messy.iterdir()) == []
