"""`kernelarc campaign agents=mixed llm=openai llm.base_url=...` from the command line: a mixed
team (offline compiler and tiling agents, five LLM agents) runs against a real local
OpenAI-compatible server, and the LLM members' attempts carry their model and transcripts."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openai_server import KEY_ENV, ChatServer, Scripted, add_kernel, kernel_reply

from kernelarc.rundir.attempts_log import read_attempts

pytestmark = pytest.mark.slow

PROBLEM = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"


def test_mixed_team_campaign_from_the_cli(tmp_path: Path) -> None:
    served = iter(range(10_000))

    def answer(body: dict[str, Any]) -> Scripted:
        # A fresh, correct kernel for every request, so every LLM proposal is new.
        return Scripted(text=kernel_reply(add_kernel(next(served))))

    with ChatServer(responder=answer) as server:
        run_dir = tmp_path / "run"
        env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true", **{KEY_ENV: "sk-test-not-real"})
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelarc.cli",
                "campaign",
                "agents=mixed",
                "llm=openai",
                f"llm.base_url={server.base_url}",
                "llm.model=served-model",
                f"llm.api_key_env={KEY_ENV}",
                "llm.prompt_price_per_mtok=1.0",
                f"problem={PROBLEM}",
                "device=cpu",
                "budget.candidates=5",
                "eval.correctness_rounds=2",
                "guard=off",
                "tracking=none",
                f"hydra.run.dir={run_dir}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert server.hits >= 1
    attempts = read_attempts(run_dir / "attempts.jsonl")
    assert len(attempts) == 5
    llm_attempts = [a for a in attempts if a.proposal.model is not None]
    assert llm_attempts, "no LLM member got a candidate evaluated"
    for attempt in llm_attempts:
        assert attempt.proposal.model == "served-model"
        assert attempt.proposal.llm and attempt.proposal.llm[-1].reply
        assert attempt.proposal.agent.startswith("llm-")
    # The key reached the endpoint (and only there): the server saw it as a bearer token.
    assert all(h == "Bearer sk-test-not-real" for h in server.auth_headers)
    record = (run_dir / "campaign.json").read_text()
    assert '"llm_tokens": 0' not in record
