"""The end of a `kernelarc campaign -m` sweep: which jobs failed, in one summary.

Place in the flow: in a multirun, a job whose campaign cannot start (a bad problem, a config
error) or breaks does not stop the sweep: `cli/campaign.py` prints its error, appends it to
`<sweep dir>/failed_jobs.jsonl` and lets the launcher go on with the next job (the basic
launcher would otherwise end the whole sweep at the first failing job). When the sweep ends,
Hydra calls `SweepSummary.on_multirun_end` in the launching process (configured under
`hydra.callbacks` in conf/campaign.yaml): it prints every job's outcome from that file and the
job dirs' campaign.json, and `failed_jobs()` gives the CLI its exit status.
"""

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from kernelarc.rundir import CAMPAIGN_FILE, FAILED_JOBS_FILE

_failed = 0


def failed_jobs() -> int:
    """Failed jobs of the last sweep that ended in this process."""
    return _failed


def record_failure(sweep_dir: Path, job: int, overrides: list[str], error: str) -> None:
    """Append one failed job to the sweep's failed_jobs.jsonl (one short line per job, so the
    appends of parallel jobs do not interleave)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"job": job, "overrides": overrides, "error": error[:2000]})
    with (sweep_dir / FAILED_JOBS_FILE).open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


class SweepSummary(Callback):
    """Prints the sweep's outcome per job once every job has run."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A new sweep: forget the previous one's count."""
        global _failed
        _failed = 0

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Read the sweep dir and print finished and failed jobs."""
        global _failed
        sweep_dir = Path(str(config.hydra.sweep.dir))
        lines = summarize(sweep_dir)
        _failed = sum(1 for line in lines if line.startswith("  failed"))
        for line in lines:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def summarize(sweep_dir: Path) -> list[str]:
    """The summary lines of a sweep dir: a headline, then one line per job that did not finish."""
    failed: dict[int, str] = {}
    path = sweep_dir / FAILED_JOBS_FILE
    if path.is_file():
        for raw in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError:
                continue
            overrides = " ".join(entry.get("overrides") or [])
            first = str(entry.get("error", "")).splitlines()[0] if entry.get("error") else ""
            failed[int(entry.get("job", -1))] = f"({overrides}): {first}"
    finished = 0
    job_dirs = sorted(p for p in sweep_dir.iterdir() if p.is_dir()) if sweep_dir.is_dir() else []
    for job_dir in job_dirs:
        record = job_dir / CAMPAIGN_FILE
        if not record.is_file() or not job_dir.name.isdigit():
            continue
        try:
            status = str(json.loads(record.read_text(encoding="utf-8")).get("status", ""))
        except (OSError, json.JSONDecodeError):
            status = "unreadable campaign.json"
        if status == "FINISHED":
            finished += 1
        elif int(job_dir.name) not in failed:
            failed[int(job_dir.name)] = f"({job_dir}): campaign {status}"
    total = finished + len(failed)
    head = f"sweep {sweep_dir}: {total} jobs, {finished} finished, {len(failed)} failed"
    lines = [head + (":" if failed else "")]
    lines += [f"  failed job {job} {text}" for job, text in sorted(failed.items())]
    return lines
