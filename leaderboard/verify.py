"""`kernelarc export --verify`: re-evaluate an export from its files alone and compare.

Place in the flow: after `write_export`. For every problem listed in manifest.json it loads
`<problem>/problem/` and `<problem>/solution.json` (nothing from the run dirs), evaluates them in
a fresh LocalSandbox and compares each workload's status with the recorded `traces.jsonl`.
Latencies are compared only when the hardware is the same; otherwise they are reported as not
compared. When the official evaluator is installed (`leaderboard.official`), its statuses are
reported beside KernelArc's; they do not decide agreement (on CPU they are always RUNTIME_ERROR).
"""

import json
from dataclasses import dataclass
from pathlib import Path

from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.guard.score import geometric_mean
from kernelarc.problems.files import load_problem, load_solution
from kernelarc.sandboxes import make_sandbox
from kernelarc.schema import EvalRequest, TimingConfig, Trace
from leaderboard.export import MANIFEST_FILE, PROBLEM_DIR, SOLUTION_FILE, TRACES_FILE
from leaderboard.official import official_available, run_official


@dataclass(frozen=True)
class WorkloadCheck:
    """One workload: recorded status, KernelArc's and the official evaluator's."""

    workload: str
    """Workload uuid."""
    recorded: str
    """Status in traces.jsonl (`missing` if absent)."""
    kernelarc: str
    """Status of the re-evaluation (`missing` if absent)."""
    official: str | None
    """Status from the official evaluator; None when it was not run."""


@dataclass(frozen=True)
class ProblemCheck:
    """The verification of one exported problem."""

    problem: str
    """Definition name."""
    workloads: tuple[WorkloadCheck, ...]
    """Per workload of the exported workload.jsonl."""
    agree: bool
    """Every re-evaluated status equals the recorded one."""
    note: str
    """Latency comparison, or why the problem could not be verified."""
    official_note: str = ""
    """Why the official evaluator gave no (or partial) statuses."""


def verify_export(
    out_dir: Path,
    *,
    device: str,
    timing: TimingConfig,
    rounds: int = 10,
    seed: int = 200,
    timeout_s: float = 600.0,
    official: bool = True,
) -> list[ProblemCheck]:
    """Verify every problem of an export (see the module docstring).

    Args:
        out_dir: an export dir (holds manifest.json).
        device: `cpu` or `cuda`, where to re-evaluate.
        timing: warm-up and timed iterations.
        rounds: correctness rounds per workload.
        seed: input seed (the official one is 200).
        timeout_s: wall-clock limit per problem, for each evaluator.
        official: also run the official evaluator when it is installed.

    Raises:
        ConfigError: out_dir is not an export dir.
    """
    manifest = out_dir / MANIFEST_FILE
    try:
        problems = sorted(json.loads(manifest.read_text(encoding="utf-8"))["problems"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        msg = f"{out_dir}: not a KernelArc export (unreadable {MANIFEST_FILE}: {exc})"
        raise ConfigError(msg) from exc
    run_it = official and official_available()
    return [
        _verify_problem(out_dir / p, p, device, timing, rounds, seed, timeout_s, run_it)
        for p in problems
    ]


def _verify_problem(
    folder: Path,
    name: str,
    device: str,
    timing: TimingConfig,
    rounds: int,
    seed: int,
    timeout_s: float,
    official: bool,
) -> ProblemCheck:
    try:
        problem = load_problem(folder / PROBLEM_DIR)
        solution = load_solution(folder / SOLUTION_FILE)
        recorded = _read_traces(folder / TRACES_FILE)
    except KernelarcError as exc:
        return ProblemCheck(name, (), False, f"cannot verify from the exported files: {exc}")
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=solution,
        device="cuda" if device == "cuda" else "cpu",
        seed=seed,
        correctness_rounds=rounds,
        timing=timing,
        problem_dir=str((folder / PROBLEM_DIR).resolve()),
    )
    sandbox = make_sandbox("local", warm_spare=False)  # one evaluation: no spare to keep warm
    try:
        result = sandbox.evaluate(request, timeout_s=timeout_s)
    except KernelarcError as exc:
        return ProblemCheck(name, (), False, f"the sandbox failed: {exc}")
    finally:
        sandbox.close()
    measured = {t.workload.uuid: t for t in result.traces}
    official_result = (
        run_official(folder / PROBLEM_DIR, folder / SOLUTION_FILE, timeout_s) if official else None
    )
    rows = tuple(
        WorkloadCheck(
            workload=w.uuid,
            recorded=_status(recorded.get(w.uuid)),
            kernelarc=_status(measured.get(w.uuid)),
            official=(official_result.statuses.get(w.uuid, "missing") if official_result else None),
        )
        for w in problem.workloads
    )
    agree = bool(rows) and all(r.recorded == r.kernelarc for r in rows)
    note = _latency_note(recorded, measured)
    return ProblemCheck(name, rows, agree, note, official_result.note if official_result else "")


def _read_traces(path: Path) -> dict[str, Trace]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        traces = [Trace.model_validate_json(line) for line in lines if line.strip()]
    except (OSError, ValueError) as exc:
        msg = f"{path}: unreadable traces ({exc})"
        raise ConfigError(msg) from exc
    return {t.workload.uuid: t for t in traces}


def _status(trace: Trace | None) -> str:
    if trace is None or trace.evaluation is None:
        return "missing"
    return str(trace.evaluation.status)


def _latency_note(recorded: dict[str, Trace], measured: dict[str, Trace]) -> str:
    pairs = []
    hardware = set()
    for uuid, old in recorded.items():
        new = measured.get(uuid)
        if old.evaluation is None or new is None or new.evaluation is None:
            continue
        hardware.add((old.evaluation.environment.hardware, new.evaluation.environment.hardware))
        before, after = old.evaluation.performance, new.evaluation.performance
        if before is not None and after is not None:
            pairs.append((before.latency_ms, after.latency_ms))
    if not pairs:
        return "latencies not compared (no workload PASSED in both)"
    if any(a != b for a, b in hardware):
        where = ", ".join(sorted({f"recorded on {a}, verified on {b}" for a, b in hardware}))
        return f"latencies not compared ({where})"
    ratio = geometric_mean([new / old for old, new in pairs if old > 0])
    return f"latency re-measured / recorded: {ratio:.3g} (geometric mean, same hardware)"
