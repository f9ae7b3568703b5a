"""An MLflow experiment's campaigns as `CampaignSource`s, the same record a run dir reads into.

Place in the flow: `kernelarc report` (`report/inputs.py`) and `kernelarc export`
(`leaderboard/inputs.py`) read a run dir with `rundir.reader.read_run_dir` and an experiment
here. It sits in tracking, not beside the run-dir reader, because it reads MLflow
(`tracking.mlflow_reader`) and the run dir is below tracking (issue #19).

An MLflow campaign gives its attempts from the artifacts, its params, tags and logged SOL scores;
its problem files are not artifacts, so when the run dir named by its `kernelarc.run_dir` tag is
still here the campaign is read from there (with the MLflow ids kept), and it has no problem files
otherwise.
"""

import hashlib
from dataclasses import replace
from pathlib import Path

from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.reader import (
    CampaignSource,
    parse_overrides,
    read_problem_copy,
    read_record,
    read_run_dir,
)
from kernelarc.tracking import keys


def read_experiment(tracking_uri: str, experiment: str) -> list[CampaignSource]:
    """Every campaign of an MLflow experiment, oldest first (from its run dir when it is here).

    Raises:
        ConfigError: no such experiment, or a local run dir it names is unreadable.
        TrackingError: MLflow or its artifact store failed, or an artifact is invalid.
    """
    # Imported here: mlflow costs a second, and `import leaderboard` and the report must not pay it.
    from kernelarc.tracking.mlflow_reader import read_experiment as read_mlflow

    out = []
    for run in read_mlflow(tracking_uri, experiment):
        run_dir = Path(run.run_dir) if run.run_dir else None
        if run_dir is not None and (run_dir / ATTEMPTS_FILE).is_file():
            local = read_run_dir(run_dir)
            out.append(
                replace(
                    local,
                    mlflow_run_id=run.run_id,
                    tracking_uri=tracking_uri,
                    experiment=experiment,
                )
            )
            continue
        attempts = tuple(sorted(run.attempts, key=lambda a: a.index))
        sha = hashlib.sha256(run.config_yaml.encode()).hexdigest() if run.config_yaml else None
        # A run dir still here but without its attempts.jsonl: its problem copy and record.
        problem, problem_error, record = None, "", None
        if run_dir is not None and run_dir.is_dir():
            problem, problem_error = read_problem_copy(run_dir)
            record = read_record(run_dir)
        out.append(
            CampaignSource(
                label=f"mlflow:{experiment}/{run.run_id}",
                attempts=attempts,
                problem_name=attempts[0].problem if attempts else run.tags.get(keys.PROBLEM, ""),
                seed=run.params.get("seed", run.tags.get(keys.SEED, "")),
                config=dict(run.params),
                overrides=parse_overrides(run.tags.get(keys.OVERRIDES, "").split()),
                choices={
                    k.removeprefix(keys.CHOICE_PREFIX): v
                    for k, v in run.tags.items()
                    if k.startswith(keys.CHOICE_PREFIX)
                },
                config_sha256=sha,
                record=record,
                problem=problem,
                problem_error=problem_error,
                sol_scores=dict(run.sol_scores),
                recorded_run_dir=run.run_dir or "",
                mlflow_run_id=run.run_id,
                tracking_uri=tracking_uri,
                experiment=experiment,
            )
        )
    return out
