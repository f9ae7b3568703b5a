"""A real 2x2 ablation on the CPU: `kernelarc campaign -m` with the joblib launcher (two local
processes, one SQLite store), then `kernelarc report` from the sweep dir and from the MLflow
experiment. The expected numbers are computed here from each job's attempts.jsonl and
.hydra/overrides.yaml, not by the report code.

The team is two offline agents with 2 candidates per campaign (the compiler agent's eager
reference, then a Triton template, which is slower on the CPU, so the guard arm confirms the
first and re-times nothing) on the smallest built-in problem, one correctness round and no
correctness pool (no screen run before each timed one): under a minute per job on 2 busy cores.
(With the whole offline team the Triton template comes first and the guard re-times the
reference against it: three times as long.)
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from kernelarc.report.inputs import load_experiment
from kernelarc.schema import Attempt, Verdict
from kernelarc.tracking import keys

pytestmark = pytest.mark.slow

KERNELARC = [sys.executable, "-m", "kernelarc.cli"]
BUDGET = 2


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    return subprocess.run(
        KERNELARC + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("ablation")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    proc = _run(
        [
            "campaign",
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            "name=abl",
            "problem=silu_and_mul",
            f"budget.candidates={BUDGET}",
            "eval.correctness_rounds=1",
            "eval.warmup=0",
            "eval.iterations=2",
            "device=cpu",
            "agents.team=[compiler,tiling]",
            # No correctness pool: a candidate is its timed run (plus the guard's), not a screen
            # first; the sweep and the report are what this file tests (tests/executor/ the pool).
            "executor.correctness_slots=0",
            "guard=default,off",
            "seed=0,1",
            f"tracking.uri={uri}",
            f"hydra.sweep.dir={root / 'sweep'}",
        ],
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root / "sweep", uri


def _jobs(sweep_dir: Path) -> dict[Path, tuple[str, list[Attempt]]]:
    """Job dir -> (its guard override, its attempts)."""
    out = {}
    for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())
        guard = next(o.split("=", 1)[1] for o in overrides if o.startswith("guard="))
        lines = (job / "attempts.jsonl").read_text().splitlines()
        out[job] = (guard, [Attempt.model_validate_json(line) for line in lines])
    return out


def _final_best(attempts: list[Attempt]) -> float:
    best = [a for a in attempts if a.index < BUDGET and a.verdict == Verdict.NEW_BEST]
    return (best[-1].speedup or 0.0) if best else 0.0


def test_every_job_is_a_campaign_with_its_own_parent_run(sweep: tuple[Path, str]) -> None:
    sweep_dir, uri = sweep
    jobs = _jobs(sweep_dir)
    assert sorted(g for g, _ in jobs.values()) == ["default", "default", "off", "off"]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("abl")
    assert experiment is not None
    kind = f"tags.`{keys.KIND}` = '{keys.KIND_CAMPAIGN}'"
    parents = client.search_runs([experiment.experiment_id], filter_string=kind)
    by_dir = {Path(p.data.tags[keys.RUN_DIR]): p for p in parents}
    assert set(by_dir) == {job.resolve() for job in jobs}
    for job, (guard, attempts) in jobs.items():
        parent = by_dir[job.resolve()]
        tags = parent.data.tags
        assert parent.info.status == "FINISHED"
        assert tags[f"{keys.CHOICE_PREFIX}guard"] == guard
        assert tags[keys.PROBLEM] == "silu_and_mul"
        assert f"guard={guard}" in tags[keys.OVERRIDES]
        assert keys.TRACKING_DEGRADED not in tags
        assert parent.data.params["guard.enabled"] == str(guard == "default")
        assert len(attempts) == BUDGET
        best = client.get_metric_history(parent.info.run_id, keys.CAMPAIGN_BEST_SPEEDUP)
        assert max(m.step for m in best) == BUDGET - 1
        assert parent.data.metrics[keys.FINAL_BEST_SPEEDUP] == pytest.approx(_final_best(attempts))
        listed = {f.path for f in client.list_artifacts(parent.info.run_id)}
        assert {keys.CONFIG_YAML, keys.ATTEMPTS_TABLE} <= listed


def test_report_of_the_sweep_dir_matches_the_runs_and_is_logged(
    sweep: tuple[Path, str], tmp_path: Path
) -> None:
    sweep_dir, uri = sweep
    out = tmp_path / "report"
    proc = _run(["report", str(sweep_dir), "--out", str(out)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    data = json.loads((out / "report.json").read_text())
    assert data["arm_keys"] == ["guard"]
    assert data["budget"] == BUDGET
    arms = {a["arm"]: a for a in data["arms"]}
    assert set(arms) == {"guard=default", "guard=off"}
    jobs = _jobs(sweep_dir)
    for guard in ("default", "off"):
        finals = [_final_best(att) for g, att in jobs.values() if g == guard]
        arm = arms[f"guard={guard}"]
        assert arm["final_best_speedup"]["n"] == 2
        assert arm["final_best_speedup"]["mean"] == pytest.approx(statistics.mean(finals))
        credits = sum(arm["credit_agents"].values())
        assert credits == pytest.approx(statistics.mean(finals))
    assert "data:image/png;base64," in (out / "report.html").read_text()

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("abl")
    assert experiment is not None
    kind = f"tags.`{keys.KIND}` = '{keys.KIND_REPORT}'"
    reports = client.search_runs([experiment.experiment_id], filter_string=kind)
    assert len(reports) == 1
    listed = {f.path for f in client.list_artifacts(reports[0].info.run_id, keys.REPORT_DIR)}
    assert {"report/report.html", "report/best_so_far.png", "report/report.json"} <= listed


def test_report_of_the_experiment_alone_gives_the_same_numbers(
    sweep: tuple[Path, str], tmp_path: Path
) -> None:
    """With the run dirs gone, everything comes from MLflow (attempts and SOL scores)."""
    sweep_dir, uri = sweep
    expected = {}
    for job, (guard, attempts) in _jobs(sweep_dir).items():
        expected[str(job.resolve())] = (guard, _final_best(attempts))
    moved = tmp_path / "moved"
    shutil.move(sweep_dir, moved)
    try:
        campaigns = load_experiment(uri, "abl")
    finally:
        shutil.move(moved, sweep_dir)
    assert len(campaigns) == 4
    for campaign in campaigns:
        assert campaign.run_dir is None
        assert campaign.label.startswith("mlflow:abl/")
        run = MlflowClient(tracking_uri=uri).get_run(campaign.mlflow_run_id or "")
        guard, final = expected[run.data.tags[keys.RUN_DIR]]
        assert campaign.choices["guard"] == guard
        best = [a for a in campaign.attempts if a.verdict == Verdict.NEW_BEST]
        assert (best[-1].speedup if best else 0.0) == pytest.approx(final)
        if best:
            logged = run.data.metrics.get(keys.FINAL_BEST_SOL_SCORE)
            assert campaign.sol_scores.get(best[-1].index) == logged
