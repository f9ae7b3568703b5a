"""The conclusion board: validation against the record, the event log, reload, and automatic
retraction when the guard's re-runs discredit the evidence."""

import json
from pathlib import Path

import pytest
from records import PROBLEM, attempt, retiming

from kernelarc.coordination import ConclusionBoard, ConclusionRejected, read_conclusion_events
from kernelarc.schema import Verdict
from kernelarc.schema.coordination import ConclusionDraft, Evidence


def _board(tmp_path: Path) -> ConclusionBoard:
    return ConclusionBoard(PROBLEM, "rmsnorm", tmp_path / "conclusions.jsonl")


def _compare(
    faster, slower, claim: str = "BLOCK_H 2048 over 1024: +25% on rmsnorm"
) -> ConclusionDraft:
    return ConclusionDraft(
        claim=claim,
        evidence=[
            Evidence(
                attempt_index=faster.index,
                proposal_id=faster.proposal.id,
                value=faster.speedup,
                baseline=slower.speedup,
                delta=faster.speedup / slower.speedup - 1,
            ),
            Evidence(
                attempt_index=slower.index, proposal_id=slower.proposal.id, value=slower.speedup
            ),
        ],
        confidence=0.6,
    )


def test_publish_assigns_ids_and_appends_events(tmp_path: Path) -> None:
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)
    board.observe(a0)
    board.observe(a1)
    first = board.publish("tiling", "tiling", _compare(a1, a0))
    second = board.publish("memory", "memory", _compare(a1, a0, "wide rows help on rmsnorm"))
    assert (first.id, second.id) == ("c-1", "c-2")
    assert first.scope.problem == PROBLEM and first.agent == "tiling"
    assert board.live() == (first, second)
    assert board.live(limit=1) == (second,)
    assert board.live(limit=0) == ()
    events = read_conclusion_events(tmp_path / "conclusions.jsonl")
    assert [e.kind for e in events] == ["published", "published"]
    assert events[0].conclusion == first


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        pytest.param(
            lambda e: e.model_copy(update={"attempt_index": 9}),
            "no such attempt",
            id="unknown-attempt",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"proposal_id": "p-000000000000"}),
            "not p-",
            id="wrong-proposal",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"value": 3.0}),
            "does not match the recorded",
            id="inflated-value",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"delta": 0.9}),
            "is not value/baseline",
            id="inflated-delta",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"baseline": 0.5, "delta": None}),
            "baseline 0.5",
            id="invented-baseline",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"metric": "gflops"}),
            "metric 'gflops'",
            id="unknown-metric",
        ),
        pytest.param(
            lambda e: e.model_copy(update={"value": None, "baseline": None, "delta": None}),
            "needs the value",
            id="no-value",
        ),
    ],
)
def test_evidence_must_match_the_record(tmp_path: Path, mutate, reason: str) -> None:
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)
    board.observe(a0)
    board.observe(a1)
    draft = _compare(a1, a0)
    bad = draft.model_copy(update={"evidence": [mutate(draft.evidence[0]), draft.evidence[1]]})
    with pytest.raises(ConclusionRejected, match=reason):
        board.publish("tiling", "tiling", bad)
    assert board.live() == () and board.rejected == 1
    (event,) = read_conclusion_events(tmp_path / "conclusions.jsonl")
    assert event.kind == "rejected" and reason.split()[0] in event.reason


def test_claim_rules(tmp_path: Path) -> None:
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)
    board.observe(a0)
    board.observe(a1)
    with pytest.raises(ConclusionRejected, match="code in the claim"):
        board.publish("x", "x", _compare(a1, a0, "use `tl.load(ptr, mask=m)` for +25%"))
    with pytest.raises(ConclusionRejected, match="characters"):
        board.publish("x", "x", _compare(a1, a0, "faster " * 60))
    with pytest.raises(ConclusionRejected, match="op_family"):
        board.publish("x", "x", _compare(a1, a0).model_copy(update={"op_family": "gemm"}))
    with pytest.raises(ConclusionRejected, match="no evidence"):
        board.publish("x", "x", _compare(a1, a0).model_copy(update={"evidence": []}))
    board.publish("x", "x", _compare(a1, a0))
    with pytest.raises(ConclusionRejected, match="already on the board as c-1"):
        board.publish("y", "y", _compare(a1, a0, "  BLOCK_H 2048 OVER 1024: +25% on rmsnorm "))


def test_numbers_of_guard_rejected_attempts_are_not_evidence(tmp_path: Path) -> None:
    board = _board(tmp_path)
    a0, cheat = attempt(0, speedup=1.0), attempt(1, speedup=50.0, status="REJECTED_GUARD")
    board.observe(a0)
    board.observe(cheat)
    with pytest.raises(ConclusionRejected, match="REJECTED_GUARD"):
        board.publish("x", "x", _compare(cheat, a0))
    status_only = ConclusionDraft(
        claim="the 50x kernel is rejected by the roofline check",
        evidence=[Evidence(attempt_index=1, proposal_id=cheat.proposal.id, metric="status")],
    )
    assert board.publish("x", "x", status_only).id == "c-1"


def test_a_challengers_unreproduced_measurement_is_not_evidence(tmp_path: Path) -> None:
    """Issue 17: the guard's re-timing rejected a compile candidate (ratio 1.0118), yet its
    single measurement was published as "compile-default over eager: +16251%"."""
    board = _board(tmp_path)
    eager = attempt(0, speedup=1.0)
    rejected = attempt(1, speedup=163.51).model_copy(update={"verdict": Verdict.CHALLENGER})
    board.observe(eager)
    board.observe(rejected)
    with pytest.raises(ConclusionRejected, match="did not accept its measurement"):
        board.publish("compiler", "compiler", _compare(rejected, eager))
    assert board.live() == ()


@pytest.mark.parametrize(
    ("make_guard", "reason"),
    [
        pytest.param(
            lambda inc: retiming(inc, status="INCORRECT_NUMERICAL"),
            "ended INCORRECT_NUMERICAL",
            id="rerun-wrong",
        ),
        pytest.param(
            lambda inc: retiming(inc, status="REWARD_HACK"), "ended REWARD_HACK", id="rerun-hack"
        ),
        pytest.param(
            lambda inc: retiming(inc, latencies_ms=[0.1], bound_ms=1.0),
            "below the roofline",
            id="rerun-below-roofline",
        ),
        pytest.param(
            lambda inc: retiming(inc, latencies_ms=[1.2]),
            "not reproduced",
            id="gain-not-reproduced",
        ),
    ],
)
def test_retraction_when_a_rerun_discredits_the_evidence(
    tmp_path: Path, make_guard, reason: str
) -> None:
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)  # a1: 0.8 ms, +25%
    for a in (a0, a1):
        board.observe(a)
    conclusion = board.publish("tiling", "tiling", _compare(a1, a0))
    unrelated = board.publish(
        "memory",
        "memory",
        ConclusionDraft(
            claim="the baseline passes",
            evidence=[Evidence(attempt_index=0, proposal_id=a0.proposal.id, metric="status")],
        ),
    )
    # Attempt 2 is a challenger; judging it, the guard re-ran the incumbent a1.
    retracted = board.observe(attempt(2, speedup=2.0, guard=make_guard(a1)))
    assert [c.id for c in retracted] == [conclusion.id]
    assert retracted[0].retracted and reason in retracted[0].retraction_reason
    assert board.live() == (unrelated,), "agents must stop seeing a retracted conclusion"
    events = read_conclusion_events(tmp_path / "conclusions.jsonl")
    assert events[-1].kind == "retracted" and events[-1].conclusion_id == conclusion.id
    # A discredited attempt cannot be cited again.
    with pytest.raises(ConclusionRejected):
        board.publish("x", "x", _compare(a1, a0, "wide rows win on rmsnorm"))


def test_a_reproduced_gain_and_an_infra_failure_retract_nothing(tmp_path: Path) -> None:
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)
    for a in (a0, a1):
        board.observe(a)
    board.publish("tiling", "tiling", _compare(a1, a0))
    assert board.observe(attempt(2, guard=retiming(a1, latencies_ms=[0.85]))) == []
    assert board.observe(attempt(3, guard=retiming(a1, status="INFRA_ERROR"))) == []
    assert len(board.live()) == 1


def test_restore_rebuilds_the_board_and_catches_up(tmp_path: Path) -> None:
    path = tmp_path / "conclusions.jsonl"
    board = _board(tmp_path)
    a0, a1 = attempt(0, speedup=1.0), attempt(1, speedup=1.25)
    for a in (a0, a1):
        board.observe(a)
    kept = board.publish("tiling", "tiling", _compare(a1, a0))
    dropped = board.publish("memory", "memory", _compare(a1, a0, "wide rows win on rmsnorm"))
    board.retract(dropped.id, "by hand")
    with pytest.raises(ConclusionRejected):
        board.publish("x", "x", _compare(a1, a0, "def f(x): return x"))
    # A crash left a half-written line; the campaign also recorded a re-run failure of a1
    # that never reached the board.
    with path.open("a") as handle:
        handle.write('{"kind": "publ')
    a2 = attempt(2, guard=retiming(a1, status="RUNTIME_ERROR"))
    restored = ConclusionBoard.restore(path, [a0, a1, a2], PROBLEM, "rmsnorm")
    assert [c.id for c in restored.conclusions()] == [kept.id, dropped.id]
    assert restored.rejected == 1
    assert restored.live() == (), "the re-run failure retracts the kept conclusion on restore"
    assert "RUNTIME_ERROR" in restored.conclusions()[0].retraction_reason
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines][-1] == "retracted"
    # New ids continue after the restored ones.
    a3, a4 = attempt(3, speedup=1.0), attempt(4, speedup=1.5)
    restored.observe(a3)
    restored.observe(a4)
    assert restored.publish("t", "t", _compare(a4, a3)).id == "c-3"


def test_a_board_without_a_file_keeps_everything_in_memory(tmp_path: Path) -> None:
    board = ConclusionBoard(PROBLEM)
    a0 = attempt(0)
    board.observe(a0)
    draft = ConclusionDraft(
        claim="the reference passes",
        evidence=[Evidence(attempt_index=0, proposal_id=a0.proposal.id, metric="status")],
    )
    assert board.publish("a", "a", draft).id == "c-1"
    assert list(tmp_path.iterdir()) == []
