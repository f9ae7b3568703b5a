"""The report's plots as PNG files (the only matplotlib import; the Agg backend, no display).

Place in the flow: `report.build` draws the best-so-far curves per arm and the credit bars from
`ArmStats`, one panel per problem, and embeds the PNGs in the HTML page.
"""

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kernelarc.report.stats import ArmStats

_PANELS_PER_ROW = 3


def plot_best_so_far(arms: Sequence[ArmStats], path: Path) -> Path:
    """Mean best-so-far speedup vs candidates evaluated, one line per arm (band: min to max
    over its runs), one panel per problem."""
    problems = _problems(arms)
    fig, axes = _panels(len(problems))
    for ax, problem in zip(axes, problems, strict=False):
        for arm in (a for a in arms if a.problem == problem):
            x = range(1, len(arm.curve) + 1)
            (line,) = ax.plot(x, arm.curve, drawstyle="steps-pre", label=_legend(arm))
            ax.fill_between(
                x,
                arm.curve_low,
                arm.curve_high,
                step="pre",
                alpha=0.15,
                color=line.get_color(),
            )
        target = next(a.target for a in arms if a.problem == problem)
        ax.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"target {target:.3g}")
        ax.set_title(problem)
        ax.set_xlabel("candidates evaluated")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("best speedup so far (x reference)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_credit(arms: Sequence[ArmStats], path: Path, by: str) -> Path:
    """Stacked bars per arm: mean speedup gained per agent (`by="agent"`) or strategy."""
    problems = _problems(arms)
    fig, axes = _panels(len(problems))
    names = sorted(
        {n for a in arms for n in (a.credit_agents if by == "agent" else a.credit_strategies)}
    )
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    for ax, problem in zip(axes, problems, strict=False):
        own = [a for a in arms if a.problem == problem]
        labels = [a.arm for a in own]
        bottoms = [0.0] * len(own)
        for name in names:
            values = [
                (a.credit_agents if by == "agent" else a.credit_strategies).get(name, 0.0)
                for a in own
            ]
            ax.bar(labels, values, bottom=bottoms, label=name, color=colors[name])
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        ax.set_title(problem)
        ax.set_ylabel(f"mean speedup gained, by {by}")
        ax.tick_params(axis="x", labelrotation=20, labelsize="small")
        ax.grid(axis="y", alpha=0.3)
        if names:
            ax.legend(fontsize="small")
    return _save(fig, path)


def _problems(arms: Sequence[ArmStats]) -> list[str]:
    return list(dict.fromkeys(a.problem for a in arms))


def _panels(count: int) -> tuple[Figure, list[Axes]]:
    cols = max(1, min(count, _PANELS_PER_ROW))
    rows = max(1, -(-count // cols))
    fig, grid = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.4 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes


def _legend(arm: ArmStats) -> str:
    return f"{arm.arm} (n={len(arm.runs)})"


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
