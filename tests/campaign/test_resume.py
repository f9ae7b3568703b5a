"""Resume a killed campaign: `kill -9` in the middle of an evaluation, then `kernelarc resume`
(real subprocesses, real LocalSandbox evaluations of the vector_add sample, real MLflow SQLite
store, LLM agents answered by the real local OpenAI-compatible test server); a kill in the middle
of a write (a truncated last line); the board and plateau counters taken back (scripted team)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from scripted import PROBLEM_DIR, ScriptedAgent, adder, campaign_config

from kernelarc.agents import Agent, AgentContext
from kernelarc.campaign import run_campaign
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.cli import main
from kernelarc.cli.campaign_resume import resumed_config
from kernelarc.config import CampaignConfig, CoordinationConfig
from kernelarc.coordination import read_conclusion_events
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_record
from kernelarc.schema import Attempt, EvalStatus
from kernelarc.schema.coordination import ConclusionDraft, Evidence
from kernelarc.tracking import keys
from kernelarc.tracking.null_tracker import NullTracker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from openai_server import KEY_ENV, ChatServer, Scripted, kernel_reply

pytestmark = pytest.mark.slow

KERNELARC = [sys.executable, "-m", "kernelarc.cli"]
BUDGET = 3


def _slow_kernel(variant: int) -> str:
    """A correct vector_add kernel, distinct per variant, slow enough to be killed mid-run."""
    return (
        "import time\n\nimport torch\n\n\ndef run(x, y):\n"
        f"    # variant {variant}\n    time.sleep(0.1)\n    return torch.add(x, y)\n"
    )


@pytest.fixture
def server() -> Iterator[ChatServer]:
    served = iter(range(10_000))

    def answer(body: dict[str, Any]) -> Scripted:
        return Scripted(text=kernel_reply(_slow_kernel(next(served))))

    with ChatServer(responder=answer) as chat:
        yield chat


def _session_pids(sessions: set[int]) -> list[int]:
    """Live (not zombie) processes whose session is one of `sessions`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) in sessions:
            found.append(int(entry.name))
    return found


def _runner_children(pid: int) -> list[int]:
    """Sandbox runner processes started by `pid` (each leads a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"kernelarc.runner" in cmdline:
            found.append(int(entry.name))
    return found


def _evaluating(runners: list[int]) -> list[int]:
    """The runners given a request (a warm spare waits in its temp dir without request.json)."""
    found = []
    for pid in runners:
        with contextlib.suppress(OSError):
            if (Path(os.readlink(f"/proc/{pid}/cwd")) / "request.json").exists():
                found.append(pid)
    return found


def _complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def _kill_mid_evaluation(proc: "subprocess.Popen[bytes]", run_dir: Path, log: Path) -> None:
    """Wait for a recorded attempt and an evaluation in flight, then SIGKILL the campaign's
    process group and the runners' own groups, the warm spare's included (a killed campaign
    leaves its runners behind)."""
    deadline = time.monotonic() + 240
    runners: list[int] = []
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"campaign ended before the kill:\n{log.read_text()[-3000:]}"
        runners = _runner_children(proc.pid)
        if _complete_lines(run_dir / "attempts.jsonl") >= 1 and _evaluating(runners):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"no evaluation in flight after an attempt:\n{log.read_text()[-3000:]}")
    os.killpg(proc.pid, signal.SIGKILL)
    for runner in runners:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner, signal.SIGKILL)
    proc.wait(timeout=30)
    sessions = {proc.pid, *runners}
    gone_by = time.monotonic() + 30
    while _session_pids(sessions) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert not _session_pids(sessions), "processes of the killed campaign survived"


def test_kill_mid_evaluation_then_resume(tmp_path: Path, server: ChatServer) -> None:
    run_dir = tmp_path / "run"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true", **{KEY_ENV: "sk-test-not-real"})
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *KERNELARC,
                "campaign",
                "name=resume-test",
                f"problem={PROBLEM_DIR}",
                "device=cpu",
                f"budget.candidates={BUDGET}",
                "eval.correctness_rounds=1",
                "eval.warmup=0",
                "eval.iterations=2",
                "guard=off",
                "agents.team=[{kind:llm,strategy:fusion},{kind:llm,strategy:tiling}]",
                "llm=openai",
                f"llm.base_url={server.base_url}",
                "llm.model=served-model",
                f"llm.api_key_env={KEY_ENV}",
                f"tracking.uri={uri}",
                f"hydra.run.dir={run_dir}",
            ],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _kill_mid_evaluation(proc, run_dir, log)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    before = (run_dir / "attempts.jsonl").read_bytes()
    done = read_attempts(run_dir / "attempts.jsonl")
    assert 1 <= len(done) < BUDGET
    assert read_campaign_record(run_dir).status == "RUNNING"

    resumed = subprocess.run(
        [*KERNELARC, "resume", str(run_dir)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]

    after = (run_dir / "attempts.jsonl").read_bytes()
    assert after.startswith(before[: before.rfind(b"\n") + 1]), "a finished attempt changed"
    attempts = read_attempts(run_dir / "attempts.jsonl")
    assert [a.index for a in attempts] == list(range(BUDGET))
    assert len({a.proposal.id for a in attempts}) == BUDGET, "a proposal was evaluated twice"
    assert all(a.status == EvalStatus.PASSED for a in attempts), [a.status for a in attempts]
    record = read_campaign_record(run_dir)
    assert record.status == "FINISHED" and len(record.resumed_at) == 1
    assert record.started_at <= record.resumed_at[0]
    # The resume ran with the recorded config, in the same run dir (its log went on there).
    assert "resuming" in (run_dir / "kernelarc.log").read_text()
    _assert_one_mlflow_campaign(uri, attempts)


def _assert_one_mlflow_campaign(uri: str, attempts: list[Attempt]) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("resume-test")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get(keys.KIND) == keys.KIND_CAMPAIGN]
    assert len(parents) == 1, "the resume made a second campaign run"
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(parent.info.run_id, "campaign/candidates")]
    assert sorted(steps) == list(range(BUDGET)), steps
    agents = [r for r in runs if r.data.tags.get(keys.KIND) == keys.KIND_AGENT]
    assert {r.data.tags[keys.AGENT] for r in agents} == {a.proposal.agent for a in attempts}
    assert len(agents) == len({r.data.tags[keys.AGENT] for r in agents}), "agent runs doubled"
    logged: list[int] = []
    for run in agents:
        assert run.data.tags.get(keys.PARENT_RUN_ID) == parent.info.run_id
        assert run.info.status == "FINISHED"
        history = client.get_metric_history(run.info.run_id, "eval/status_code")
        logged += [m.step for m in history]
    assert sorted(logged) == list(range(BUDGET)), f"attempt metrics lost or doubled: {logged}"


# --- a kill in the middle of a write; what the loop takes back (scripted team, tracking off) ---


def _cite(attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
    cite = Evidence(attempt_index=attempt.index, proposal_id=attempt.proposal.id, metric="status")
    claim = f"plain addition passes (attempt {attempt.index})"
    return [ConclusionDraft(claim=claim, evidence=[cite])]


def _memory_only(patience: int = 2) -> CoordinationConfig:
    return CoordinationConfig(
        memory=True, guard=False, peer_state=False, drafting=False, plateau_patience=patience
    )


WRONG = "import torch\n\n\ndef run(x, y):\n    return x - y\n"


def test_truncated_lines_from_a_kill_mid_write_are_dropped_on_resume(tmp_path: Path) -> None:
    cfg = campaign_config(1, _memory_only(), max_parallel=1)
    first = ScriptedAgent("a", [adder("1")], conclude=_cite)
    run_campaign(cfg, tmp_path, NullTracker(), team=[first])
    attempts_path, board_path = tmp_path / "attempts.jsonl", tmp_path / "conclusions.jsonl"
    kept = attempts_path.read_bytes()
    events = read_conclusion_events(board_path)
    assert len(events) == 1
    # The process died while writing: half a line, no newline, in both logs.
    with attempts_path.open("ab") as handle:
        handle.write(kept.splitlines()[-1][:57])
    with board_path.open("ab") as handle:
        handle.write(b'{"kind": "published", "at": "2026-')

    more = ScriptedAgent("a", [adder("1"), adder("2")], conclude=_cite)
    cfg.budget.candidates = 2
    cfg.resume = str(tmp_path)
    summary = run_campaign(cfg, tmp_path, NullTracker(), team=[more])

    assert summary.status == "FINISHED" and summary.attempts == 2
    data = attempts_path.read_bytes()
    assert data.startswith(kept) and data.endswith(b"\n")
    attempts = read_attempts(attempts_path)
    assert [a.index for a in attempts] == [0, 1]
    assert len({a.proposal.id for a in attempts}) == 2
    # The agent saw its recorded attempt and the board on its first call after the resume.
    assert [a.index for a in more.contexts[0].attempts] == [0]
    assert [c.claim for c in more.contexts[0].conclusions] == ["plain addition passes (attempt 0)"]
    assert more.contexts[0].seen_ids == {attempts[0].proposal.id}
    kinds = [e.kind for e in read_conclusion_events(board_path)]
    assert kinds == ["published", "published"]
    assert summary.conclusions == 2
    assert read_campaign_record(tmp_path).resumed_at


def test_resume_takes_back_plateau_counters_and_the_incumbent(tmp_path: Path) -> None:
    cfg = campaign_config(2, _memory_only(patience=1), max_parallel=1)
    stalls = ScriptedAgent("s", [adder("ok"), WRONG])
    run_campaign(cfg, tmp_path, NullTracker(), team=[stalls])
    recorded = read_attempts(tmp_path / "attempts.jsonl")
    assert [a.status == EvalStatus.PASSED for a in recorded] == [True, False]

    # A fresh coordinator told the recorded attempts counts as the live one did.
    problem = resolve_problem(cfg.problem, cfg.workloads)
    team: list[Agent] = [ScriptedAgent("s", [])]
    coordinator = Coordinator(cfg.coordination, problem, "cpu", team, tmp_path)
    coordinator.restore(recorded)
    assert coordinator.plateaus["s"].flat == 1 and coordinator.plateaus["s"].due
    assert coordinator.plateaus["s"].level == recorded[0].speedup

    # Drafting on after the resume: the restored count makes the very first context a draft.
    cfg.coordination.drafting = True
    cfg.budget.candidates = 3
    cfg.resume = str(tmp_path)
    more = ScriptedAgent("s", [adder("fresh")])
    summary = run_campaign(cfg, tmp_path, NullTracker(), team=[more])
    assert summary.attempts == 3 and summary.failures == 1
    assert more.contexts[0].draft is not None
    assert summary.best is not None and summary.best.index in (0, 2)
    assert more.contexts[0].incumbent is not None
    assert more.contexts[0].incumbent.proposal.id == recorded[0].proposal.id


def test_resume_of_a_dir_that_is_not_a_run_dir_names_it_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["resume", str(empty)]) == 2
    err = capsys.readouterr().err
    assert str(empty) in " ".join(err.split()) and "config.yaml" in err
    assert "outputs/<name>/<time>" in err
    assert not (empty / "kernelarc.log").exists(), "hydra ran on a dir that is not a run dir"
    cfg = campaign_config(1, _memory_only())
    cfg.resume = str(empty)
    with pytest.raises(ConfigError, match=r"attempts\.jsonl"):
        run_campaign(cfg, empty, NullTracker(), team=[ScriptedAgent("a", [])])


def test_resume_refuses_an_override_that_changes_the_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(
        json.dumps({"name": "x", "problem": str(PROBLEM_DIR), "seed": 3}), encoding="utf-8"
    )
    (run_dir / "attempts.jsonl").write_text("", encoding="utf-8")
    assert main(["resume", str(run_dir), "seed=4"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'seed'" in err and "3" in err and "budget" in err


def test_resume_config_is_the_recorded_one_with_budget_and_infrastructure_overrides(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text(
        "name: x\nseed: 3\nproblem: vector_add\nbudget:\n  candidates: 4\n", encoding="utf-8"
    )
    composed = OmegaConf.structured(CampaignConfig)
    composed.budget.candidates = 9
    composed.tracking.kind = "none"
    composed.seed = 3  # an override that repeats the recorded value is no change
    overrides = ["budget.candidates=9", "tracking=none", "seed=3", f"resume={tmp_path}"]
    cfg = resumed_config(composed, overrides, tmp_path)
    assert (cfg.seed, cfg.name, cfg.problem) == (3, "x", "vector_add")
    assert cfg.budget.candidates == 9 and cfg.tracking.kind == "none"
    assert cfg.resume == str(tmp_path)
    with pytest.raises(ConfigError, match="'experiment'"):
        resumed_config(composed, ["+experiment=smoke"], tmp_path)
    with pytest.raises(ConfigError, match="'problem'"):
        resumed_config(composed, ["problem=rmsnorm"], tmp_path)
