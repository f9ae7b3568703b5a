"""The run dir's layout: every file a campaign writes there, named once.

A campaign's run dir is its source of truth (attempts.jsonl first, then everything else); the
campaign loop, resume, tracking, the report, the exporter and the benchmarks all read it. They
take the names from here, so a renamed file cannot leave one reader behind (issue #19).
"""

ATTEMPTS_FILE = "attempts.jsonl"
"""Every judged attempt, one fsync'd JSON line each (rundir/attempts_log.py)."""
CAMPAIGN_FILE = "campaign.json"
"""The campaign record: status, stop reason, time used, resumes (rundir/run_record.py)."""
CONFIG_FILE = "config.yaml"
"""The resolved campaign config a resume and the exporter read back."""
CONCLUSIONS_FILE = "conclusions.jsonl"
"""The shared memory's conclusions and retractions (kernelarc/coordination/memory.py)."""
LEDGER_FILE = "mlflow_ledger.jsonl"
"""What reached MLflow, for `kernelarc sync` (rundir/sync_ledger.py)."""
PROBLEM_DIR = "problem"
"""The campaign's copy of its problem files (definition.json, the workload file, blobs)."""
FAILED_JOBS_FILE = "failed_jobs.jsonl"
"""A sweep's failed jobs, in the sweep dir (kernelarc/cli/sweep_summary.py)."""

__all__ = [
    "ATTEMPTS_FILE",
    "CAMPAIGN_FILE",
    "CONCLUSIONS_FILE",
    "CONFIG_FILE",
    "FAILED_JOBS_FILE",
    "LEDGER_FILE",
    "PROBLEM_DIR",
]
