"""Verdicts from recorded measurements: the rule order, the re-timing/confirmation driver against
a scripted sandbox, and replay reproducing every decision of a recorded attempts list."""

from dataclasses import dataclass, field

import pytest

from kernelarc.errors import SandboxError
from kernelarc.guard import (
    Challenge,
    judge_attempt,
    replay_mismatches,
    replay_verdicts,
    run_challenge,
    score_traces,
)
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.schema import (
    Attempt,
    BuildSpec,
    Correctness,
    Environment,
    EvalRequest,
    EvalResult,
    EvalStatus,
    Evaluation,
    Language,
    Performance,
    Proposal,
    Solution,
    SourceFile,
    TargetHardware,
    Trace,
    Verdict,
    proposal_id_for,
)
from kernelarc.schema.guard_record import (
    Confirmation,
    GuardRecord,
    GuardSettings,
    RooflineBound,
    StaticFinding,
)

PROBLEM = resolve_problem("rmsnorm", "workload.jsonl")
WORKLOADS = list(PROBLEM.workloads)
SETTINGS = GuardSettings(min_repeats=2, max_repeats=4, resamples=500)


def _proposal(tag: str) -> Proposal:
    solution = Solution(
        name=tag,
        definition="rmsnorm",
        author="test",
        spec=BuildSpec(
            languages=[Language.PYTORCH],
            target_hardware=[TargetHardware.LOCAL],
            entry_point="kernel.py::run",
            destination_passing_style=False,
        ),
        sources=[SourceFile(path="kernel.py", content=f"# {tag}\ndef run(x, weight):\n    ...\n")],
    )
    return Proposal(id=proposal_id_for(solution), agent="a", strategy="s", solution=solution)


def _traces(latency_ms: float | None, status: EvalStatus = EvalStatus.PASSED) -> list[Trace]:
    traces = []
    for i, workload in enumerate(WORKLOADS):
        passed = status == EvalStatus.PASSED
        lat = (latency_ms or 1.0) * (i + 1)
        evaluation = Evaluation(
            status=status,
            environment=Environment(hardware="cpu"),
            timestamp="2026-01-01T00:00:00",
            correctness=Correctness()
            if passed or status == EvalStatus.INCORRECT_NUMERICAL
            else None,
            performance=(
                Performance(
                    latency_ms=lat, reference_latency_ms=i + 1.0, speedup_factor=(i + 1) / lat
                )
                if passed
                else None
            ),
        )
        traces.append(Trace(definition="rmsnorm", workload=workload, evaluation=evaluation))
    return traces


@dataclass
class ScriptedSandbox:
    """Answers requests from a latency table per proposal id (a test double of the Sandbox)."""

    latency: dict[str, float]
    failing_seeds: set[int] = field(default_factory=set)
    requests: list[EvalRequest] = field(default_factory=list)
    broken: bool = False

    def __call__(self, request: EvalRequest) -> EvalResult:
        self.requests.append(request)
        if self.broken:
            msg = "sandbox down"
            raise SandboxError(msg)
        pid = proposal_id_for(request.solution)
        if request.seed in self.failing_seeds:
            return EvalResult(traces=_traces(None, EvalStatus.INCORRECT_NUMERICAL))
        return EvalResult(traces=_traces(self.latency[pid]))


def _request(proposal: Proposal) -> EvalRequest:
    return EvalRequest(
        definition=PROBLEM.definition, workloads=WORKLOADS, solution=proposal.solution
    )


def _simulate(
    candidates: list[tuple[Proposal, list[Trace], list[StaticFinding]]], sandbox: ScriptedSandbox
) -> list[Attempt]:
    """What the campaign loop does, in order: record, challenge if needed, judge, append."""
    attempts: list[Attempt] = []
    best: Attempt | None = None
    for index, (proposal, traces, findings) in enumerate(candidates):
        score = score_traces(traces)
        record = GuardRecord(settings=SETTINGS, findings=findings)
        blocked = any(f.severity == "block" for f in findings)
        inc_speedup = best.speedup if best else None
        if (
            not blocked
            and score.speedup is not None
            and (inc_speedup is None or score.speedup > inc_speedup)
        ):
            challenge = Challenge(proposal, best, _request(proposal), confirm_seed=201 + index)
            record = run_challenge(challenge, record, sandbox)
        judgement = judge_attempt(
            score.status, score.speedup, score.latencies_ms, record, inc_speedup
        )
        attempt = Attempt(
            index=index,
            problem="rmsnorm",
            proposal=proposal,
            status=judgement.status,
            traces=[] if blocked else traces,
            speedup=score.speedup,
            latency_ms=score.latency_ms,
            verdict=judgement.verdict,
            started_at="t",
            finished_at="t",
            confirmed=judgement.confirmed,
            guard=record.model_copy(update={"reason": judgement.reason}),
        )
        attempts.append(attempt)
        if judgement.verdict == Verdict.NEW_BEST:
            best = attempt
    return attempts


def test_replay_reproduces_a_recorded_campaign() -> None:
    first, faster, lucky, failing, hostile, flaky_seed = (
        _proposal(t) for t in ("first", "faster", "lucky", "failing", "hostile", "flaky")
    )
    sandbox = ScriptedSandbox(
        latency={
            first.id: 2.0,
            faster.id: 1.0,  # truly 2x faster: re-timing accepts
            lucky.id: 1.0,  # measured fast once, but really as fast as `faster`: re-timing rejects
            flaky_seed.id: 0.5,
        },
        failing_seeds={201 + 5},  # the confirmation seed of candidate 5
    )
    block = StaticFinding(rule="KA-S009", severity="block", path="kernel.py", line=1, message="x")
    attempts = _simulate(
        [
            (first, _traces(2.0), []),
            (faster, _traces(1.0), []),
            (lucky, _traces(0.9), []),
            (failing, _traces(None, EvalStatus.INCORRECT_NUMERICAL), []),
            (hostile, _traces(0.1), [block]),
            (flaky_seed, _traces(0.5), []),
        ],
        sandbox,
    )
    verdicts = [a.verdict for a in attempts]
    assert verdicts == [
        Verdict.NEW_BEST,
        Verdict.NEW_BEST,
        Verdict.CHALLENGER,
        Verdict.FAILED,
        Verdict.FAILED,
        Verdict.FAILED,
    ]
    assert [a.status for a in attempts][3:] == [
        EvalStatus.INCORRECT_NUMERICAL,
        "REJECTED_STATIC",
        "REJECTED_GUARD",
    ]
    assert attempts[0].confirmed and attempts[1].confirmed and not attempts[2].confirmed
    assert attempts[0].guard and not attempts[0].guard.samples  # no incumbent: confirmation only
    assert attempts[1].guard and attempts[1].guard.decision
    assert attempts[1].guard.decision.outcome == "accept"
    assert attempts[1].guard.extra_evaluations == len(attempts[1].guard.samples) + 1
    assert attempts[2].guard and attempts[2].guard.confirmation is None
    assert attempts[5].guard and attempts[5].guard.confirmation
    assert attempts[5].guard.confirmation.seed == 206
    # Replay needs the attempts only, also after a round trip through JSON.
    reloaded = [Attempt.model_validate_json(a.model_dump_json()) for a in attempts]
    assert replay_verdicts(reloaded) == verdicts
    assert replay_mismatches(reloaded) == []


def test_replay_detects_an_edited_sample() -> None:
    first, faster = _proposal("first"), _proposal("faster")
    sandbox = ScriptedSandbox(latency={first.id: 2.0, faster.id: 1.0})
    attempts = _simulate([(first, _traces(2.0), []), (faster, _traces(1.0), [])], sandbox)
    guard = attempts[1].guard
    assert guard is not None
    slow = [
        s.model_copy(update={"latencies_ms": [x * 3 for x in s.latencies_ms]})
        if s.role == "challenger"
        else s
        for s in guard.samples
    ]
    attempts[1] = attempts[1].model_copy(
        update={"guard": guard.model_copy(update={"samples": slow})}
    )
    assert [m.index for m in replay_mismatches(attempts)] == [1]


def test_retiming_is_interleaved_abba_with_one_round_and_no_reference_timing() -> None:
    first, faster = _proposal("first"), _proposal("faster")
    sandbox = ScriptedSandbox(latency={first.id: 2.0, faster.id: 1.0})
    _simulate([(first, _traces(2.0), []), (faster, _traces(1.0), [])], sandbox)
    retimed = [r for r in sandbox.requests if r.correctness_rounds == 1]
    order = [proposal_id_for(r.solution) for r in retimed]
    assert order == [faster.id, first.id, first.id, faster.id]  # stops at min_repeats: decided
    assert all(not r.timing.time_reference for r in retimed)
    confirmations = [r for r in sandbox.requests if r.seed != 200]
    assert [r.seed for r in confirmations] == [201, 202]


def test_undecided_retiming_stops_at_max_repeats() -> None:
    first, same = _proposal("first"), _proposal("same")
    sandbox = ScriptedSandbox(latency={first.id: 1.0, same.id: 1.0})
    attempts = _simulate([(first, _traces(1.0), []), (same, _traces(0.5), [])], sandbox)
    guard = attempts[1].guard
    assert guard is not None and guard.decision is not None
    # Identical latencies: the CI collapses on 1.0 > 0.99, so it is rejected at min_repeats.
    assert guard.decision.outcome == "reject"
    assert attempts[1].verdict == Verdict.CHALLENGER
    assert len(guard.samples) == 2 * SETTINGS.min_repeats


def test_sandbox_failure_during_retiming_is_not_acceptance() -> None:
    first, faster = _proposal("first"), _proposal("faster")
    sandbox = ScriptedSandbox(latency={first.id: 2.0, faster.id: 1.0})
    attempts = _simulate([(first, _traces(2.0), [])], sandbox)
    sandbox.broken = True
    record = run_challenge(
        Challenge(faster, attempts[0], _request(faster), confirm_seed=202),
        GuardRecord(settings=SETTINGS),
        sandbox,
    )
    # The round in flight finishes, then re-timing stops: no further rounds, no confirmation.
    assert [s.status for s in record.samples] == ["INFRA_ERROR", "INFRA_ERROR"]
    assert record.confirmation is None
    judgement = judge_attempt(EvalStatus.PASSED, 5.0, (1.0, 2.0, 3.0), record, 1.0)
    assert judgement.verdict == Verdict.CHALLENGER


@pytest.mark.parametrize(
    ("record", "status", "verdict"),
    [
        pytest.param(
            GuardRecord(
                settings=SETTINGS,
                roofline=[
                    RooflineBound(workload=w.uuid, bound_ms=5.0, bytes=1, flops=0)
                    for w in WORKLOADS
                ],
            ),
            "REJECTED_GUARD",
            Verdict.FAILED,
            id="below-speed-of-light",
        ),
        pytest.param(
            GuardRecord(settings=SETTINGS, confirmation=Confirmation(seed=201, status="TIMEOUT")),
            "REJECTED_GUARD",
            Verdict.FAILED,
            id="confirmation-failed",
        ),
        pytest.param(
            GuardRecord(settings=SETTINGS), "REJECTED_GUARD", Verdict.FAILED, id="unconfirmed"
        ),
        pytest.param(
            GuardRecord(settings=SETTINGS.model_copy(update={"enabled": False, "confirm": False})),
            EvalStatus.PASSED,
            Verdict.NEW_BEST,
            id="guard-off-is-naive",
        ),
    ],
)
def test_first_passing_attempt(record: GuardRecord, status: str, verdict: Verdict) -> None:
    judgement = judge_attempt(EvalStatus.PASSED, 2.0, (1.0, 2.0, 3.0), record, None)
    assert (judgement.status, judgement.verdict) == (status, verdict)
    if status == "REJECTED_GUARD":
        assert judgement.reason
