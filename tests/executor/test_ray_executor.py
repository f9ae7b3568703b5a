"""executor=ray on a real local Ray cluster (num_cpus=2): a real campaign through the CLI, with
the busy actor SIGKILLed mid-evaluation. The evaluation must be retried on a fresh actor (one
infrastructure retry), every attempt recorded exactly once, the killed actor's runner must not
outlive it, and the throughput metrics must reach the MLflow parent run."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="executor=ray needs Ray: pip install 'kernelarc[ray]'")

from kernelarc.schema import Attempt
from kernelarc.tracking import keys

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 2


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _descendants(root: int) -> list[int]:
    tree, found, todo = _children(), [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _busy_actor(root: int) -> tuple[int, list[int]] | None:
    """An EvalActor of this campaign (Ray titles it so while it evaluates) whose sandbox runner
    has started, with the runner's processes."""
    for pid in _descendants(root):
        if _cmdline(pid).startswith("ray::EvalActor.evaluate"):
            runner = [p for p in _descendants(pid) if "kernelarc.runner" in _cmdline(p)]
            if runner:
                return pid, runner
    return None


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    # Ray's socket paths must stay short: a private dir directly under /tmp.
    path = Path(tempfile.mkdtemp(prefix="kray", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_campaign_on_ray_survives_a_killed_actor(tmp_path: Path, ray_tmp: Path) -> None:
    run_dir = tmp_path / "run"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = dict(
        os.environ,
        MLFLOW_DISABLE_TELEMETRY="true",
        RAY_TMPDIR=str(ray_tmp),
        RAY_AUTH_MODE="disabled",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    args = [
        sys.executable,
        "-m",
        "kernelarc.cli",
        "campaign",
        "name=ray-e2e",
        f"problem={ROOT / 'tests' / 'samples' / 'problems' / 'vector_add'}",
        "agents.team=[{kind: compiler}]",
        f"budget.candidates={BUDGET}",
        "eval.correctness_rounds=1",
        "guard=off",
        "device=cpu",
        "executor=ray",
        "executor.ray.num_cpus=2",
        f"tracking.uri={uri}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killed: int | None = None
    orphans: list[int] = []
    deadline = time.monotonic() + 900
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if killed is None and (busy := _busy_actor(proc.pid)) is not None:
                killed, orphans = busy
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.2)
        output = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    assert killed is not None, "no actor was seen evaluating"

    # The killed actor's runner died with it (it would otherwise keep its slot's device busy).
    grace = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() for p in orphans) and time.monotonic() < grace:
        time.sleep(0.5)
    assert not [p for p in orphans if Path(f"/proc/{p}").exists()], "runner outlived its actor"

    attempts = [
        Attempt.model_validate_json(line)
        for line in (run_dir / "attempts.jsonl").read_text().splitlines()
    ]
    assert [a.index for a in attempts] == list(range(BUDGET)), "an attempt was lost or doubled"
    assert len({a.proposal.id for a in attempts}) == BUDGET
    assert all(a.status != "INFRA_ERROR" for a in attempts), [a.error for a in attempts]
    record = json.loads((run_dir / "campaign.json").read_text())
    throughput = record["throughput"]
    assert throughput["executor"] == "ray"
    assert throughput["candidates"] == BUDGET
    assert throughput["infra_retries"] == 1
    assert throughput["infra_failures"] == 0

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ray-e2e")
    assert experiment is not None
    parent = next(
        r
        for r in client.search_runs([experiment.experiment_id])
        if keys.PARENT_RUN_ID not in r.data.tags
    )
    metrics = parent.data.metrics
    assert metrics[keys.THROUGHPUT_PREFIX + "infra_retries"] == 1.0
    assert metrics[keys.THROUGHPUT_CANDIDATES_PER_MIN] > 0
    assert metrics[keys.THROUGHPUT_PER_GPU] == metrics[keys.THROUGHPUT_CANDIDATES_PER_MIN]
    assert 0 < metrics[keys.THROUGHPUT_PREFIX + "timed_busy_fraction"] <= 1
