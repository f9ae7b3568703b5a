"""leaderboard export: qualification, selection by latency, files, determinism, error cases."""

import csv
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelarc.errors import ConfigError
from kernelarc.problems.files import load_problem, load_solution
from kernelarc.rundir import PROBLEM_DIR
from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import EvalStatus, Trace, Verdict
from leaderboard import export_leaderboard, export_run, plan_export, qualifies
from leaderboard.inputs import load_run_dir, load_run_dirs
from leaderboard.manifest import SCORES_COLUMNS, describe_plan
from tests.leaderboard.conftest import (
    MakeAttempt,
    WriteRun,
    definition_json,
    with_speedup_interval,
)


def _scores(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / "scores.csv").read_text())))


@pytest.mark.parametrize(
    ("status", "verdict", "confirmed", "expected"),
    [
        pytest.param(EvalStatus.PASSED, Verdict.NEW_BEST, True, True, id="accepted"),
        pytest.param(EvalStatus.PASSED, Verdict.NEW_BEST, False, False, id="unconfirmed"),
        pytest.param(EvalStatus.PASSED, Verdict.CORRECT, True, False, id="correct-not-best"),
        pytest.param(EvalStatus.PASSED, Verdict.CHALLENGER, True, False, id="challenger"),
        pytest.param("REJECTED_GUARD", Verdict.FAILED, False, False, id="rejected-guard"),
        pytest.param("REJECTED_STATIC", Verdict.FAILED, False, False, id="rejected-static"),
        pytest.param(EvalStatus.INCORRECT_NUMERICAL, Verdict.FAILED, False, False, id="wrong"),
    ],
)
def test_qualifies_only_accepted_and_confirmed(
    make_attempt: MakeAttempt,
    status: EvalStatus | str,
    verdict: Verdict,
    confirmed: bool,
    expected: bool,
) -> None:
    attempt = make_attempt(0, status=status, verdict=verdict, confirmed=confirmed)
    assert qualifies(attempt) is expected


def test_exports_the_best_accepted_attempt_per_problem(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    attempts = [
        make_attempt(0, speedup=1.5, latency_ms=0.3, bounds_ms=[0.05, 0.05]),
        make_attempt(1, status=EvalStatus.INCORRECT_NUMERICAL),
        # Faster but never accepted: not exported.
        make_attempt(2, latency_ms=0.06, verdict=Verdict.CORRECT, bounds_ms=[0.05, 0.05]),
        make_attempt(3, speedup=2.0, latency_ms=0.1, agent="fuser", bounds_ms=[0.05, 0.05]),
    ]
    out = tmp_path / "out"
    written = export_run(write_run(attempts), out)

    assert [p.relative_to(out).as_posix() for p in written] == [
        "rmsnorm/solution.json",
        "rmsnorm/traces.jsonl",
        "rmsnorm/problem/definition.json",
        "rmsnorm/problem/workload.jsonl",
        "scores.csv",
        "manifest.json",
    ]
    best = attempts[3]
    assert load_solution(out / "rmsnorm" / "solution.json") == best.proposal.solution
    lines = (out / "rmsnorm" / "traces.jsonl").read_text().splitlines()
    assert [Trace.model_validate_json(line) for line in lines] == best.traces
    # The exported problem dir is a loadable official PROBLEM_DIR.
    assert load_problem(out / "rmsnorm" / "problem").name == "rmsnorm"
    manifest = json.loads((out / "manifest.json").read_text())
    chosen = manifest["problems"]["rmsnorm"]
    assert (chosen["attempt_index"], chosen["agent"], chosen["accepted_candidates"]) == (
        3,
        "fuser",
        2,
    )
    assert "latency 0.1 ms < 0.3 ms" in chosen["reason"]


def test_selection_is_by_latency_not_by_each_campaigns_own_score(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """Issue 17: the same proposal at 0.51 ms in one campaign and 0.132 ms in another; the first
    campaign measured a slow reference (so a high speedup and SOL score), and the exporter chose
    the 0.51 ms attempt. The faster kernel wins now, whatever each campaign's baseline."""
    slow_run = make_attempt(4, speedup=9.8, latency_ms=0.51, bounds_ms=[0.01, 0.01])
    fast_run = make_attempt(2, speedup=1.5, latency_ms=0.132, bounds_ms=[0.01, 0.01])
    runs = load_run_dirs([write_run([slow_run], name="a"), write_run([fast_run], name="b")])
    choice = plan_export(runs).problems[0].choice
    assert [c.attempt.latency_ms for c in choice.ranked] == [0.132, 0.51]
    slow_score, fast_score = choice.ranked[1].score.sol_score, choice.chosen.score.sol_score
    assert slow_score is not None and fast_score is not None and slow_score > fast_score
    assert "latency 0.132 ms < 0.51 ms" in choice.reason


@pytest.mark.parametrize(
    ("rows", "winner"),
    [
        pytest.param([(0, 0.3), (1, 0.1)], 1, id="lower-latency"),
        pytest.param([(0, 0.1), (1, 0.1)], 0, id="tie-older"),
        pytest.param([(5, 0.1), (3, 0.1)], 3, id="index-not-file-order"),
    ],
)
def test_ranking_and_tie_breaking(
    make_attempt: MakeAttempt, write_run: WriteRun, rows: list[tuple[int, float]], winner: int
) -> None:
    attempts = [make_attempt(i, speedup=2.0, latency_ms=latency) for i, latency in rows]
    plan = plan_export([load_run_dir(write_run(attempts))])
    assert plan.problems[0].choice.chosen.attempt.index == winner


def test_gpu_timed_attempts_rank_before_cpu_timed_ones(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    cpu = make_attempt(0, latency_ms=0.01, hardware="AMD EPYC")
    traces = []
    for trace in cpu.traces:
        evaluation = trace.evaluation
        assert evaluation is not None and evaluation.performance is not None
        timed = evaluation.performance.model_copy(update={"timing_method": "cpu_monotonic"})
        evaluation = evaluation.model_copy(update={"performance": timed})
        traces.append(trace.model_copy(update={"evaluation": evaluation}))
    cpu = cpu.model_copy(update={"traces": traces})
    gpu = make_attempt(1, latency_ms=0.5)
    choice = plan_export([load_run_dir(write_run([cpu, gpu]))]).problems[0].choice
    assert choice.chosen.attempt.index == 1
    assert "timed on a GPU" in choice.reason


def test_age_breaks_ties_across_runs(make_attempt: MakeAttempt, write_run: WriteRun) -> None:
    newer = make_attempt(0, finished_at="2026-12-03T10:00:00+00:00", agent="newer")
    older = make_attempt(7, finished_at="2026-12-01T10:00:00+00:00", agent="older")
    runs = load_run_dirs([write_run([newer], name="a"), write_run([older], name="b")])
    chosen = plan_export(runs).problems[0].choice.chosen
    assert (chosen.attempt.proposal.agent, chosen.campaign.endswith("b")) == ("older", True)


def test_solution_json_is_explicit_sorted_and_null_free(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    export_run(write_run([make_attempt(0)]), tmp_path / "out")
    text = (tmp_path / "out" / "rmsnorm" / "solution.json").read_text()
    data = json.loads(text)
    assert data["spec"]["destination_passing_style"] is False
    assert data["spec"]["target_hardware"] == ["B200", "LOCAL"]
    assert "null" not in text
    assert "description" not in data
    assert list(data) == sorted(data)
    assert list(data["spec"]) == sorted(data["spec"])
    assert text.endswith("}\n")


def test_scores_csv_and_manifest(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    attempts = [
        make_attempt(0, problem="softmax", speedup=2.0, latency_ms=0.1, bounds_ms=[0.02, 0.02]),
    ]
    out = tmp_path / "out"
    export_leaderboard([load_run_dir(write_run(attempts))], out)
    rows = _scores(out)
    assert list(rows[0]) == list(SCORES_COLUMNS)
    row = rows[0]
    # T_k 0.1, T_b = reference 0.2, T_SOL 0.02: S = 1 / (1 + 0.08 / 0.18).
    assert float(row["sol_score"]) == pytest.approx(1 / (1 + 0.08 / 0.18), rel=1e-5)
    assert (row["problem"], row["category"], row["hardware"]) == (
        "softmax",
        "elementwise",
        "NVIDIA H200",
    )
    assert (row["t_b_source"], row["t_sol_source"]) == ("reference", "guard roofline (NVIDIA H200)")
    assert float(row["t_b_ms"]) == pytest.approx(0.2)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["exported_at"] == "2026-12-02T10:00:01+00:00"
    assert manifest["libraries"] == {"torch": ["2.13.0"]}
    campaign = manifest["campaigns"][0]
    assert campaign["config_sha256"] and len(campaign["config_sha256"]) == 64
    assert (campaign["name"], campaign["device"], campaign["attempts"]) == ("run", "cuda", 1)
    assert set(manifest) >= {"exporter", "hardware", "scoring", "without_accepted_attempt"}


def test_the_speedup_interval_survives_attempts_jsonl_into_the_export(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    fresh = with_speedup_interval(
        make_attempt(0, problem="softmax", speedup=2.0), [(1.9, 2.0, 2.1), (1.6, 2.0, 2.5)]
    )
    old = make_attempt(0, problem="relu", speedup=1.5)  # recorded without an interval
    out = tmp_path / "out"
    runs = [load_run_dir(write_run([fresh], name="a")), load_run_dir(write_run([old], name="b"))]
    export_leaderboard(runs, out)
    rows = {row["problem"]: row for row in _scores(out)}
    assert float(rows["softmax"]["speedup_ci_low"]) == pytest.approx((1.9 * 1.6) ** 0.5, rel=1e-5)
    assert float(rows["softmax"]["speedup_ci_high"]) == pytest.approx((2.1 * 2.5) ** 0.5, rel=1e-5)
    assert rows["softmax"]["speedup_ci_method"].startswith("geometric mean over 2 workloads")
    assert (rows["relu"]["speedup_ci_low"], rows["relu"]["speedup_ci_method"]) == ("", "")
    problems = json.loads((out / "manifest.json").read_text())["problems"]
    assert problems["softmax"]["speedup_ci"]["low"] == pytest.approx((1.9 * 1.6) ** 0.5)
    assert "interleaved ABBA blocks" in problems["softmax"]["speedup_ci"]["method"]
    assert problems["relu"]["speedup_ci"] is None


def test_sol_score_is_empty_without_a_bound(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """No recorded bound and no problem files to compute one from: T_SOL and the score stay
    empty (the solution is still exported)."""
    run_dir = write_run([make_attempt(0)])
    shutil.rmtree(run_dir / PROBLEM_DIR)
    export_run(run_dir, tmp_path / "out")
    row = _scores(tmp_path / "out")[0]
    assert (row["t_sol_ms"], row["sol_score"], row["t_sol_source"]) == ("", "", "")


def test_roofline_module_gives_t_sol_when_the_guard_recorded_none(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    export_run(write_run([make_attempt(0)]), tmp_path / "out")
    row = _scores(tmp_path / "out")[0]
    # 3 float32 tensors of M elements at H200 copy bandwidth: tiny but positive.
    assert float(row["t_sol_ms"]) > 0
    assert row["t_sol_source"].startswith("roofline (NVIDIA H200")
    assert 0 < float(row["sol_score"]) < 1


def test_t_b_is_the_reference_even_with_a_compile_attempt(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """One SOL score per attempt: a campaign's torch.compile time is no longer T_b, so the
    exported score is the one MLflow and the report show (SolScorer)."""
    from kernelarc.report.sol_score import SolScorer

    compiled = make_attempt(
        0,
        agent="compiler",
        verdict=Verdict.CORRECT,
        latencies=[0.4, 0.1],
        knobs={"variant": "compile-max-autotune-no-cudagraphs", "compiled": True},
    )
    best = make_attempt(1, speedup=2.0, latencies=[0.2, 0.05], bounds_ms=[0.0, 0.0])
    run_dir = write_run([compiled, best])
    export_run(run_dir, tmp_path / "out")
    row = _scores(tmp_path / "out")[0]
    assert row["t_b_source"] == "reference"
    assert float(row["t_b_ms"]) == pytest.approx(2 * (0.2 * 0.05) ** 0.5)
    assert float(row["sol_score"]) == pytest.approx(1 / (1 + 0.5))
    live = SolScorer.for_run_dir(run_dir)(best)
    assert live is not None and float(row["sol_score"]) == pytest.approx(live, rel=1e-6)


def test_export_is_deterministic(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    runs = load_run_dirs(
        [
            write_run([make_attempt(0, problem="softmax", speedup=1.3)], name="r1"),
            write_run(
                [
                    make_attempt(
                        1, sources={"kernel.py": "def run(x, w):\n    return x\n", "b.py": "B=1\n"}
                    )
                ],
                name="r2",
            ),
        ]
    )
    first = export_leaderboard(runs, tmp_path / "a", sources=True)
    second = export_leaderboard(
        load_run_dirs([tmp_path / "r1", tmp_path / "r2"]), tmp_path / "b", sources=True
    )
    again = export_leaderboard(runs, tmp_path / "a", sources=True)
    rel = [p.relative_to(tmp_path / "a") for p in first]
    assert rel == [p.relative_to(tmp_path / "b") for p in second]
    assert "rmsnorm/sources/b.py" in [p.as_posix() for p in rel]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a
    assert again == first
    tree = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert tree == sorted(rel)


def test_timestamp_overrides_the_export_time(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    runs = [load_run_dir(write_run([make_attempt(0)]))]
    export_leaderboard(runs, tmp_path / "out", timestamp="2027-01-01T00:00:00+00:00")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["exported_at"], manifest["exported_at_source"]) == (
        "2027-01-01T00:00:00+00:00",
        "--timestamp",
    )


def test_stale_sources_are_replaced(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    out = tmp_path / "out"
    stale = out / "rmsnorm" / "sources" / "old.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("x = 1\n")
    export_leaderboard([load_run_dir(write_run([make_attempt(0)]))], out, sources=True)
    assert sorted(p.name for p in (out / "rmsnorm" / "sources").iterdir()) == ["kernel.py"]


# --- error cases -----------------------------------------------------------------------------


def test_problems_without_an_accepted_attempt_are_listed_not_fatal(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun, caplog: pytest.LogCaptureFixture
) -> None:
    attempts = [
        make_attempt(0),
        make_attempt(1, problem="rope", status=EvalStatus.RUNTIME_ERROR),
        make_attempt(2, problem="rope", verdict=Verdict.CORRECT),
        make_attempt(3, problem="gemm", confirmed=False),
    ]
    plan = plan_export([load_run_dir(write_run(attempts))])
    assert [p.name for p in plan.problems] == ["rmsnorm"]
    assert plan.unqualified == {
        "gemm": "1 attempts (PASSED 1); 1 NEW_BEST not confirmed by the benchmark guard "
        "(guard or confirmation off, or a record from before the guard)",
        "rope": "2 attempts (PASSED 1, RUNTIME_ERROR 1); PASSED attempts, but none accepted "
        "(NEW_BEST)",
    }
    assert "no accepted attempt for gemm" in caplog.text
    text = describe_plan(plan)
    assert "no accepted attempt (not exported):" in text
    assert "rope: 2 attempts" in text
    export_leaderboard([load_run_dir(tmp_path / "run")], tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert sorted(manifest["without_accepted_attempt"]) == ["gemm", "rope"]
    assert not (tmp_path / "out" / "rope").exists()


def test_no_accepted_attempt_at_all_lists_the_problems(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run(
        [
            make_attempt(0, problem="rope", status=EvalStatus.RUNTIME_ERROR),
            make_attempt(1, problem="gemm", status=EvalStatus.INCORRECT_SHAPE),
        ]
    )
    with pytest.raises(
        ConfigError, match=r"no accepted attempt for any problem \(gemm: .*; rope: "
    ):
        export_run(run_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run dir not found"):
        export_run(tmp_path / "nope", tmp_path / "out")


def test_dir_without_attempts_log_is_not_a_run_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not a KernelArc run dir \(no attempts\.jsonl\)"):
        export_run(tmp_path, tmp_path / "out")


def test_empty_run(tmp_path: Path) -> None:
    (tmp_path / "attempts.jsonl").write_text("")
    with pytest.raises(ConfigError, match="empty run: no attempts recorded"):
        export_run(tmp_path, tmp_path / "out")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            lambda d: (d / "attempts.jsonl").write_text('{"index": 0}\n{"index": 1}\n'),
            r"unreadable run: .*attempts\.jsonl:1: not a valid Attempt",
            id="corrupt-attempts",
        ),
        pytest.param(
            lambda d: (d / "campaign.json").write_text("{not json"),
            r"unreadable run: .*campaign\.json: unreadable campaign record",
            id="corrupt-campaign-json",
        ),
        pytest.param(
            lambda d: (d / "problem" / "definition.json").write_text('{"name": "rmsnorm"}'),
            r"unreadable run: .*definition\.json",
            id="corrupt-definition",
        ),
    ],
)
def test_unreadable_runs(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    damage: Callable[[Path], object],
    message: str,
) -> None:
    run_dir = write_run([make_attempt(0)])
    damage(run_dir)
    with pytest.raises(ConfigError, match=message):
        export_run(run_dir, tmp_path / "out")


def test_conflicting_definitions_across_runs(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    a = write_run([make_attempt(0)], name="a")
    other = definition_json("rmsnorm", reference="def run(x, w):\n    return x + w\n")
    b = write_run([make_attempt(1)], name="b", definition=other)
    with pytest.raises(
        ConfigError, match=r"conflicting definitions of 'rmsnorm': .*a and .*b differ in reference"
    ):
        plan_export(load_run_dirs([a, b]))


def test_same_definition_across_runs_is_fine(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    a = write_run([make_attempt(0, latency_ms=0.3)], name="a")
    b = write_run([make_attempt(1, latency_ms=0.1)], name="b")
    plan = plan_export(load_run_dirs([a, b]))
    assert plan.problems[0].choice.chosen.campaign == str(b)
    assert len(plan.problems[0].choice.ranked) == 2


def test_the_same_run_dir_twice_is_refused(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run([make_attempt(0)])
    with pytest.raises(ConfigError, match="given twice"):
        load_run_dirs([run_dir, run_dir])


def test_run_without_problem_files_exports_solution_and_traces(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run([make_attempt(0)], record=False)
    for name in ("definition.json", "workload.jsonl"):
        (run_dir / "problem" / name).unlink()
    written = export_run(run_dir, tmp_path / "out")
    assert [p.name for p in written] == [
        "solution.json",
        "traces.jsonl",
        "scores.csv",
        "manifest.json",
    ]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["problems"]["rmsnorm"]["problem_files"] is False
    assert manifest["campaigns"][0]["name"] is None


def test_non_finite_speedup_is_not_eligible(make_attempt: MakeAttempt) -> None:
    attempts = (
        make_attempt(0, speedup=1.2),
        make_attempt(1, speedup=float("inf"), latency_ms=0.01),
    )
    plan = plan_export(
        [CampaignSource(label="mem", attempts=attempts, problem_name="", seed="", config={})]
    )
    assert plan.problems[0].choice.chosen.attempt.index == 0


def test_reserved_export_names_are_refused(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run([make_attempt(0, problem="scores.csv")])
    with pytest.raises(ConfigError, match=re.escape("problem name 'scores.csv' cannot be")):
        export_run(run_dir, tmp_path / "out")
