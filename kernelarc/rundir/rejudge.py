"""Re-judge a run dir: replay every acceptance decision recorded in its attempts.jsonl.

Place in the flow: `kernelarc replay RUN_DIR` and the campaign tests call `replay_run`; the rules
and the replay are the guard's (`guard.rejudge`, pure functions of attempts). Reading the run dir
is here because the guard sits below the run dir and must not import it (issue #19).
"""

from pathlib import Path

from kernelarc.guard.rejudge import ReplayMismatch, replay_mismatches
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.attempts_log import read_attempts


def replay_run(run_dir: Path) -> list[ReplayMismatch]:
    """Replay `<run_dir>/attempts.jsonl`; an empty list means every decision is reproduced.

    Raises:
        TrackingError: the file is missing or holds an invalid record.
    """
    return replay_mismatches(read_attempts(run_dir / ATTEMPTS_FILE))
