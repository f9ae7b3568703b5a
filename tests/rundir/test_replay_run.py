"""`replay_run`: a run dir's attempts.jsonl handed to the guard's replay."""

from collections.abc import Callable
from pathlib import Path

import pytest

from kernelarc.errors import TrackingError
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.rundir.rejudge import replay_run
from kernelarc.schema import Attempt, EvalStatus, Verdict

MakeAttempt = Callable[..., Attempt]


def test_a_hand_edited_verdict_is_reported(tmp_path: Path, make_attempt: MakeAttempt) -> None:
    log = AttemptLog(tmp_path / ATTEMPTS_FILE)
    log.append(make_attempt(0, status=EvalStatus.COMPILE_ERROR))
    log.append(make_attempt(1, status=EvalStatus.COMPILE_ERROR, verdict=Verdict.NEW_BEST))
    assert [m.index for m in replay_run(tmp_path)] == [1]


def test_a_dir_without_attempts_is_a_tracking_error(tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match=ATTEMPTS_FILE):
        replay_run(tmp_path)
