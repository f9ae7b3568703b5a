"""The fidelity benchmark's stages: the shared `Bench`, and the events, CV and repeatability runs.

Place in the flow: `bench_fidelity.run` builds one `Bench` (options, report, deadline) and calls
a stage per name in `--stages`; the correct, wrong, hostile and triton stages are
`Bench.serial` / `Bench.parallel` over their cases, the others are the functions here. A helper
module of `scripts/bench_fidelity.py`, not a script.
"""

import argparse
import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fidelity_cases import CV_REPEATS, OFFICIAL_ABSENT, Case, Report, Row, correct_cases
from fidelity_evaluators import Outcome, compare, run_inprocess, run_kernelarc, run_official
from fidelity_report import write_outputs


@contextlib.contextmanager
def cupti_shim() -> Iterator[str]:
    """A dir holding a `cupti` package that fails to import (KernelArc then uses CUDA events)."""
    folder = Path(tempfile.mkdtemp(prefix="bench_fidelity_nocupti_"))
    (folder / "cupti").mkdir()
    (folder / "cupti" / "__init__.py").write_text(
        'raise ImportError("bench_fidelity: CUPTI hidden to force CUDA events")\n'
    )
    for path in (folder, folder / "cupti"):
        path.chmod(0o755)  # the sandbox's unprivileged user must read it
    (folder / "cupti" / "__init__.py").chmod(0o644)
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def events_env(shim: str) -> dict[str, str]:
    """The runner's PYTHONPATH with the shim first (what LocalSandbox would set, plus it)."""
    from kernelarc.sandboxes.local.process_limits import package_root

    parts = [shim, str(package_root()), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return {"PYTHONPATH": os.pathsep.join(p for p in parts if p)}


@dataclass
class Bench:
    """Shared state of a run: options, report, deadline."""

    args: argparse.Namespace
    report: Report
    deadline: float
    official_ok: bool
    official_why: str = ""
    """Why the official evaluator is not run ('' when it is)."""

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def evaluate(self, case: Case, rounds: int | None = None) -> list[Row]:
        """Both evaluators on one case; a failure of the bench itself becomes a note."""
        try:
            return self._evaluate(case, self.args.rounds if rounds is None else rounds)
        except Exception as exc:
            self.report.notes.append(f"{case.name}: the bench failed: {exc!r}"[:500])
            return []

    def _evaluate(self, case: Case, rounds: int) -> list[Row]:
        ours = run_kernelarc(case, self.args.device, rounds, {})
        theirs = (
            run_official(case, self.args.device, self.args.official_site)
            if self.official_ok
            else None
        )
        if ours.note:
            self.report.notes.append(f"{case.name}: kernelarc sandbox: {ours.note}")
        if theirs is not None and theirs.note:
            self.report.notes.append(f"{case.name}: official: {theirs.note}")
        return compare(case, ours, theirs, self.args.device)

    def serial(self, cases: list[Case], stage: str) -> int:
        """Timed cases one at a time; the number of rows they gave."""
        before = len(self.report.rows)
        for case in cases:
            if self.time_left() < case_cost(case, self.args.device):
                self.report.skipped.append(f"{stage}: {case.name} (time budget)")
                continue
            self.report.rows += self.evaluate(case, self.args.correct_rounds)
        return len(self.report.rows) - before

    def parallel(self, cases: list[Case], stage: str) -> int:
        """Status-only cases, several at a time (their timings are not compared); the number of
        rows they gave."""
        before = len(self.report.rows)

        def one(case: Case) -> list[Row]:
            if self.time_left() < case_cost(case, self.args.device) + case.timeout_s / 4:
                self.report.skipped.append(f"{stage}: {case.name} (time budget)")
                return []
            return self.evaluate(case)

        with ThreadPoolExecutor(max_workers=self.args.jobs) as pool:
            for rows in pool.map(one, cases):
                self.report.rows += rows
        return len(self.report.rows) - before


def case_cost(case: Case, device: str) -> float:
    """A rough wall-clock estimate of one case through both evaluators (for the budget)."""
    base = 16.0 if device == "cuda" else 20.0
    return base + 2.0 * len(case.workloads)


def events_stage(bench: Bench, cases: list[Case]) -> int:
    """KernelArc again with CUDA events forced, on the correct cases; fills kernelarc_events_ms
    (returns how many rows it filled)."""
    filled = 0
    with cupti_shim() as shim:
        env = events_env(shim)
        for case in cases:
            if bench.time_left() < 10.0 + 2.0 * len(case.workloads):
                bench.report.skipped.append(f"events: {case.name} (time budget)")
                continue
            ours = run_kernelarc(case, bench.args.device, bench.args.correct_rounds, env)
            for row in bench.report.rows:
                if row.solution == case.name and row.workload in ours.workloads:
                    row.kernelarc_events_ms = ours.workloads[row.workload][1]
                    filled += row.kernelarc_events_ms is not None
    return filled


def cv_stage(bench: Bench, case: Case) -> None:
    """One workload repeated CV_REPEATS times in one request, KernelArc (and events) + official."""
    base = case.workloads[0]
    repeated = [{**base, "uuid": f"{base['uuid']}#{i}"} for i in range(CV_REPEATS)]
    rep = Case(case.problem, case.problem_dir, case.solution, "cv", repeated, case.timeout_s)
    if bench.time_left() < 4 * case_cost(rep, bench.args.device):
        bench.report.skipped.append(f"cv: {case.name} (time budget)")
        return
    result: dict[str, Any] = {
        "solution": case.name,
        "workload": base["uuid"],
        "repeats": CV_REPEATS,
    }
    device = bench.args.device
    result["kernelarc"] = _cv(run_kernelarc(rep, device, 1, {}))
    if device == "cuda":
        with cupti_shim() as shim:
            result["kernelarc_events"] = _cv(run_kernelarc(rep, device, 1, events_env(shim)))
    # Where the spread comes from: the same path without the jail, then timing alone.
    result["kernelarc_nojail"] = _cv(run_kernelarc(rep, device, 1, {}, jail=False))
    methods: list[str | None] = [None, "cuda_events"] if device == "cuda" else [None]
    for key, outcome in run_inprocess(rep, device, methods).items():
        name = "inprocess" if key == "default" else "inprocess_events"
        result[name] = _cv(outcome)
    if bench.official_ok:
        result["official"] = _cv(run_official(rep, bench.args.device, bench.args.official_site))
    bench.report.cv = result


def _cv(outcome: Outcome) -> dict[str, Any]:
    samples = [ms for _, ms, _, _ in outcome.workloads.values() if ms is not None]
    methods = sorted({m for _, ms, m, _ in outcome.workloads.values() if ms is not None})
    if len(samples) < 2:
        statuses = sorted({s for s, _, _, _ in outcome.workloads.values()})
        return {"samples_ms": samples, "cv": None, "statuses": statuses, "note": outcome.note}
    mean = statistics.fmean(samples)
    return {
        "samples_ms": samples,
        "mean_ms": mean,
        "stdev_ms": statistics.stdev(samples),
        "cv": statistics.stdev(samples) / mean if mean > 0 else None,
        "methods": methods,
    }


def pick_cv_case(bench: Bench, correct: list[Case]) -> Case | None:
    """The correct case whose first workload the official timed slowest above the threshold."""
    best: tuple[float, Case] | None = None
    for case in correct:
        first = str(case.workloads[0]["uuid"])
        for row in bench.report.rows:
            if row.solution == case.name and row.workload == first:
                ms = row.official_ms or row.kernelarc_ms or 0.0
                if best is None or ms > best[0]:
                    best = (ms, case)
    return best[1] if best else (correct[0] if correct else None)


def size_workloads(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The smallest and the largest workload by the product of their axes (one if only one)."""

    def size(workload: dict[str, Any]) -> int:
        axes = workload.get("axes") or {}
        return math.prod(v for v in axes.values() if isinstance(v, int))

    ordered = sorted(workloads, key=size)
    return [ordered[0], ordered[-1]] if len(ordered) > 1 else ordered[:1]


def repeat_cases(problems: list[str], device: str) -> list[list[Case]]:
    """Groups of cases for the repeatability stage, in priority order: every problem's reference,
    then (on cuda) its Triton template kernel; each on its smallest and largest workload."""
    cases = correct_cases(problems, device, triton=device == "cuda")
    groups = [
        [c for c in cases if c.name.endswith("-reference")],
        [c for c in cases if not c.name.endswith("-reference")],
    ]
    return [
        [
            Case(c.problem, c.problem_dir, c.solution, "repeat", size_workloads(c.workloads))
            for c in group
        ]
        for group in groups
        if group
    ]


def _new_side() -> dict[str, list[Any]]:
    return {
        "statuses": [],
        "reference_ms": [],
        "latency_ms": [],
        "speedup": [],
        "interleaved": [],
        "ci": [],
    }


def _record_run(side: dict[str, list[Any]], outcome: Outcome, uuid: str) -> None:
    status = outcome.workloads.get(uuid, ("RUNTIME_ERROR", None, "", "no trace"))[0]
    side["statuses"].append(status)
    perf = outcome.perf.get(uuid)
    if status != "PASSED" or perf is None:
        return
    for key in ("reference_ms", "latency_ms", "speedup", "interleaved"):
        if perf.get(key) is not None:
            side[key].append(perf[key])
    side["ci"].append(perf["ci"])


def repeatability_stage(bench: Bench, groups: list[list[Case]]) -> int:
    """KernelArc's whole evaluation `--repeats` times on the same solutions (interleaved: run 1
    of every case of a group, then run 2, ...), the official evaluator beside it when installed.
    A group keeps only the cases whose every run fits the time left (estimated from the runs so
    far); the rest are listed as skipped. Returns the number of workloads with two or more timed
    KernelArc runs."""
    args, report = bench.args, bench.report
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    report.repeatability = {
        "repeats": args.repeats,
        "correctness_rounds": args.repeat_rounds,
        "official": bench.official_ok,
        "official_absent": ""
        if bench.official_ok
        else ("not run (--kernelarc-only)" if args.kernelarc_only else OFFICIAL_ABSENT),
        "workloads": [],
    }
    spent: list[float] = []

    def estimate(case: Case) -> float:
        if spent:
            return statistics.median(spent)
        return case_cost(case, args.device) * (1.0 if bench.official_ok else 0.6)

    runs = args.repeats
    for group in groups:
        keep: list[Case] = []
        # Run 1 admits a case only when all its runs, and the later runs of the cases already
        # admitted, fit the time left (the first case of the stage: two runs, a spread).
        for case in group:
            need = estimate(case) * ((runs - 1) * len(keep) + (runs if entries else 2))
            if bench.time_left() < need:
                report.skipped.append(f"repeatability: {case.name} (time budget)")
                continue
            keep.append(case)
            _timed_run(bench, case, entries, spent)
        for done in range(1, runs):
            # Estimates can be wrong: drop whole cases from the end rather than thin out all.
            while keep and len(keep) * (runs - done) * estimate(keep[0]) > bench.time_left():
                dropped = keep.pop()
                report.skipped.append(
                    f"repeatability: {dropped.name} runs {done + 1}-{runs} (time budget)"
                )
            for case in keep:
                if bench.time_left() < estimate(case):
                    report.skipped.append(f"repeatability: {case.name} run {done + 1} (time)")
                    continue
                _timed_run(bench, case, entries, spent)
    report.repeatability["workloads"] = list(entries.values())
    return sum(len(e["kernelarc"]["speedup"]) >= 2 for e in entries.values())


def _timed_run(
    bench: Bench, case: Case, entries: dict[tuple[str, str], dict[str, Any]], spent: list[float]
) -> None:
    started = time.monotonic()
    _repeat_once(bench, case, entries)
    spent.append(time.monotonic() - started)
    # Written after every run: a kill (FIDELITY_TIMEOUT) keeps the runs done.
    bench.report.repeatability["workloads"] = list(entries.values())
    write_outputs(bench.args, bench.report)


def _repeat_once(bench: Bench, case: Case, entries: dict[tuple[str, str], dict[str, Any]]) -> None:
    """One run of one case through KernelArc (and the official evaluator), appended per workload."""
    args = bench.args
    try:
        ours = run_kernelarc(case, args.device, args.repeat_rounds, {})
    except Exception as exc:  # a failure of the bench itself: a note, the run counts as missing
        bench.report.notes.append(f"repeatability: {case.name}: the bench failed: {exc!r}"[:500])
        ours = Outcome({})
    theirs = None
    if bench.official_ok:
        try:
            theirs = run_official(case, args.device, args.official_site)
        except Exception as exc:
            bench.report.notes.append(f"repeatability: {case.name}: official failed: {exc!r}"[:500])
            theirs = Outcome({})
    for workload in case.workloads:
        uuid = str(workload["uuid"])
        entry = entries.setdefault(
            (case.name, uuid),
            {
                "problem": case.problem,
                "solution": case.name,
                "workload": uuid,
                "kernelarc": _new_side(),
                "official": _new_side() if bench.official_ok else None,
            },
        )
        _record_run(entry["kernelarc"], ours, uuid)
        if theirs is not None:
            _record_run(entry["official"], theirs, uuid)
