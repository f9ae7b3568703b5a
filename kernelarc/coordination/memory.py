"""Conclusions-only shared memory: the board agents publish findings to and read them from.

Place in the flow: the campaign loop feeds every judged attempt to `ConclusionBoard.observe`
(which retracts conclusions the attempt discredits), passes drafts an agent's `conclude` hook
returned to `publish` (which validates them: prose only, evidence that matches the record), and
puts `live()` into every agent's context. Every event is appended to `<run_dir>/conclusions.jsonl`
first (published, retracted, rejected), so `ConclusionBoard.restore` rebuilds the board of a
resumed campaign from that file and attempts.jsonl. Thread-safe.
"""

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from statistics import median

from kernelarc.coordination.evidence import (
    evidence_problems,
    lost_gain,
    rerun_discredits,
    retimed_latency,
)
from kernelarc.coordination.no_code import code_reasons, normalize_claim
from kernelarc.jsonl_log import append_record, drop_unterminated_tail, read_records
from kernelarc.schema import Attempt, utc_now
from kernelarc.schema.coordination import (
    Conclusion,
    ConclusionDraft,
    ConclusionEvent,
    ConclusionScope,
    Evidence,
)

logger = logging.getLogger(__name__)

"""File name of the board's event log inside a run dir."""


class ConclusionRejected(Exception):
    """A draft broke the board's rules; `reasons` lists each one (the event log has them too)."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class ConclusionBoard:
    """The campaign's conclusions, their retractions and the evidence record they are checked
    against.

    Args:
        problem: the campaign's definition name (every conclusion's scope).
        op_family: the definition's op_type (a conclusion may widen its scope to it).
        path: the event log; None keeps the board in memory only.
        max_claim_chars: longest claim accepted.
    """

    def __init__(
        self,
        problem: str,
        op_family: str = "",
        path: Path | None = None,
        max_claim_chars: int = 280,
    ) -> None:
        self.problem = problem
        self.op_family = op_family
        self.path = path
        self.max_claim_chars = max_claim_chars
        self._lock = threading.Lock()
        self._conclusions: dict[str, Conclusion] = {}
        self._record: dict[int, Attempt] = {}
        self._discredited: dict[str, str] = {}
        self._retimed: dict[str, list[float]] = {}
        self._rejected = 0
        if path is not None:
            drop_unterminated_tail(path, "conclusions log")

    @classmethod
    def restore(
        cls,
        path: Path,
        attempts: Iterable[Attempt],
        problem: str,
        op_family: str = "",
        max_claim_chars: int = 280,
    ) -> "ConclusionBoard":
        """The board of a run dir: replay the event log, then observe the recorded attempts (so
        a retraction that a crash kept out of the log is made now).

        Raises:
            TrackingError: a complete line of the log is not a valid event.
        """
        events = read_conclusion_events(path)
        board = cls(problem, op_family, path, max_claim_chars)
        for event in events:
            board._apply(event)
        for attempt in attempts:
            board.observe(attempt)
        return board

    def live(self, limit: int | None = None) -> tuple[Conclusion, ...]:
        """Conclusions not retracted, oldest first; the most recent `limit` if given."""
        with self._lock:
            found = tuple(c for c in self._conclusions.values() if not c.retracted)
        if limit is None:
            return found
        return found[-limit:] if limit > 0 else ()

    def conclusions(self) -> tuple[Conclusion, ...]:
        """Every conclusion published, retracted ones included, oldest first."""
        with self._lock:
            return tuple(self._conclusions.values())

    @property
    def rejected(self) -> int:
        """Drafts rejected so far."""
        return self._rejected

    def observe(self, attempt: Attempt) -> list[Conclusion]:
        """Record a judged attempt (it becomes citable) and retract what it discredits.

        Returns:
            The conclusions retracted because of this attempt.
        """
        with self._lock:
            self._record[attempt.index] = attempt
            for discredit in rerun_discredits(attempt):
                self._discredited.setdefault(discredit.proposal_id, discredit.reason)
            retimed = retimed_latency(attempt)
            if retimed is not None:
                self._retimed.setdefault(retimed[0], []).append(retimed[1])
            reasons = {
                c.id: why
                for c in self._conclusions.values()
                if not c.retracted and (why := self._distrust(c.evidence))
            }
            return [self._retract_locked(cid, reason) for cid, reason in reasons.items()]

    def _distrust(self, evidence: list[Evidence]) -> str:
        """Why evidence is no longer trusted (a discredited proposal, or a gain its re-timing
        did not reproduce); '' when it still stands."""
        for item in evidence:
            if item.proposal_id in self._discredited:
                why = self._discredited[item.proposal_id]
                return f"evidence attempt {item.attempt_index} ({item.proposal_id}): {why}"
            cited = self._record.get(item.attempt_index)
            retimed = self._retimed.get(item.proposal_id)
            if cited is not None and retimed:
                lost = lost_gain(item, cited, median(retimed))
                if lost:
                    return lost
        return ""

    def publish(self, agent: str, strategy: str, draft: ConclusionDraft) -> Conclusion:
        """Validate a draft and publish it.

        Raises:
            ConclusionRejected: the claim holds code or is too long or a duplicate, the scope is
                not this problem's op family, or the evidence does not match the record.
        """
        claim = normalize_claim(draft.claim)
        with self._lock:
            reasons = self._draft_problems(claim, draft)
            if reasons:
                self._rejected += 1
                self._append(
                    ConclusionEvent(
                        kind="rejected",
                        at=utc_now(),
                        agent=agent,
                        reason="; ".join(reasons),
                        claim=draft.claim[:600],
                    )
                )
                raise ConclusionRejected(reasons)
            conclusion = Conclusion(
                id=f"c-{len(self._conclusions) + 1}",
                agent=agent,
                strategy=strategy,
                claim=claim,
                scope=ConclusionScope(problem=self.problem, op_family=draft.op_family),
                evidence=list(draft.evidence),
                confidence=draft.confidence,
                published_at=utc_now(),
            )
            self._append(
                ConclusionEvent(
                    kind="published", at=conclusion.published_at, agent=agent, conclusion=conclusion
                )
            )
            self._conclusions[conclusion.id] = conclusion
        logger.info("conclusion %s by %s: %s", conclusion.id, agent, claim)
        return conclusion

    def _draft_problems(self, claim: str, draft: ConclusionDraft) -> list[str]:
        problems: list[str] = []
        if not claim:
            problems.append("empty claim")
        if len(claim) > self.max_claim_chars:
            problems.append(f"claim of {len(claim)} characters (at most {self.max_claim_chars})")
        problems.extend(f"code in the claim: {why}" for why in code_reasons(draft.claim))
        if draft.op_family and draft.op_family != self.op_family:
            problems.append(
                f"scope op_family {draft.op_family!r} is not this problem's "
                f"({self.op_family!r}); leave it empty for a finding about this problem only"
            )
        key = " ".join(claim.lower().split())
        twin = next(
            (
                c
                for c in self._conclusions.values()
                if not c.retracted and " ".join(c.claim.lower().split()) == key
            ),
            None,
        )
        if twin is not None:
            problems.append(f"already on the board as {twin.id}")
        found = evidence_problems(draft.evidence, self._record, self._discredited, self.problem)
        problems.extend(found)
        distrust = "" if found else self._distrust(draft.evidence)
        if distrust:
            problems.append(distrust)
        return problems

    def retract(self, conclusion_id: str, reason: str) -> Conclusion:
        """Retract a conclusion by hand (it disappears from `live`).

        Raises:
            KeyError: no such conclusion.
        """
        with self._lock:
            return self._retract_locked(conclusion_id, reason)

    def _retract_locked(self, conclusion_id: str, reason: str) -> Conclusion:
        current = self._conclusions[conclusion_id]
        if current.retracted:
            return current
        self._append(
            ConclusionEvent(
                kind="retracted",
                at=utc_now(),
                agent=current.agent,
                conclusion_id=conclusion_id,
                reason=reason,
            )
        )
        retracted = current.model_copy(update={"retracted": True, "retraction_reason": reason})
        self._conclusions[conclusion_id] = retracted
        logger.info("conclusion %s retracted: %s", conclusion_id, reason)
        return retracted

    def _apply(self, event: ConclusionEvent) -> None:
        """Replay one logged event (no write)."""
        if event.kind == "published" and event.conclusion is not None:
            self._conclusions[event.conclusion.id] = event.conclusion
        elif event.kind == "retracted" and event.conclusion_id in self._conclusions:
            current = self._conclusions[event.conclusion_id]
            self._conclusions[event.conclusion_id] = current.model_copy(
                update={"retracted": True, "retraction_reason": event.reason}
            )
        elif event.kind == "rejected":
            self._rejected += 1

    def _append(self, event: ConclusionEvent) -> None:
        """Write one event line, flushed and fsync'd, before the board's state changes."""
        if self.path is None:
            return
        append_record(self.path, event, "a conclusion event")


def read_conclusion_events(path: Path) -> list[ConclusionEvent]:
    """Every event of a conclusions.jsonl, in order ([] when the file does not exist); a
    truncated last line (a crash mid-write) is skipped.

    Raises:
        TrackingError: the file cannot be read, or a complete line is not a valid event.
    """
    try:
        return read_records(path, ConclusionEvent, "conclusion event")
    except FileNotFoundError:
        return []
