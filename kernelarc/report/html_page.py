"""The report as one self-contained HTML page: tables, definitions and the PNGs inlined as base64.

Place in the flow: `report.build` renders it last; it opens offline and as an MLflow artifact.
"""

import base64
import html
import math
from collections.abc import Mapping, Sequence

from kernelarc.report.stats import ArmStats, Interval, RunResult

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.note { color: #555; font-size: 0.9em; } code { background: #f5f5f5; padding: 0 0.2em; }
"""

DEFINITIONS = (
    ("budget B", "only the first B attempts (by index) of each campaign count"),
    (
        "best-so-far",
        "speedup of the incumbent (the last NEW_BEST attempt) after k attempts; 0 before one",
    ),
    (
        "final best speedup",
        "best-so-far after B attempts, over the reference; per campaign with the incumbent's "
        "own interval [low, high] from the runner's interleaved timing, when its attempt "
        "recorded one (attempts.jsonl speedup_ci_method says how it was made)",
    ),
    (
        "final SOL score",
        "SOL-ExecBench score of that incumbent (T_b = reference; needs a roofline bound)",
    ),
    ("candidates to target", "attempts until best-so-far first reached the target, within B"),
    (
        "credit",
        "each NEW_BEST adds its speedup minus the previous incumbent's (0 for the first) to its "
        "agent and strategy; an arm's credits add up to its mean final best speedup",
    ),
)


def render_html(
    title: str,
    facts: Mapping[str, str],
    arms: Sequence[ArmStats],
    images: Mapping[str, bytes],
    notes: Sequence[str] = (),
) -> str:
    """The whole page. `facts` are shown as a key/value table; `images` maps captions to PNG
    bytes."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _table(["", ""], [[_e(k), _e(v)] for k, v in facts.items()], header=False),
    ]
    parts += [f'<p class="note">{_e(note)}</p>' for note in notes]
    for problem in dict.fromkeys(a.problem for a in arms):
        own = [a for a in arms if a.problem == problem]
        parts.append(f"<h2>{_e(problem)}: arms</h2>")
        parts.append(_arms_table(own))
        parts.append(f"<h3>{_e(problem)}: credit</h3>")
        parts.append(_credit_table(own, "agent"))
        parts.append(_credit_table(own, "strategy"))
    parts.append("<h2>Plots</h2>")
    for caption, png in images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h3>{_e(caption)}</h3>")
        parts.append(f'<img alt="{_e(caption)}" src="data:image/png;base64,{data}">')
    parts.append("<h2>Campaigns</h2>")
    parts.append(_runs_table([r for a in arms for r in a.runs], arms))
    parts.append("<h2>Definitions</h2>")
    parts.append(_table(["term", "meaning"], [[_e(t), _e(m)] for t, m in DEFINITIONS]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def format_interval(interval: Interval, digits: int = 3) -> str:
    """`mean [low, high]`, `mean` for one value, `-` for none."""
    if interval.n == 0 or math.isnan(interval.mean):
        return "-"
    if math.isnan(interval.low):
        return f"{interval.mean:.{digits}g}"
    return f"{interval.mean:.{digits}g} [{interval.low:.{digits}g}, {interval.high:.{digits}g}]"


def _arms_table(arms: Sequence[ArmStats]) -> str:
    rows = []
    for a in arms:
        rows.append(
            [
                _e(a.arm),
                _num(str(len(a.runs))),
                _num(format_interval(a.final_best)),
                _num(f"{format_interval(a.final_sol)} (n={a.final_sol.n})"),
                _num(f"{format_interval(a.to_target)} ({a.reached}/{len(a.runs)} reached)"),
            ]
        )
    target = arms[0].target if arms else math.nan
    head = [
        "arm",
        "runs",
        "final best speedup, mean [CI]",
        "final SOL score, mean [CI]",
        f"candidates to reach {target:.3g}x",
    ]
    return _table(head, rows)


def _credit_table(arms: Sequence[ArmStats], by: str) -> str:
    names = sorted({n for a in arms for n in _credit(a, by)})
    rows = []
    for a in arms:
        credit = _credit(a, by)
        total = sum(credit.values())
        cells = [_e(a.arm)]
        for name in names:
            value = credit.get(name, 0.0)
            share = f" ({value / total:.0%})" if total > 0 else ""
            cells.append(_num(f"{value:.3g}{share}"))
        rows.append(cells)
    return _table([f"arm \\ {by}", *names], rows)


def _runs_table(runs: Sequence[RunResult], arms: Sequence[ArmStats]) -> str:
    targets = {a.problem: a.target for a in arms}
    rows = []
    for r in runs:
        reached = r.candidates_to(targets[r.problem])
        gains = ", ".join(f"{g.agent}@{g.index} (+{g.gain:.3g})" for g in r.gains) or "-"
        rows.append(
            [
                _e(r.label),
                _e(r.problem),
                _e(r.arm),
                _e(r.seed),
                _num(f"{r.final_best:.4g}{_recorded_interval(r)}"),
                _num("-" if r.final_sol is None else f"{r.final_sol:.4g}"),
                _num("-" if reached is None else str(reached)),
                _e(gains),
                _e(r.mlflow_run_id or "-"),
            ]
        )
    head = [
        "campaign",
        "problem",
        "arm",
        "seed",
        "final best [interleaved CI]",
        "final SOL",
        "to target",
        "incumbent gains (agent@attempt)",
        "MLflow run",
    ]
    return _table(head, rows)


def _recorded_interval(run: RunResult) -> str:
    """` [low, high]` of the final incumbent's recorded speedup interval ('' without one)."""
    if run.final_ci is None:
        return ""
    return f" [{run.final_ci[0]:.4g}, {run.final_ci[1]:.4g}]"


def _credit(arm: ArmStats, by: str) -> dict[str, float]:
    return arm.credit_agents if by == "agent" else arm.credit_strategies


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], header: bool = True) -> str:
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row))
    out.append("</table>")
    return "\n".join(out)


def _num(text: str) -> str:
    return f'<td class="num">{_e(text)}</td>'


def _e(text: str) -> str:
    return html.escape(text, quote=True)
