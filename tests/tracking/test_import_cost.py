"""`import kernelarc.tracking` and `import leaderboard` must not import mlflow (1+ s, 800 MB)."""

import subprocess
import sys


def test_tracking_and_leaderboard_do_not_import_mlflow() -> None:
    code = (
        "import sys, kernelarc.tracking, kernelarc.rundir.attempts_log, "
        "kernelarc.tracking.null_tracker, kernelarc.tracking.keys, leaderboard\n"
        "kernelarc.tracking.make_tracker('none')\n"
        "assert 'mlflow' not in sys.modules, 'mlflow was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
