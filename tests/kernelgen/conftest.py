"""Fixtures of the generator tests: the test problems, traced once per session."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gen_problems import PROBLEMS, traced_problems

from kernelarc.problems.files import Problem
from kernelarc.schema.op_graph import TraceSet

CHECKER = Path(__file__).with_name("gen_check.py")


@pytest.fixture(scope="session")
def gen_problems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Problem, TraceSet]]:
    """Every test problem with its traced graphs."""
    root = tmp_path_factory.mktemp("gen_problems")
    return traced_problems(root, PROBLEMS)


@pytest.fixture(scope="session")
def run_checks(tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[dict], str], dict]:
    """Runs gen_check.py on a list of {label, problem, source} in one subprocess."""

    def run(checks: list[dict], device: str) -> dict:
        tmp = tmp_path_factory.mktemp("gen_check")
        job, result = tmp / "job.json", tmp / "result.json"
        job.write_text(json.dumps({"device": device, "checks": checks}))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        subprocess.run(
            [sys.executable, str(CHECKER), str(job), str(result)], check=True, env=env, timeout=1800
        )
        results: dict = json.loads(result.read_text())
        return results

    return run
