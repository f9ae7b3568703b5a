"""The throughput benchmark's analysis and tables: scaling, disturbance, markdown.

Place in the flow: `bench_throughput.py` runs one campaign per arm (executor, GPU count,
screens per GPU) and calls `scaling` and `disturbance` over the runs so far, then `table` for the
markdown it prints (also for `--compare` of earlier JSON files). Pure functions of the result
dict, apart from the campaign running so they can be read, and re-run on saved JSON, alone.
"""

import statistics
from typing import Any


def arm(run: dict[str, Any]) -> str:
    """The screens/GPU cell of a run, with its resident-judge setting when it has one."""
    screens = str(run.get("screens", ""))
    if "resident" not in run:
        return screens
    resident = run["resident"]
    again = f" (again: {run['repeat'] + 1}.)" if run.get("repeat") else ""
    return f"{screens}, {'resident ' + str(resident) if resident else 'one-off runners'}{again}"


def _ratios(run: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Latency ratios (run / base) over the candidates both timed: count, median, min, max."""
    theirs = base.get("latencies", {})
    mine = run.get("latencies", {})
    ratios = [mine[k] / theirs[k] for k in sorted(set(mine) & set(theirs)) if theirs[k] > 0]
    return {
        "common_candidates": len(ratios),
        "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "min_ratio": round(min(ratios), 4) if ratios else None,
        "max_ratio": round(max(ratios), 4) if ratios else None,
    }


def resident_agreement(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each arm with a resident judge against the arm with one-off runners (same GPUs and
    screens), over the candidates both timed: does keeping the judge change a latency?"""
    out = []
    for run in runs:
        if not run.get("resident"):
            continue
        base = [
            r
            for r in runs
            if r.get("resident") == 0
            and r["gpus"] == run["gpus"]
            and r.get("screens") == run.get("screens")
        ]
        if base:
            out.append({"gpus": run["gpus"], "resident": run["resident"], **_ratios(run, base[0])})
    return out


def disturbance(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU count: each arm with screens against the arm without, over the candidates both
    timed: the median latency ratio (with screens / without), min and max."""
    out = []
    for run in runs:
        alone = [
            r
            for r in runs
            if r.get("screens") == 0
            and r["gpus"] == run["gpus"]
            and r.get("resident") == run.get("resident")
            and r is not run
        ]
        if not run.get("screens") or not alone:
            continue
        base = alone[0].get("latencies", {})
        mine = run.get("latencies", {})
        ratios = [mine[k] / base[k] for k in sorted(set(mine) & set(base)) if base[k] > 0]
        out.append(
            {
                "gpus": run["gpus"],
                "screens": run["screens"],
                "common_candidates": len(ratios),
                "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
                "min_ratio": round(min(ratios), 4) if ratios else None,
                "max_ratio": round(max(ratios), 4) if ratios else None,
            }
        )
    return out


def scaling(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per executor and screen count: each GPU count against the smallest one."""
    out: list[dict[str, Any]] = []
    for executor, screens in sorted({(r["executor"], r.get("screens", 0)) for r in runs}):
        out += _scaling_of(
            [
                r
                for r in runs
                if r["executor"] == executor
                and r.get("screens", 0) == screens
                and r.get("throughput")
            ]
        )
    return out


def _scaling_of(usable: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run's speedup and efficiency against the run with the fewest GPUs."""
    if len(usable) < 2:
        return []
    base = min(usable, key=lambda r: r["gpus"])
    base_rate = base["throughput"]["candidates_per_min"]
    out = []
    for run in usable:
        if run["gpus"] == base["gpus"] or base_rate <= 0:
            continue
        speedup = run["throughput"]["candidates_per_min"] / base_rate
        out.append(
            {
                "executor": run["executor"],
                "gpus": run["gpus"],
                "baseline_gpus": base["gpus"],
                "speedup": round(speedup, 3),
                "efficiency": round(speedup / (run["gpus"] / base["gpus"]), 3),
            }
        )
    return out


def table(result: dict[str, Any]) -> str:
    """The markdown of a result: one row per run, the scaling and disturbance lines, then the
    time-per-stage and timed-run tables."""
    lines = [
        "| executor | GPUs | screens/GPU | candidates | cand/min | cand/min/GPU | GPU busy | "
        "queue wait s (mean/max) | sandbox s/eval | fixed cost s | dispatch s | retries | "
        "timed beside screens |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        fixed = run.get("sandbox_fixed_cost_s")
        t = run.get("throughput")
        if not t:
            lines.append(
                f"| {run['executor']} | {run['gpus']} | {arm(run)} | failed: {run.get('error')} |"
            )
            continue
        lines.append(
            f"| {t['executor']} | {run['gpus']} | {arm(run)} | {t['candidates']} | "
            f"{t['candidates_per_min']:.2f} | {t['candidates_per_min_per_gpu']:.2f} | "
            f"{t['timed_busy_fraction']:.0%} | {t['queue_wait_s_mean']:.1f}/"
            f"{t['queue_wait_s_max']:.1f} | {t['sandbox_s_mean']:.2f} | "
            f"{fixed if fixed is None else f'{fixed:.2f}'} | "
            f"{t['dispatch_overhead_s_mean']:.3f} | {t['infra_retries']} | "
            f"{t.get('timed_beside_screens', 0)} |"
        )
    for s in result.get("scaling", []):
        lines.append(
            f"\nScaling ({s['executor']}) {s['baseline_gpus']} -> {s['gpus']} GPUs: speedup "
            f"{s['speedup']:.2f}x, "
            f"efficiency {s['efficiency']:.0%}"
        )
    for d in result.get("disturbance", []):
        lines.append(
            f"\nDisturbance, {d['gpus']} GPU(s), {d['screens']} screens/GPU: candidate latency "
            f"with screens / without, over {d['common_candidates']} candidates both timed: "
            f"median {d['median_ratio']}, min {d['min_ratio']}, max {d['max_ratio']}"
        )
    for d in resident_agreement(result.get("runs", [])):
        lines.append(
            f"\nResident judge ({d['resident']} requests) / one-off runners, {d['gpus']} GPU(s): "
            f"candidate latency over {d['common_candidates']} candidates both timed: "
            f"median {d['median_ratio']}, min {d['min_ratio']}, max {d['max_ratio']}"
        )
    if result.get("ray_missing"):
        lines.append(f"\nNOTE: {result['ray_missing']}; measured with executor=local instead.")
    lines += ["", stage_table(result), "", timed_run_table(result)]
    return "\n".join(lines)


#: Columns of the time-per-stage table: ThroughputReport.stages keys (seconds, summed).
STAGE_COLUMNS = (
    "propose",
    "screen",
    "timing",
    "guard",
    "runner_build",
    "runner_jit_warm_up",
    "runner_worker_start",
    "runner_inputs",
    "runner_correctness",
    "runner_timing",
    "runner_reference_timing",
    "runner_interleaved_timing",
    "sandbox_other",
)


def stage_table(result: dict[str, Any]) -> str:
    """Seconds per stage of each run (slot time of screens, timed evaluations and guard runs;
    the judges' own stages; queue waits), and builds compiled vs found in the build cache."""
    head = " | ".join(STAGE_COLUMNS)
    lines = [
        f"| executor | GPUs | screens/GPU | {head} | queue waits | gate waits | "
        "builds (cache hits) |",
        "|---|---|---|" + "---|" * (len(STAGE_COLUMNS) + 3),
    ]
    for run in result["runs"]:
        t = run.get("throughput")
        if not t:
            continue
        stages = t.get("stages", {})
        cells = " | ".join(f"{stages.get(k, 0.0):.1f}" for k in STAGE_COLUMNS)
        waits = sum(stages.get(f"{k}_queue_wait", 0.0) for k in ("screen", "timing", "guard"))
        gates = sum(stages.get(f"{k}_gate_wait", 0.0) for k in ("screen", "timing", "guard"))
        lines.append(
            f"| {t['executor']} | {run['gpus']} | {arm(run)} | {cells} | "
            f"{waits:.1f} | {gates:.1f} | "
            f"{t.get('builds', 0)} ({t.get('build_cache_hits', 0)}) |"
        )
    return "\n".join(lines)


#: Runner stages of a candidate's timed run (`timing_runner_<name>` in ThroughputReport.stages).
TIMED_RUN_STAGES = (
    "jit_warm_up",
    "worker_start",
    "inputs",
    "correctness",
    "timing",
    "reference_timing",
    "interleaved_timing",
)


#: Parts of `worker_start` the worker reports (untrusted; they only explain the time): its CUDA
#: context making that came after the candidate did, and staging plus importing the candidate.
WORKER_START_PARTS = ("worker_context_wait", "worker_import")


def timed_run_table(result: dict[str, Any]) -> str:
    """Mean seconds per candidate's timed run, by runner stage, and the slot time around them
    (process start or spare wait, staging, result read-back)."""
    head = " | ".join(TIMED_RUN_STAGES)
    lines = [
        f"| executor | GPUs | screens/GPU | timed runs | slot s | {head} | outside the runner "
        "| worker start: CUDA context waited for | worker start: import |",
        "|---|---|---|---|---|" + "---|" * (len(TIMED_RUN_STAGES) + 3),
    ]
    for run in result["runs"]:
        t = run.get("throughput")
        if not t:
            continue
        stages = t.get("stages", {})
        timed = t["candidates"] - t["screened_out"]  # one timed run each (guard runs aside)
        count = max(1, timed)
        inside = [stages.get(f"timing_runner_{k}", 0.0) / count for k in TIMED_RUN_STAGES]
        slot = stages.get("timing", 0.0) / count
        cells = " | ".join(f"{v:.2f}" for v in inside)
        parts = " | ".join(
            f"{stages.get(f'timing_runner_{k}', 0.0) / count:.2f}" for k in WORKER_START_PARTS
        )
        lines.append(
            f"| {t['executor']} | {run['gpus']} | {arm(run)} | "
            f"{timed} | {slot:.2f} | {cells} | {slot - sum(inside):.2f} | {parts} |"
        )
    return "\n".join(lines)
