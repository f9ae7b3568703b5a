"""The `kernelarc` command's help and its handling of bad input (clear errors, exit 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELARC = [sys.executable, "-m", "kernelarc.cli"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    return subprocess.run(
        KERNELARC + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "examples:"),
        (["eval", "--help"], "Exit status 0 iff every workload PASSED"),
        (["export", "--help"], "solution.json"),
        (["campaign", "--help"], "Built-in problems"),
        (["sync", "--help"], "never duplicates anything"),
        (["report", "--help"], "report.html"),
    ],
)
def test_help_has_examples(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout


def test_unknown_problem_lists_builtins(tmp_path: Path) -> None:
    proc = _run(["campaign", "problem=no_such_problem", "tracking=none"], tmp_path)
    assert proc.returncode == 2
    assert "no_such_problem" in proc.stderr
    assert "rmsnorm" in proc.stderr


def test_typo_in_config_key_fails_at_compose(tmp_path: Path) -> None:
    proc = _run(["campaign", "budget.candidatez=3", "tracking=none"], tmp_path)
    assert proc.returncode != 0
    assert "candidatez" in proc.stderr


def test_unknown_team_kind_fails_before_the_campaign_starts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ["campaign", "agents.team=[compiler,gpt]", "tracking=none", f"hydra.run.dir={run_dir}"]
    proc = _run(args, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "agents.team[1]: unknown agent kind 'gpt'" in proc.stderr
    assert "e.g. agents.team=[compiler,llm:tiling]" in proc.stderr  # not eaten as markup
    assert not (run_dir / "config.yaml").exists() and not (run_dir / "attempts.jsonl").exists()


def test_bad_budget_is_a_config_error(tmp_path: Path) -> None:
    proc = _run(["campaign", "budget.candidates=0", "tracking=none"], tmp_path)
    assert proc.returncode != 0
    assert "budget.candidates must be >= 1" in proc.stderr


def test_eval_malformed_solution_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "solution.json"
    bad.write_text(
        json.dumps(
            {
                "name": "s",
                "definition": "rmsnorm",
                "author": "me",
                "spec": {
                    "languages": ["pytorch"],
                    "target_hardware": ["LOCAL"],
                    "entry_point": "k.py::run",
                },
                "sources": [{"path": "../k.py", "content": "x = 1\n"}],
            }
        )
    )
    proc = _run(["eval", "rmsnorm", "--solution", str(bad), "--device", "cpu"], tmp_path)
    assert proc.returncode == 2
    assert str(bad) in proc.stderr
    assert "sources.0.path" in proc.stderr


def test_export_of_a_non_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    proc = _run(["export", str(tmp_path), "--out", str(tmp_path / "out")], tmp_path)
    assert proc.returncode == 2
    assert "attempts.jsonl" in proc.stderr


def test_ci_runs_exactly_the_readme_test_command() -> None:
    root = Path(__file__).resolve().parents[2]
    ci = (root / ".ci" / "run").read_text()
    readme = (root / "README.md").read_text()
    assert "exec ./scripts/test.sh" in ci
    assert "./scripts/quickstart.sh" in readme
    assert "./scripts/test.sh" in readme
    assert readme.index("./scripts/quickstart.sh") < readme.index("./scripts/test.sh")
