"""Replay every acceptance decision of a campaign from its recorded attempts alone.

Place in the flow: after (or during) a campaign, `rundir.rejudge.replay_run(run_dir)` reads
attempts.jsonl and hands the attempts here, which re-judges each one with
`verdict.judge_attempt`, walking the incumbent forward exactly as the loop did (attempts are
appended in the order they were judged). A mismatch means the record and the rules disagree: a
bug, or a hand-edited file. This module takes attempts, not a run dir: the guard is pure judging
and sits below the run dir (issue #19).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kernelarc.guard.score import score_traces
from kernelarc.guard.verdict import Judgement, judge_attempt
from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.schema.guard_record import GuardRecord, GuardSettings

#: What an attempt recorded before the guard existed was judged with: naive acceptance.
_NAIVE = GuardRecord(settings=GuardSettings(enabled=False, confirm=False, roofline_slack=None))


@dataclass(frozen=True)
class ReplayMismatch:
    """One attempt whose replayed decision differs from the recorded one."""

    index: int
    """Attempt index."""
    recorded: str
    """Recorded `verdict/status/confirmed`."""
    replayed: str
    """Replayed `verdict/status/confirmed`."""


def replay_judgements(attempts: Sequence[Attempt]) -> list[Judgement]:
    """Re-judge every attempt in file order; the incumbent is the latest replayed NEW_BEST."""
    incumbent: Attempt | None = None
    out: list[Judgement] = []
    for attempt in attempts:
        record = attempt.guard or _NAIVE
        eval_status: EvalStatus | Literal["INFRA_ERROR"]
        latencies: tuple[float, ...]
        if attempt.status == "INFRA_ERROR":
            eval_status, speedup, latencies = "INFRA_ERROR", None, ()
        else:
            score = score_traces(attempt.traces)
            eval_status, speedup, latencies = score.status, score.speedup, score.latencies_ms
        judgement = judge_attempt(
            eval_status,
            speedup,
            latencies,
            record,
            incumbent.speedup if incumbent else None,
        )
        out.append(judgement)
        if judgement.verdict == Verdict.NEW_BEST:
            incumbent = attempt
    return out


def replay_verdicts(attempts: Sequence[Attempt]) -> list[Verdict]:
    """The verdict of every attempt, recomputed from the recorded measurements alone."""
    return [j.verdict for j in replay_judgements(attempts)]


def replay_mismatches(attempts: Sequence[Attempt]) -> list[ReplayMismatch]:
    """Attempts whose recorded verdict, status or confirmation the replay does not reproduce."""
    mismatches = []
    for attempt, judgement in zip(attempts, replay_judgements(attempts), strict=True):
        recorded = f"{attempt.verdict}/{attempt.status}/{attempt.confirmed}"
        replayed = f"{judgement.verdict}/{judgement.status}/{judgement.confirmed}"
        if recorded != replayed:
            mismatches.append(ReplayMismatch(attempt.index, recorded, replayed))
    return mismatches
