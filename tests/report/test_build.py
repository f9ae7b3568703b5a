"""build_report on run dirs laid out like a 2x2 Hydra sweep: files, numbers and the page."""

import base64
import csv
import io
import json
import re
import statistics
from pathlib import Path

import pytest

from kernelarc.errors import ConfigError
from kernelarc.report.build import ReportOptions, build_report
from kernelarc.report.inputs import find_run_dirs, load_campaigns
from kernelarc.schema import Attempt, EvalStatus, Verdict
from tests.leaderboard.conftest import with_speedup_interval
from tests.report.conftest import write_run_dir
from tests.tracking.conftest import build_attempt

NEW_BEST = Verdict.NEW_BEST
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _attempts(seed: int, guard: str) -> list[Attempt]:
    """Different numbers per job; the roofline bound gives every incumbent a SOL score."""
    base = 1.0 + 0.5 * seed + (0.25 if guard == "off" else 0.0)
    return [
        build_attempt(0, agent="compiler", strategy="compiler", speedup=base, verdict=NEW_BEST),
        build_attempt(1, agent="triton", strategy="triton", status=EvalStatus.COMPILE_ERROR),
        build_attempt(
            2,
            agent="triton",
            strategy="triton",
            speedup=base + 1.0,
            verdict=NEW_BEST,
            roofline_ms=0.5,
        ),
        build_attempt(3, agent="compiler", strategy="compiler", speedup=base + 5.0),
    ]


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "multirun" / "abl" / "2026-12-02_10-00-00"
    job = 0
    for guard in ("default", "off"):
        for seed in (0, 1):
            write_run_dir(
                root / str(job),
                _attempts(seed, guard),
                overrides=["name=abl", f"guard={guard}", f"seed={seed}", "budget.candidates=4"],
                config={"name": "abl", "seed": seed, "problem": "axpby_h1024"},
            )
            job += 1
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


def _sol(speedup: float, bound: float = 0.5) -> float:
    """SOL-ExecBench score of a 1 ms kernel whose reference takes `speedup` ms."""
    return 1.0 / (1.0 + (1.0 - bound) / (speedup - bound))


def test_report_numbers_match_the_runs(sweep: Path, tmp_path: Path) -> None:
    campaigns = load_campaigns([str(sweep)], "sqlite:///unused.db")
    assert [Path(c.label).name for c in campaigns] == ["0", "1", "2", "3"]
    out = tmp_path / "report"
    report = build_report(campaigns, out, ReportOptions(target=2.5, ci="t"))

    assert report.arm_keys == ["guard"]
    assert report.budget == 4
    data = json.loads((out / "report.json").read_text())
    arms = {a["arm"]: a for a in data["arms"]}
    assert list(arms) == ["guard=default", "guard=off"]
    for guard, arm in (("default", arms["guard=default"]), ("off", arms["guard=off"])):
        finals = [1.0 + 0.5 * s + (0.25 if guard == "off" else 0.0) + 1.0 for s in (0, 1)]
        assert arm["final_best_speedup"]["mean"] == pytest.approx(statistics.mean(finals))
        assert arm["final_best_speedup"]["n"] == 2
        # n = 2: t(0.975, 1) = 12.706 times the standard error.
        half = 12.706204736174707 * statistics.stdev(finals) / 2**0.5
        assert arm["final_best_speedup"]["high"] == pytest.approx(statistics.mean(finals) + half)
        low = max(0.0, statistics.mean(finals) - half)  # cut at 0: a speedup is never negative
        assert arm["final_best_speedup"]["low"] == pytest.approx(low)
        sols = [_sol(f) for f in finals]
        assert arm["final_sol_score"]["mean"] == pytest.approx(statistics.mean(sols))
        # Target 2.5: reached at attempt 3 by runs whose final best is >= 2.5.
        reached = [3 for f in finals if f >= 2.5]
        assert arm["reached_target"] == len(reached)
        credit = arm["credit_agents"]
        assert credit["triton"] == pytest.approx(1.0)
        assert credit["compiler"] + credit["triton"] == pytest.approx(statistics.mean(finals))
    runs = {Path(r["label"]).name: r for r in data["runs"]}
    assert runs["3"]["final_best_speedup"] == pytest.approx(2.75)
    assert runs["3"]["best_so_far"] == pytest.approx([1.75, 1.75, 2.75, 2.75])
    assert runs["3"]["candidates_to_target"] == 3
    assert runs["0"]["candidates_to_target"] is None
    assert [g["agent"] for g in runs["0"]["gains"]] == ["compiler", "triton"]


def test_report_page_is_self_contained(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = build_report(load_campaigns([str(sweep)], "unused"), out, ReportOptions())
    names = {p.name for p in report.files}
    assert names == {
        "report.html",
        "report.json",
        "arms.csv",
        "runs.csv",
        "best_so_far.png",
        "credit_agents.png",
        "credit_strategies.png",
    }
    for png in ("best_so_far.png", "credit_agents.png", "credit_strategies.png"):
        assert (out / png).read_bytes().startswith(PNG_MAGIC)
    page = (out / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 3
    assert all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)
    assert not re.search(r'(src|href)="(?!data:)', page), "the page must not load anything"
    assert "guard=default" in page and "guard=off" in page
    # Default target: 0.9 x the best final speedup (2.75).
    assert "2.48x" in page
    # arms.csv: numbers in numeric columns, not "mean [low, high]" strings.
    rows = list(csv.DictReader(io.StringIO((out / "arms.csv").read_text())))
    assert len(rows) == 2
    for row, arm in zip(rows, report.arms, strict=True):
        assert float(row["final_best_speedup_mean"]) == pytest.approx(arm.final_best.mean)
        assert float(row["final_best_speedup_low"]) == pytest.approx(arm.final_best.low)
        assert float(row["final_best_speedup_high"]) == pytest.approx(arm.final_best.high)
        assert int(row["final_best_speedup_n"]) == arm.final_best.n == 2
        assert float(row["final_sol_score_mean"]) == pytest.approx(arm.final_sol.mean)
    runs = list(csv.DictReader(io.StringIO((out / "runs.csv").read_text())))
    assert len(runs) == 4 and {r["timing"] for r in runs} == {""}


def test_explicit_budget_and_bootstrap(sweep: Path, tmp_path: Path) -> None:
    options = ReportOptions(budget=2, ci="bootstrap", confidence=0.9)
    report = build_report(load_campaigns([str(sweep)], "unused"), tmp_path / "r", options)
    default = report.arms[0]
    assert default.final_best.mean == pytest.approx(statistics.mean([1.0, 1.5]))
    assert 1.0 <= default.final_best.low <= default.final_best.high <= 1.5
    assert default.credit_agents == pytest.approx({"compiler": 1.25})


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no run dir"):
        find_run_dirs(tmp_path / "empty")
    with pytest.raises(ConfigError, match="--budget must be >= 1"):
        ReportOptions(budget=0)
    with pytest.raises(ConfigError, match="--ci"):
        ReportOptions(ci="jackknife")


def _cpu_timed(attempt: Attempt) -> Attempt:
    """The attempt as if its traces were timed on the CPU (cpu_monotonic)."""
    traces = []
    for trace in attempt.traces:
        ev = trace.evaluation
        if ev is not None and ev.performance is not None:
            perf = ev.performance.model_copy(update={"timing_method": "cpu_monotonic"})
            trace = trace.model_copy(
                update={"evaluation": ev.model_copy(update={"performance": perf})}
            )
        traces.append(trace)
    return attempt.model_copy(update={"traces": traces})


def test_cpu_timed_campaigns_are_labelled_a_pipeline_check(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    for job, seed in enumerate((0, 1)):
        attempts = [_cpu_timed(a) for a in _attempts(seed, "default")]
        write_run_dir(root / str(job), attempts, overrides=[f"seed={seed}"])
    out = tmp_path / "report"
    report = build_report(load_campaigns([str(root)], "unused"), out, ReportOptions())
    note = "CPU timings (cpu_monotonic): a pipeline check, not kernel performance"
    assert any(n.startswith(note) for n in report.notes)
    assert note in (out / "report.html").read_text()
    label = "cpu: pipeline check, not performance"
    assert {r["timing"] for r in csv.DictReader(io.StringIO((out / "runs.csv").read_text()))} == {
        label
    }
    assert [r["timing"] for r in csv.DictReader(io.StringIO((out / "arms.csv").read_text()))] == [
        label
    ]


def test_the_final_incumbents_interval_reaches_the_runs_files_and_the_page(
    tmp_path: Path,
) -> None:
    incumbent = with_speedup_interval(
        build_attempt(0, speedup=2.0, verdict=NEW_BEST), [(1.9, 2.0, 2.1)]
    )
    older = build_attempt(0, speedup=1.5, verdict=NEW_BEST)  # recorded without an interval
    root = tmp_path / "sweep"
    write_run_dir(root / "0", [incumbent], overrides=["seed=0"])
    write_run_dir(root / "1", [older], overrides=["seed=1"])
    out = tmp_path / "report"
    build_report(load_campaigns([str(root)], "unused"), out, ReportOptions())
    rows = list(csv.DictReader(io.StringIO((out / "runs.csv").read_text())))
    by_speedup = {float(r["final_best_speedup"]): r for r in rows}
    assert float(by_speedup[2.0]["final_best_speedup_ci_low"]) == pytest.approx(1.9)
    assert float(by_speedup[2.0]["final_best_speedup_ci_high"]) == pytest.approx(2.1)
    assert by_speedup[2.0]["ci_method"].startswith("interleaved ABBA blocks (cupti)")
    assert by_speedup[1.5]["final_best_speedup_ci_low"] == ""
    runs = json.loads((out / "report.json").read_text())["runs"]
    intervals = {r["final_best_speedup"]: r["final_best_speedup_ci"] for r in runs}
    assert intervals[1.5] is None and intervals[2.0]["high"] == pytest.approx(2.1)
    assert "2 [1.9, 2.1]" in (out / "report.html").read_text()
