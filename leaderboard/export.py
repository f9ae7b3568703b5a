"""Export a campaign's best solutions in the SOL-ExecBench format (the last step of the flow).

Reads `<run_dir>/attempts.jsonl` (the source of truth, not MLflow), picks per problem the best
PASSED attempt and writes `<out>/<problem>/solution.json`, `<out>/<problem>/traces.jsonl` and
`<out>/summary.json`. Output is deterministic: the same attempts give byte-identical files.
"""

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kernelarc.errors import ConfigError
from kernelarc.schema import Attempt, EvalStatus, Solution, TargetHardware
from kernelarc.schema.solution import CPP_LANGUAGES
from kernelarc.tracking.attempts_log import ATTEMPTS_FILE, read_attempts

logger = logging.getLogger(__name__)

SOLUTION_FILE = "solution.json"
"""Per-problem solution file name."""
TRACES_FILE = "traces.jsonl"
"""Per-problem traces file name."""
SUMMARY_FILE = "summary.json"
"""Top-level summary file name."""

RESERVED_SOURCE_NAMES = frozenset(
    {
        "definition.json",
        "workload.jsonl",
        "solution.json",
        "config.json",
        "eval_driver.py",
        "build_ext.py",
        "_reference.py",
    }
)
"""Files the official evaluator writes into the staging dir next to the sources."""
SHADOWING_PACKAGES = frozenset({"sol_execbench", "safetensors", "triton", "torch", "numpy"})
"""Packages the official driver imports after putting the sources first on sys.path."""
COMPILED_SUFFIXES = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c"})
"""C++ files the official build compiles, only when they sit in the top-level dir."""


@dataclass(frozen=True)
class Selection:
    """The outcome of picking per problem."""

    best: dict[str, Attempt]
    """Problem name to its best PASSED attempt."""
    without_passed: list[str]
    """Problems that have attempts but none PASSED, sorted."""


def select_best(attempts: Iterable[Attempt]) -> Selection:
    """Pick per problem the PASSED attempt with the highest speedup.

    Ties go to the lower latency, then to the lower attempt index. A non-finite speedup is not
    eligible. Pure apart from logging.
    """
    best: dict[str, Attempt] = {}
    seen: set[str] = set()
    for attempt in attempts:
        seen.add(attempt.problem)
        if attempt.status != EvalStatus.PASSED or attempt.speedup is None:
            continue
        if not math.isfinite(attempt.speedup):
            logger.warning(
                "attempt %d (%s) PASSED with a non-finite speedup %s; not eligible",
                attempt.index,
                attempt.proposal.id,
                attempt.speedup,
            )
            continue
        current = best.get(attempt.problem)
        if current is None or _rank(attempt) < _rank(current):
            best[attempt.problem] = attempt
    return Selection(best=best, without_passed=sorted(seen - set(best)))


def check_exportable(problem: str, solution: Solution) -> None:
    """Refuse a solution the official evaluator would mis-stage.

    Raises:
        ConfigError: an unsafe problem name, a reserved source file name, a source that shadows a
            package the driver imports, a nested C++ file that would not be compiled, or a
            target hardware other than B200/LOCAL; the message names the problem and the file.
    """
    if not _safe_dir_name(problem):
        msg = f"problem name {problem!r} cannot be an export directory name; rename the problem"
        raise ConfigError(msg)
    where = f"problem {problem!r}, solution {solution.name!r}"
    for source in solution.sources:
        path = PurePosixPath(source.path)
        top = path.parts[0]
        if len(path.parts) == 1 and (
            top in RESERVED_SOURCE_NAMES
            or (top.startswith("benchmark_kernel") and top.endswith(".so"))
        ):
            msg = (
                f"{where}: source {source.path!r} uses a file name the SOL-ExecBench evaluator "
                "writes itself; rename the file"
            )
            raise ConfigError(msg)
        module = top.removesuffix(".py") if len(path.parts) == 1 else top
        if module in SHADOWING_PACKAGES:
            msg = (
                f"{where}: source {source.path!r} shadows the {module!r} package the "
                "SOL-ExecBench driver imports; rename it"
            )
            raise ConfigError(msg)
        if (
            set(solution.spec.languages) & CPP_LANGUAGES
            and len(path.parts) > 1
            and path.suffix in COMPILED_SUFFIXES
        ):
            msg = (
                f"{where}: C++ source {source.path!r} is not in the top-level dir, so the "
                "SOL-ExecBench build would not compile it; move it to the top level"
            )
            raise ConfigError(msg)
    allowed = {h.value for h in TargetHardware}
    bad = sorted({str(h) for h in solution.spec.target_hardware} - allowed)
    if bad:
        msg = f"{where}: target_hardware {bad} is not accepted; use {sorted(allowed)}"
        raise ConfigError(msg)


def export_run(run_dir: Path, out_dir: Path) -> list[Path]:
    """Export the best PASSED solution of every problem of a KernelArc run dir.

    Nothing is written unless every selected solution passes `check_exportable`. Problems with
    attempts but no PASSED one are skipped with a warning.

    Args:
        run_dir: a campaign's run dir (holds attempts.jsonl).
        out_dir: where to write; created if missing; existing files of the same names are
            replaced, others are left alone.

    Returns:
        The written files: per problem (in name order) solution.json and traces.jsonl, then
        summary.json.

    Raises:
        ConfigError: run_dir is missing or not a KernelArc run dir, no problem has a PASSED
            attempt, or a selected solution is not exportable.
        TrackingError: attempts.jsonl has a corrupt line.
    """
    attempts = _load(run_dir)
    selection = select_best(attempts)
    if not selection.best:
        problems = ", ".join(selection.without_passed)
        msg = f"{run_dir}: no PASSED attempt for any problem ({problems}); nothing to export"
        raise ConfigError(msg)
    for problem, attempt in sorted(selection.best.items()):
        check_exportable(problem, attempt.proposal.solution)
        spec = attempt.proposal.solution.spec
        if set(spec.languages) & CPP_LANGUAGES and spec.compile_options is None:
            logger.warning(
                "problem %r: C++ solution %s has no compile_options, so the official build "
                "will not pass -O3; exported as evaluated",
                problem,
                attempt.proposal.id,
            )
    if selection.without_passed:
        logger.warning(
            "%s: no PASSED attempt for %s; exporting the other problems only",
            run_dir,
            ", ".join(selection.without_passed),
        )
    written: list[Path] = []
    summary: dict[str, dict[str, object]] = {}
    for problem, attempt in sorted(selection.best.items()):
        written.extend(_write_problem(out_dir / problem, attempt))
        summary[problem] = {
            "attempt_index": attempt.index,
            "proposal_id": attempt.proposal.id,
            "solution": attempt.proposal.solution.name,
            "agent": attempt.proposal.agent,
            "strategy": attempt.proposal.strategy,
            "speedup": attempt.speedup,
            "latency_ms": attempt.latency_ms,
        }
    written.append(_write(out_dir / SUMMARY_FILE, _json(summary, indent=2)))
    return written


def _write_problem(target: Path, attempt: Attempt) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    # model_dump keeps defaults, so destination_passing_style is always explicit.
    solution = attempt.proposal.solution.model_dump(mode="json", exclude_none=True)
    traces = [_json(t.model_dump(mode="json", exclude_none=True)) for t in attempt.traces]
    return [
        _write(target / SOLUTION_FILE, _json(solution, indent=2)),
        _write(target / TRACES_FILE, "".join(traces)),
    ]


def _load(run_dir: Path) -> list[Attempt]:
    if not run_dir.is_dir():
        msg = f"{run_dir}: run dir not found; pass the dir of a KernelArc campaign run"
        raise ConfigError(msg)
    log = run_dir / ATTEMPTS_FILE
    if not log.is_file():
        msg = f"{run_dir}: not a KernelArc run dir (no {ATTEMPTS_FILE})"
        raise ConfigError(msg)
    attempts = read_attempts(log)
    if not attempts:
        msg = f"{log}: no attempts recorded; nothing to export"
        raise ConfigError(msg)
    return attempts


def _rank(attempt: Attempt) -> tuple[float, float, int]:
    latency = attempt.latency_ms if attempt.latency_ms is not None else float("inf")
    return (-(attempt.speedup or 0.0), latency, attempt.index)


def _safe_dir_name(name: str) -> bool:
    return (
        bool(name)
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


def _json(data: object, indent: int | None = None) -> str:
    separators = (",", ": ") if indent is not None else (",", ":")
    text = json.dumps(data, indent=indent, sort_keys=True, separators=separators, allow_nan=False)
    return text + "\n"


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path
