"""The guard's re-timing and confirmation runs against a real LocalSandbox whose infrastructure
fails for real: an infrastructure failure is retried and then INFRA_ERROR, never the
candidate's defeat; a candidate that fails its re-run by itself is still REJECTED_GUARD.

The failure injected is the one seen on the GPU host, a runner identity that cannot work: one
identity's compile cache dir has a subdir its runner cannot write, so that runner's self-check
fails before any candidate code runs (`runner/self_check.py`) and the sandbox raises
SandboxError. Runners alternate identities, so a retry runs as the other one.
"""

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from vector_add_request import vector_add_request

from kernelarc.guard import Challenge, judge_attempt, run_challenge, score_traces
from kernelarc.guard.challenge import evaluate_retrying
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalResult,
    EvalStatus,
    Proposal,
    Verdict,
    proposal_id_for,
)
from kernelarc.schema.guard_record import GuardRecord, GuardSettings

TIMEOUT_S = 180.0
FIRST, SECOND = (61710, 61710), (61711, 61711)
SETTINGS = GuardSettings(min_repeats=1, max_repeats=1, resamples=200, infra_retries=2)
ADD = "def run(x, y):\n    return x + y\n"
#: Passes its first evaluation, then fails every run after it (it keeps a marker in its
#: identity's compile cache, which outlives the runner): the candidate's own fault.
PASSES_ONCE = """import os
from pathlib import Path

_MARK = Path(os.environ["TRITON_CACHE_DIR"]).parent / "ran-once"
_AGAIN = _MARK.exists()
_MARK.touch()


def run(x, y):
    if _AGAIN:
        raise RuntimeError("this candidate only works the first time")
    return x + y
"""


def _break(cache: Path, identity: tuple[int, int]) -> None:
    """Make the identity's Triton cache dir unwritable to its runner (root owns it, 0555)."""
    folder = cache / f"{identity[0]}-{identity[1]}" / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, 0, 0)
    folder.chmod(0o555)


def _proposal(request: EvalRequest) -> Proposal:
    solution = request.solution
    return Proposal(id=proposal_id_for(solution), agent="a", strategy="s", solution=solution)


def _attempt(proposal: Proposal, result: EvalResult) -> Attempt:
    score = score_traces(result.traces)
    return Attempt(
        index=0,
        problem=proposal.solution.definition,
        proposal=proposal,
        status=score.status,
        traces=result.traces,
        speedup=score.speedup,
        verdict=Verdict.NEW_BEST,
        started_at="t",
        finished_at="t",
        confirmed=True,
    )


def _judge(result: EvalResult, record: GuardRecord, incumbent: float | None) -> tuple[str, str]:
    score = score_traces(result.traces)
    judgement = judge_attempt(score.status, score.speedup, score.latencies_ms, record, incumbent)
    return str(judgement.verdict), str(judgement.status)


def _sandbox(cache: Path, second: tuple[int, int] = SECOND) -> LocalSandbox:
    # Cold starts only: each evaluation leases the identity not used last (FIRST first).
    return LocalSandbox(user=FIRST, spare_user=second, cache_dir=cache, warm_spare=False)


def _evaluator(sandbox: LocalSandbox) -> Callable[[EvalRequest], EvalResult]:
    return lambda request: sandbox.evaluate(request, timeout_s=TIMEOUT_S)


def _jailed(result: EvalResult) -> bool:
    return not any(n.startswith("no jail") for n in result.sandbox_notes)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="two runner identities need the jail (root)")
def test_a_broken_identity_is_retried_as_the_other_and_the_candidate_confirmed(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    request = vector_add_request(ADD, name="add")
    with _sandbox(cache) as sandbox:
        evaluate = _evaluator(sandbox)
        first = evaluate(request)  # FIRST, healthy: the candidate's own evaluation passes
        if not _jailed(first):
            pytest.skip(f"the jail is not in use here: {first.sandbox_notes}")
        assert score_traces(first.traces).status == EvalStatus.PASSED, first.stderr_tail
        _break(cache, SECOND)
        # Confirmation: SECOND (broken: SandboxError), retried as FIRST, which passes.
        challenge = Challenge(_proposal(request), None, request, confirm_seed=201)
        record = run_challenge(challenge, GuardRecord(settings=SETTINGS), evaluate)
    confirmation = record.confirmation
    assert confirmation is not None
    assert (confirmation.status, confirmation.retries) == ("PASSED", 1), confirmation.log
    assert record.extra_evaluations == 2
    assert _judge(first, record, None) == ("NEW_BEST", "PASSED")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the runner must not write as root (the jail)")
def test_infrastructure_that_stays_broken_is_infra_error_not_the_candidates_defeat(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    # Clearly slower than `fast` on any CPU (an extra op alone was not, under load: the
    # challenger then measured no faster and was never challenged).
    slow_source = "import time\n\ndef run(x, y):\n    time.sleep(0.005)\n    return x + y\n"
    slow = vector_add_request(slow_source, name="slow")
    fast = vector_add_request(ADD, name="fast")
    with _sandbox(cache) as sandbox:
        evaluate = _evaluator(sandbox)
        incumbent_result = evaluate(slow)
        if not _jailed(incumbent_result):
            pytest.skip(f"the jail is not in use here: {incumbent_result.sandbox_notes}")
        challenger_result = evaluate(fast)
        incumbent = _attempt(_proposal(slow), incumbent_result)
        for identity in (FIRST, SECOND):
            _break(cache, identity)
        # Re-timing: the challenger's run fails in the sandbox three times (two retries).
        retimed = run_challenge(
            Challenge(_proposal(fast), incumbent, fast, confirm_seed=202),
            GuardRecord(settings=SETTINGS),
            evaluate,
        )
        # Confirmation only (no incumbent): the same.
        confirmed = run_challenge(
            Challenge(_proposal(fast), None, fast, confirm_seed=202),
            GuardRecord(settings=SETTINGS),
            evaluate,
        )
    # The round in flight finishes (the incumbent's run fails the same way), then it stops.
    rows = [(s.role, s.status, s.retries) for s in retimed.samples]
    assert rows == [("challenger", "INFRA_ERROR", 2), ("incumbent", "INFRA_ERROR", 2)]
    log = retimed.samples[0].log
    assert "could not set itself up" in log and "not writable" in log
    assert retimed.confirmation is None and retimed.extra_evaluations == 6
    assert confirmed.confirmation is not None
    assert (confirmed.confirmation.status, confirmed.confirmation.retries) == ("INFRA_ERROR", 2)
    incumbent_speedup = incumbent.speedup
    assert _judge(challenger_result, retimed, incumbent_speedup) == ("INFRA_ERROR", "PASSED")
    assert _judge(challenger_result, confirmed, None) == ("INFRA_ERROR", "PASSED")
    # The same records judged by the rules before `infra_retries`: the confirmation's failure
    # was the candidate's defeat.
    old = confirmed.model_copy(
        update={"settings": SETTINGS.model_copy(update={"infra_retries": None})}
    )
    assert _judge(challenger_result, old, None) == ("FAILED", "REJECTED_GUARD")


def test_a_candidate_that_fails_its_rerun_by_itself_is_rejected_without_retries(
    tmp_path: Path,
) -> None:
    """Not infrastructure: the runner set itself up, ran the candidate, and the candidate
    raised. One identity, so the re-run finds the marker its first run left."""
    request = vector_add_request(PASSES_ONCE, name="passes_once")
    with _sandbox(tmp_path / "cache", second=FIRST) as sandbox:
        evaluate = _evaluator(sandbox)
        first = evaluate(request)
        assert score_traces(first.traces).status == EvalStatus.PASSED, first.stderr_tail
        challenge = Challenge(_proposal(request), None, request, confirm_seed=201)
        record = run_challenge(challenge, GuardRecord(settings=SETTINGS), evaluate)
    confirmation = record.confirmation
    assert confirmation is not None
    assert (confirmation.status, confirmation.retries) == ("RUNTIME_ERROR", 0)
    assert "only works the first time" in confirmation.log
    assert _judge(first, record, None) == ("FAILED", "REJECTED_GUARD")


def test_evaluate_retrying_counts_retries_and_keeps_the_last_error() -> None:
    from kernelarc.errors import SandboxError

    calls: list[int] = []

    def flaky(request: EvalRequest) -> EvalResult:
        calls.append(1)
        if len(calls) < 3:
            raise SandboxError(f"start {len(calls)} failed")
        return EvalResult(traces=[], stderr_tail="", wall_s=0.0, sandbox="local")

    request = vector_add_request(ADD)
    done = evaluate_retrying(flaky, request, 2)
    assert done.result is not None and (done.retries, done.error) == (
        2,
        "SandboxError: start 2 failed",
    )
    calls.clear()
    failed = evaluate_retrying(flaky, request, 1)
    assert failed.result is None and failed.retries == 1 and "start 2" in failed.error
