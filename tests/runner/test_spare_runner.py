"""The runner's spare form (`--device`) run directly: go line, EOF, device check, deadline.

Each test starts a real runner process (a torch import, ~3 s); the sandboxes' use of the form is
tested in tests/sandboxes/test_warm_spare.py.
"""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vector_add_request import sample_kernel, vector_add_request

from kernelarc.runner.go_line import BadGoLine, go_line, parse_go_line
from kernelarc.sandboxes.result_file import read_raw_traces
from kernelarc.schema import EvalRequest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
ROOT = Path(__file__).resolve().parent.parent.parent


def _request(kernel: str, device: str = "cpu") -> EvalRequest:
    return vector_add_request(sample_kernel(kernel), name=kernel, device=device)


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _spare(workdir: Path, *, device: str = "cpu") -> "subprocess.Popen[bytes]":
    command = [sys.executable, "-P", "-m", "kernelarc.runner", "--device", device]
    command += ["request.json", "result.json"]
    return subprocess.Popen(
        command,
        cwd=workdir,
        env=_env(),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_go_lines_round_trip_and_others_are_refused() -> None:
    assert parse_go_line(go_line().rstrip(b"\n")).deadline_s is None
    assert parse_go_line(go_line(12.5).rstrip(b"\n")).deadline_s == 12.5
    for bad in (b"", b"stop", b"go now", b"go -1", b"go 1 2", b"gogo"):
        with pytest.raises(BadGoLine):
            parse_go_line(bad)
    with pytest.raises(ValueError, match="> 0"):
        go_line(0)


def test_eof_before_go_ends_a_spare_quietly(tmp_path: Path) -> None:
    proc = _spare(tmp_path)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    assert b"Traceback" not in proc.stderr.read()
    assert not (tmp_path / "result.json").exists()


def test_a_bad_go_line_is_refused(tmp_path: Path) -> None:
    proc = _spare(tmp_path)
    _, err = proc.communicate(b"start please\n", timeout=120)
    assert proc.returncode == 2
    assert b"expected a go line" in err


def test_spare_evaluates_after_go_and_refuses_another_device(tmp_path: Path) -> None:
    """The request is read only after `go` (it does not exist before), and a request for the
    other device gets RUNTIME_ERROR traces, signed, without an evaluation."""
    passing, other = tmp_path / "passing", tmp_path / "other"
    passing.mkdir()
    other.mkdir()
    procs = {passing: _spare(passing), other: _spare(other)}
    (passing / "request.json").write_text(_request("add_return").model_dump_json())
    (other / "request.json").write_text(_request("add_return", device="cuda").model_dump_json())
    raws = {}
    for workdir, proc in procs.items():
        key = secrets.token_bytes(32)
        _, err = proc.communicate(go_line() + key.hex().encode() + b"\n", timeout=180)
        assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
        raw, problem = read_raw_traces(workdir / "result.json", key)
        assert problem is None
        raws[workdir] = raw
    assert [t["evaluation"]["status"] for t in raws[passing]] == ["PASSED"]
    refused = raws[other][0]["evaluation"]
    assert refused["status"] == "RUNTIME_ERROR"
    assert "got a request for 'cuda'" in refused["log"]


def _processes_with(needle: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_go_deadline_kills_the_runners_own_group_only(tmp_path: Path) -> None:
    """`go SECONDS`: the runner leaves its parent's group for its own and SIGKILLs that group
    (workers and their children included) at the deadline; the parent (a shell here, in a
    session of its own so that nothing else could ever be hit) lives on."""
    (tmp_path / "request.json").write_text(_request("add_endless").model_dump_json())
    marker = f"spare-deadline-{os.getpid()}-{secrets.token_hex(4)}"
    runner = f"{sys.executable} -P -m kernelarc.runner --device cpu request.json result.json"
    shell = subprocess.Popen(
        ["sh", "-c", f"{runner}; echo runner-ended-with-$?"],
        cwd=tmp_path,
        env={**_env(), "KERNELARC_TEST_MARK": marker},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    key = secrets.token_bytes(32)
    out, err = shell.communicate(go_line(8.0) + key.hex().encode() + b"\n", timeout=180)
    assert out.decode().strip() == f"runner-ended-with-{128 + signal.SIGKILL}", err[-2000:]
    assert b"deadline of 8.000 s from go reached" in err
    # The candidate's background `sleep` child was in the group too.
    deadline = time.monotonic() + 5.0
    while _processes_with(marker.encode()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker.encode()) == []


def test_a_spare_forks_its_zygote_and_first_worker_before_go(tmp_path: Path) -> None:
    """The head start (`head_start.py`): before `go` the spare already has its worker zygote
    and the first candidate's worker (3 processes carrying the spare's environment); a spare
    discarded with EOF takes both with it."""
    marker = f"spare-head-start-{os.getpid()}-{secrets.token_hex(4)}"
    command = [sys.executable, "-P", "-m", "kernelarc.runner", "--device", "cpu"]
    proc = subprocess.Popen(
        [*command, "request.json", "result.json"],
        cwd=tmp_path,
        env={**_env(), "KERNELARC_TEST_MARK": marker},
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdin is not None
    try:
        give_up = time.monotonic() + 120.0  # a bound for a slow host, not a measurement
        while len(_processes_with(marker.encode())) < 3 and time.monotonic() < give_up:
            time.sleep(0.1)
        assert len(_processes_with(marker.encode())) == 3
        assert not (tmp_path / "request.json").exists()  # no request exists yet
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    give_up = time.monotonic() + 10.0
    while _processes_with(marker.encode()) and time.monotonic() < give_up:
        time.sleep(0.1)
    assert _processes_with(marker.encode()) == []
