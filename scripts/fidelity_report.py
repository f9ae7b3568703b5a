"""The fidelity benchmark's summary and markdown, and the files written after every stage.

Place in the flow: `write_outputs` renders the `Report` so far (`summarize`: the issue's three
numbers and the repeatability spreads; `markdown`) into `--out` and `--markdown`; the stages call
it as they go so a kill keeps what was done. A helper module of `scripts/bench_fidelity.py`, not
a script.
"""

import argparse
import json
import statistics
from dataclasses import asdict
from typing import Any

from fidelity_cases import (
    CV_GOAL,
    CV_REPEATS,
    CV_VARIANTS,
    LATENCY_THRESHOLD_MS,
    OFFICIAL_ABSENT,
    RATIO_GOAL,
    REPEAT_CV_GOAL,
    REPEAT_GOAL_ABOVE_MS,
    Report,
)


def spread(values: list[float]) -> dict[str, Any]:
    """min, median, max, max/min and CV (sample stdev / mean) of one quantity over runs."""
    if not values:
        return {"n": 0}
    mean = statistics.fmean(values)
    low = min(values)
    return {
        "n": len(values),
        "min": low,
        "median": statistics.median(values),
        "max": max(values),
        "max_over_min": max(values) / low if low > 0 else None,
        "cv": statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else None,
    }


def repeat_summary(report: Report) -> dict[str, Any]:
    """Per workload the spreads; over workloads whose reference takes more than 5 us, how many
    meet the CV goal (2 %) for the reference latency and the speedup."""
    rows = []
    for entry in report.repeatability.get("workloads", []):
        row: dict[str, Any] = {k: entry[k] for k in ("problem", "solution", "workload")}
        for side in ("kernelarc", "official"):
            data = entry.get(side)
            if data is None:
                row[side] = None
                continue
            row[side] = {
                "runs": len(data["statuses"]),
                "statuses": sorted(set(data["statuses"])),
                "reference_ms": spread(data["reference_ms"]),
                "latency_ms": spread(data["latency_ms"]),
                "speedup": spread(data["speedup"]),
                "interleaved": spread(data.get("interleaved", [])),
                "ci": data["ci"],
            }
        rows.append(row)

    def goal(side: str, quantity: str) -> dict[str, Any]:
        cvs = [
            r[side][quantity]["cv"]
            for r in rows
            if r[side] is not None
            and r[side][quantity].get("cv") is not None
            and (r[side]["reference_ms"].get("median") or 0.0) > REPEAT_GOAL_ABOVE_MS
        ]
        return {
            "workloads": len(cvs),
            "within_goal": sum(cv <= REPEAT_CV_GOAL for cv in cvs),
            "median_cv": statistics.median(cvs) if cvs else None,
            "worst_cv": max(cvs) if cvs else None,
        }

    return {
        "repeats": report.repeatability.get("repeats"),
        "official_absent": report.repeatability.get("official_absent", OFFICIAL_ABSENT),
        "goal_cv": REPEAT_CV_GOAL,
        "goal_above_ms": REPEAT_GOAL_ABOVE_MS,
        "kernelarc": {
            "reference_ms": goal("kernelarc", "reference_ms"),
            "speedup": goal("kernelarc", "speedup"),
            "interleaved": goal("kernelarc", "interleaved"),
        },
        "official": {
            "reference_ms": goal("official", "reference_ms"),
            "speedup": goal("official", "speedup"),
        }
        if report.repeatability.get("official")
        else None,
        "workloads": rows,
    }


def summarize(report: Report) -> dict[str, Any]:
    """The three numbers the issue asks for, with their goals."""
    compared = [r for r in report.rows if r.official != "-"]
    strict = [r for r in compared if not r.expected_divergence]
    timed = [
        r for r in compared if r.ratio is not None and (r.official_ms or 0) > LATENCY_THRESHOLD_MS
    ]
    deviations = [abs(r.ratio - 1.0) for r in timed if r.ratio is not None]
    events = [
        abs(r.kernelarc_events_ms / r.official_ms - 1.0)
        for r in timed
        if r.kernelarc_events_ms is not None and r.official_ms
    ]
    cv = report.cv.get("kernelarc", {}).get("cv") if report.cv else None
    return {
        "status_agreement": {
            "rows": len(compared),
            "agree": sum(r.agree for r in compared),
            "rate": sum(r.agree for r in compared) / len(compared) if compared else None,
            "rate_excluding_documented": (
                sum(r.agree for r in strict) / len(strict) if strict else None
            ),
            "goal": 1.0,
        },
        "latency_ratio": {
            "rows_above_50us": len(timed),
            "within_5pct": sum(d <= RATIO_GOAL for d in deviations),
            "max_deviation": max(deviations) if deviations else None,
            "median_ratio": statistics.median([r.ratio for r in timed if r.ratio])
            if timed
            else None,
            "events_within_5pct": sum(d <= RATIO_GOAL for d in events),
            "events_rows": len(events),
            "goal": RATIO_GOAL,
        },
        "cv": {"kernelarc": cv, "goal": CV_GOAL},
        "repeatability": repeat_summary(report),
    }


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def markdown(report: Report, summary: dict[str, Any]) -> str:
    """The report as markdown."""
    agreement, ratio = summary["status_agreement"], summary["latency_ratio"]
    lines = [
        f"# KernelArc vs official evaluator ({report.device})",
        "",
        f"- official: {report.official_version}; timing: {report.official_timing}",
        f"- KernelArc timing: {report.kernelarc_timing}",
        f"- status agreement: {agreement['agree']}/{agreement['rows']}"
        f" (rate {_pct(agreement['rate'])}, without documented deviations "
        f"{_pct(agreement['rate_excluding_documented'])}; goal 100 %)",
        f"- latency ratio KernelArc/official, official > 50 us: {ratio['within_5pct']}/"
        f"{ratio['rows_above_50us']} within 5 % (median ratio {_num(ratio['median_ratio'])}, "
        f"max deviation {_pct(ratio['max_deviation'])}); with CUDA events forced: "
        f"{ratio['events_within_5pct']}/{ratio['events_rows']}",
        f"- CV of {CV_REPEATS} repeated timings: {_cv_text(report.cv)} (goal <= 1 %)",
        f"- repeatability over runs: {_repeat_text(summary['repeatability'])}",
        f"- stages: {_stages_text(report)}",
        f"- elapsed {report.elapsed_s:.0f} s",
    ]
    if report.rows:
        lines += [
            "",
            "| problem | solution | kind | workload | KernelArc | official | agree "
            "| KA ms (method) | KA events ms | official ms | ratio |",
            "|" + " --- |" * 11,
        ]
    for r in report.rows:
        agree = "yes" if r.agree else ("documented" if r.expected_divergence else "**NO**")
        lines.append(
            f"| {r.problem} | {r.solution} | {r.kind} | {r.workload} | {r.kernelarc} | "
            f"{r.official} | {agree} | {_fmt_ms(r.kernelarc_ms)} ({r.kernelarc_method or '-'}) | "
            f"{_fmt_ms(r.kernelarc_events_ms)} | {_fmt_ms(r.official_ms)} | {_num(r.ratio)} |"
        )
    disagreements = [r for r in report.rows if not r.agree and r.official != "-"]
    if disagreements:
        lines += ["", "## Disagreements", ""]
        for r in disagreements:
            why = r.expected_divergence or r.note
            lines.append(f"- {r.solution} / {r.workload}: {r.kernelarc} vs {r.official}: {why}")
    lines += _repeat_table(report, summary["repeatability"])
    if report.failures:
        lines += ["", "## Stages that did not run (exit status 1)", ""]
        lines += [f"- {f}" for f in report.failures]
    if report.skipped:
        lines += ["", "## Skipped", "", *[f"- {s}" for s in report.skipped]]
    if report.notes:
        lines += ["", "## Notes", "", *[f"- {n[:400]}" for n in report.notes]]
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _cv_text(cv: dict[str, Any]) -> str:
    if not cv:
        return "not measured"
    parts = []
    for key in CV_VARIANTS:
        if key in cv:
            parts.append(f"{key} {_pct(cv[key].get('cv'))}")
    return f"{cv['solution']} {cv['workload']}: " + ", ".join(parts)


def _stages_text(report: Report) -> str:
    parts = []
    for name, info in report.stages.items():
        if info.get("ran"):
            parts.append(f"{name} ran ({info['results']} results, {info['elapsed_s']:.0f} s)")
        else:
            parts.append(f"{name} NOT RUN ({info.get('reason', '?')})")
    return "; ".join(parts) if parts else "none"


def _repeat_text(summary: dict[str, Any]) -> str:
    if not summary["workloads"]:
        return "not measured"
    above = f"{1000 * summary['goal_above_ms']:g} us"

    def side(name: str) -> str:
        data = summary[name]
        if data is None:
            return f"official {summary['official_absent']}"
        ref, sp = data["reference_ms"], data["speedup"]
        return (
            f"{name}: reference-latency CV <= {_pct(summary['goal_cv'])} on "
            f"{ref['within_goal']}/{ref['workloads']} workloads above {above} (median "
            f"{_pct(ref['median_cv'])}, worst {_pct(ref['worst_cv'])}), speedup CV on "
            f"{sp['within_goal']}/{sp['workloads']} (median {_pct(sp['median_cv'])}, worst "
            f"{_pct(sp['worst_cv'])})" + _interleaved_text(data.get("interleaved"))
        )

    return f"{summary['repeats']} runs; " + "; ".join([side("kernelarc"), side("official")])


def _interleaved_text(data: dict[str, Any] | None) -> str:
    """KernelArc's interleaved speedup (reference and solution timed in alternating blocks)."""
    if not data or not data.get("workloads"):
        return ""
    return (
        f", interleaved speedup CV on {data['within_goal']}/{data['workloads']} (median "
        f"{_pct(data['median_cv'])}, worst {_pct(data['worst_cv'])})"
    )


def _range(data: dict[str, Any]) -> str:
    if not data.get("n"):
        return "-"
    return f"{data['min']:.4f} / {data['median']:.4f} / {data['max']:.4f}"


def _ci_text(cis: list[dict[str, Any]]) -> str:
    """The speedup confidence intervals the runs' traces carried, or that they carried none."""
    found = [ci for ci in cis if ci]
    if not found:
        return "none in the trace"
    parts = []
    for ci in found:
        low = next((v for k, v in ci.items() if k.endswith("low")), None)
        high = next((v for k, v in ci.items() if k.endswith("high")), None)
        if isinstance(low, int | float) and isinstance(high, int | float):
            parts.append(f"[{low:.3f}, {high:.3f}]")
        else:
            parts.append(", ".join(f"{k}={v}" for k, v in ci.items()))
    return "; ".join(parts)


def _official_cell(side: dict[str, Any] | None, quantity: str, absent: str) -> str:
    if side is None:
        return absent
    data = side[quantity]
    if not data.get("n"):
        return "no timed run (" + ", ".join(side["statuses"]) + ")"
    return f"{_range(data)}; x{_num(data['max_over_min'])}; CV {_pct(data['cv'])}"


def _repeat_table(report: Report, summary: dict[str, Any]) -> list[str]:
    if not summary["workloads"]:
        return []
    lines = [
        "",
        f"## Repeatability: {summary['repeats']} runs of KernelArc on the same solutions",
        "",
        "Spread over runs (each run a fresh sandbox, as a separate `kernelarc eval`); ms as "
        "min / median / max; max/min as x; CV = sample stdev / mean."
        + (" CPU timings: a pipeline check, not performance." if report.device == "cpu" else ""),
        "",
        "| problem | solution | workload | runs | reference ms | ref max/min | ref CV "
        "| solution ms | sol max/min | speedup | speedup max/min | speedup CV "
        "| interleaved speedup | interleaved CV | KA speedup CI "
        "| official reference ms | official speedup |",
        "|" + " --- |" * 17,
    ]
    for row in summary["workloads"]:
        ka = row["kernelarc"]
        ref, sol, sp = ka["reference_ms"], ka["latency_ms"], ka["speedup"]
        inter = ka.get("interleaved") or {}
        runs = f"{sp['n']}/{ka['runs']}"
        if ka["statuses"] != ["PASSED"]:
            runs += " (" + ", ".join(ka["statuses"]) + ")"
        lines.append(
            f"| {row['problem']} | {row['solution']} | {row['workload']} | {runs} | "
            f"{_range(ref)} | {_num(ref.get('max_over_min'))} | {_pct(ref.get('cv'))} | "
            f"{_range(sol)} | {_num(sol.get('max_over_min'))} | {_range(sp)} | "
            f"{_num(sp.get('max_over_min'))} | {_pct(sp.get('cv'))} | {_range(inter)} | "
            f"{_pct(inter.get('cv'))} | {_ci_text(ka['ci'])} | "
            f"{_official_cell(row['official'], 'reference_ms', summary['official_absent'])} | "
            f"{_official_cell(row['official'], 'speedup', summary['official_absent'])} |"
        )
    return lines


def write_outputs(args: argparse.Namespace, report: Report) -> str:
    """Write the JSON and markdown files (after every stage: a kill keeps what was done)."""
    summary = summarize(report)
    text = markdown(report, summary)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.out:
        data = {**asdict(report), "summary": summary}
        for row, raw in zip(report.rows, data["rows"], strict=True):
            raw["ratio"] = row.ratio
        args.out.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return text
