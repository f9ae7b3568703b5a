"""attempts.jsonl: round trip, concurrent appends, crash tolerance and named corruption errors."""

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelarc.errors import TrackingError
from kernelarc.rundir.attempts_log import AttemptLog, read_attempts
from kernelarc.schema import Attempt, EvalStatus

MakeAttempt = Callable[..., Attempt]


def test_round_trip_keeps_every_field(tmp_path: Path, make_attempt: MakeAttempt) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    written = [
        make_attempt(0),
        make_attempt(1, status=EvalStatus.INCORRECT_NUMERICAL),
        make_attempt(2, status="INFRA_ERROR"),
        make_attempt(3, extra_sources={"sub/helper.py": "X = 'é ✓'\n"}),
    ]
    for attempt in written:
        log.append(attempt)
    assert read_attempts(path) == written
    assert path.read_text(encoding="utf-8").count("\n") == len(written)


def test_concurrent_appends_from_threads_give_whole_lines(
    tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    threads_n, per_thread = 8, 25
    # Large sources make each line far bigger than one write buffer, so interleaving would show.
    blob = "# " + "x" * 20000 + "\n"
    barrier = threading.Barrier(threads_n)

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            index = t * per_thread + i
            log.append(make_attempt(index, agent=f"a{t}", extra_sources={"pad.py": blob}))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    attempts = read_attempts(path)
    assert sorted(a.index for a in attempts) == list(range(threads_n * per_thread))
    for t in range(threads_n):
        mine = [a.index for a in attempts if a.proposal.agent == f"a{t}"]
        assert mine == sorted(mine), "one thread's appends must stay in its order"


def test_truncated_last_line_is_skipped_and_repaired(
    tmp_path: Path, make_attempt: MakeAttempt, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    log.append(make_attempt(0))
    log.append(make_attempt(1))
    whole = make_attempt(2).model_dump_json()
    # A crash mid-write: half a line, cut inside a multi-byte character, no newline.
    partial = (whole[: len(whole) // 2] + "é").encode()[:-1]
    with path.open("ab") as handle:
        handle.write(partial)

    assert [a.index for a in read_attempts(path)] == [0, 1]
    assert "truncated" in caplog.text

    # Re-opening for a resumed campaign cuts the partial line, so later appends stay valid.
    resumed = AttemptLog(path)
    resumed.append(make_attempt(2))
    assert [a.index for a in read_attempts(path)] == [0, 1, 2]
    assert path.read_bytes().endswith(b"\n")


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        pytest.param("{not json", "not a valid Attempt", id="not-json"),
        pytest.param('{"index": -1}', "index", id="invalid-field"),
    ],
)
def test_corrupt_middle_line_names_file_and_line(
    tmp_path: Path, make_attempt: MakeAttempt, bad_line: str, expected: str
) -> None:
    path = tmp_path / "attempts.jsonl"
    lines = [make_attempt(0).model_dump_json(), bad_line, make_attempt(1).model_dump_json()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TrackingError, match=rf"attempts\.jsonl:2: .*{expected}"):
        read_attempts(path)


def test_complete_but_corrupt_last_line_is_an_error(
    tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    """Only an unterminated line can come from a crash; a whole bad line is corruption."""
    path = tmp_path / "attempts.jsonl"
    path.write_text(make_attempt(0).model_dump_json() + "\n{oops}\n", encoding="utf-8")
    with pytest.raises(TrackingError, match=r"attempts\.jsonl:2:"):
        read_attempts(path)


def test_unreadable_log_is_a_tracking_error(tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match="cannot read"):
        read_attempts(tmp_path / "missing.jsonl")


def test_append_failure_names_the_file(tmp_path: Path, make_attempt: MakeAttempt) -> None:
    log = AttemptLog(tmp_path / "no_such_dir" / "attempts.jsonl")
    with pytest.raises(TrackingError, match=r"no_such_dir/attempts\.jsonl: cannot append"):
        log.append(make_attempt(0))
