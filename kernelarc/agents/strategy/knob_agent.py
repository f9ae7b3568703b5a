"""The offline strategy agent: local search over the knobs one strategy owns, coordinated with
the team through conclusions and drafts.

Place in the flow: the offline agents of `kinds.py` subclass `KnobStrategyAgent`. Each
`propose` picks an anchor and moves one owned knob away from it:

1. a draft order in the context starts a fresh line: around the global best's setting when the
   draft is from a peer's attempt in the same knob space, else from a new seeded point;
2. otherwise the anchor is the agent's own best passing attempt in its knob space (coordinate
   descent around the incumbent), then its other passing attempts, then any owned setting;
3. with no attempt yet it starts from the space's default with the values conclusions found
   better, and tries that first.

Moves are ranked by the live conclusions (values found better first, worse later, failing last),
then by distance from the anchor's value. After its attempt is judged, `conclude` publishes what
the move showed: `KNOB a over b: +x%` when it changed the speedup by `min_effect` or more, or
`KNOB v fails (STATUS)` when a move from a passing setting broke the kernel.
"""

import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernelarc.agents.context import AgentContext
from kernelarc.agents.knob_findings import (
    KnobFindings,
    compare_draft,
    failure_draft,
    read_findings,
)
from kernelarc.agents.knob_search import (
    Knobs,
    KnobSpace,
    coordinate_moves,
    owned_settings,
    setting_key,
)
from kernelarc.agents.proposals import stable_hash
from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt, EvalStatus, Proposal
from kernelarc.schema.coordination import ConclusionDraft, Evidence

logger = logging.getLogger(__name__)

#: Failures a knob value can be blamed for (not the guard's or the sandbox's verdicts).
_KERNEL_FAILURES = frozenset(
    {
        EvalStatus.COMPILE_ERROR,
        EvalStatus.RUNTIME_ERROR,
        EvalStatus.INCORRECT_SHAPE,
        EvalStatus.INCORRECT_NUMERICAL,
        EvalStatus.INCORRECT_DTYPE,
        EvalStatus.TIMEOUT,
    }
)


def short_reason(reason: str, limit: int = 160) -> str:
    """The first clause of a reason (up to the first `; `), cut to `limit` characters."""
    first = reason.split("; ", 1)[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


@dataclass(frozen=True)
class _Move:
    """One candidate setting and where it came from."""

    setting: Knobs
    parent: Attempt | None
    """The attempt it moved away from (None: a start point or a fresh line)."""
    knob: str | None
    """The one knob changed from `parent` (or from the default when there is no parent)."""


class KnobStrategyAgent:
    """Base of the offline strategy agents; subclasses give the space and the rendering."""

    strategy = ""
    """The strategy this agent owns (its knobs in the space)."""
    min_effect = 0.05
    """Smallest relative speedup change worth a conclusion."""

    def __init__(self, name: str = "", seed: int = 0) -> None:
        self.name = name or self.strategy
        self.seed = seed
        self.model: str | None = None
        self._issued: set[str] = set()
        self._moves: dict[str, _Move] = {}
        self._spaces: dict[tuple[str, str], tuple[KnobSpace, Any] | str] = {}

    # -- what subclasses provide -------------------------------------------------------------
    def space_for(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        """The knob space for a problem and the data rendering needs, or why none applies."""
        raise NotImplementedError

    def render(self, problem: Problem, extra: Any, space: KnobSpace, setting: Knobs) -> Proposal:
        """The proposal of one setting (knobs recorded with `space`)."""
        raise NotImplementedError

    def owned(self, space: KnobSpace) -> tuple[str, ...]:
        """The knobs this agent searches."""
        return space.owned_by(self.strategy)

    # -- the Agent protocol -------------------------------------------------------------------
    def propose(self, ctx: AgentContext) -> Proposal | None:
        """The best-ranked new setting (see the module docstring), or None when none is left."""
        found = self._space(ctx.problem, ctx.device)
        if isinstance(found, str):
            return None
        space, extra = found
        findings = read_findings(ctx.conclusions)
        # Drawn afresh from the seed and the agent's history, never carried between calls: a
        # resumed campaign's agent makes the same next move as one that was never stopped.
        rng = random.Random(self.seed + stable_hash(self.name) + 7919 * len(ctx.attempts))
        skip = set(ctx.seen_ids) | self._issued | {a.proposal.id for a in ctx.attempts}
        tried: set[tuple[tuple[str, str], ...]] = set()
        for move in self._candidates(ctx, space, findings, rng):
            key = setting_key(move.setting)
            if key in tried:
                continue
            tried.add(key)
            proposal = self.render(ctx.problem, extra, space, move.setting)
            if proposal.id in skip:
                continue
            self._issued.add(proposal.id)
            self._moves[proposal.id] = move
            parent_id = move.parent.proposal.id if move.parent is not None else None
            return proposal.model_copy(update={"parent_id": parent_id})
        return None

    def conclude(self, attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        """What this attempt's move showed, as at most one draft for the shared memory."""
        move = self._moves.get(attempt.proposal.id)
        if move is None or move.knob is None:
            return []
        problem = ctx.problem.name
        parent = move.parent
        if parent is None:
            return self._over_reference(move.knob, attempt, problem)
        if parent.status != EvalStatus.PASSED or parent.speedup is None:
            return []
        if attempt.status in _KERNEL_FAILURES:
            return [failure_draft(move.knob, attempt, problem)]
        if attempt.status != EvalStatus.PASSED or attempt.speedup is None:
            return []
        delta = attempt.speedup / parent.speedup - 1.0
        if abs(delta) < self.min_effect:
            return []
        faster, slower = (attempt, parent) if delta > 0 else (parent, attempt)
        confidence = 0.8 if abs(delta) >= 0.25 else 0.6
        return [compare_draft(move.knob, faster, slower, problem, confidence)]

    # -- search -------------------------------------------------------------------------------
    def _space(self, problem: Problem, device: str) -> tuple[KnobSpace, Any] | str:
        key = (problem.name, device)
        if key not in self._spaces:
            self._spaces[key] = self.space_for(problem, device)
            if isinstance(self._spaces[key], str):
                logger.info("%s does not apply to %s: %s", self.name, key[0], self._spaces[key])
        return self._spaces[key]

    def idle_reason(self) -> str | None:
        """Why this agent does not apply to the problem it was last asked about, as one short
        line (the full reason is in the log), or None when it applies."""
        reasons = [r for r in self._spaces.values() if isinstance(r, str)]
        if not reasons:
            return None
        return short_reason(reasons[-1])

    def in_space(self, space: KnobSpace, attempt: Attempt) -> Knobs | None:
        """The setting of an attempt made in this knob space (by any agent), else None."""
        knobs = attempt.proposal.knobs
        family = knobs.get("space") or f"triton/{knobs.get('template', '')}"
        return space.settings_of(knobs) if family == space.family else None

    def _candidates(
        self, ctx: AgentContext, space: KnobSpace, findings: KnobFindings, rng: random.Random
    ) -> Iterator[_Move]:
        owned = self.owned(space)
        if ctx.draft is not None:
            yield from self._draft_moves(ctx, space, owned, findings, rng)
        passing = sorted(
            (a for a in ctx.attempts if a.status == EvalStatus.PASSED and a.speedup is not None),
            key=lambda a: -(a.speedup or 0.0),
        )
        anchors = [(a, s) for a in passing if (s := self.in_space(space, a)) is not None]
        if not anchors:
            start = self._start(space, owned, findings)
            if space.is_valid(start):
                yield _Move(start, None, None)
            for knob, setting in coordinate_moves(space, start, owned, findings.rank, rng):
                yield _Move(setting, None, knob)
            for setting in owned_settings(space, start, owned, rng):
                yield _Move(setting, None, None)
            return
        for parent, setting in anchors:
            for knob, moved in coordinate_moves(space, setting, owned, findings.rank, rng):
                yield _Move(moved, parent, knob)
        best, best_setting = anchors[0]
        for setting in owned_settings(space, best_setting, owned, rng):
            yield _Move(setting, best, None)

    def _draft_moves(
        self,
        ctx: AgentContext,
        space: KnobSpace,
        owned: tuple[str, ...],
        findings: KnobFindings,
        rng: random.Random,
    ) -> Iterator[_Move]:
        assert ctx.draft is not None
        base = ctx.draft.base
        base_setting = self.in_space(space, base) if base is not None else None
        if base is not None and base_setting is not None:
            for knob, moved in coordinate_moves(space, base_setting, owned, findings.rank, rng):
                yield _Move(moved, base, knob)
            return
        # A fresh line: a new seeded point of the owned knobs, the others at the default.
        for setting in owned_settings(space, dict(space.default), owned, rng):
            yield _Move(setting, None, None)

    def _start(self, space: KnobSpace, owned: tuple[str, ...], findings: KnobFindings) -> Knobs:
        """The default setting with every value the conclusions recommend that keeps it valid."""
        start = dict(space.default)
        for name in space.options:
            for value in space.options[name]:
                candidate = start | {name: value}
                if str(value) in findings.recommended(name) and space.is_valid(candidate):
                    start = candidate
                    break
        return start

    def _over_reference(self, knob: str, attempt: Attempt, problem: str) -> list[ConclusionDraft]:
        """`KNOB v over reference: +x%` for a first move away from the reference as-is."""
        if attempt.status in _KERNEL_FAILURES:
            return [failure_draft(knob, attempt, problem)]
        speedup = attempt.speedup
        if attempt.status != EvalStatus.PASSED or speedup is None:
            return []
        if abs(speedup - 1.0) < self.min_effect:
            return []
        claim = (
            f"{knob} {attempt.proposal.knobs[knob]} over reference: {speedup - 1.0:+.0%} on "
            f"{problem} (attempt {attempt.index})"
        )
        evidence = [
            Evidence(attempt_index=attempt.index, proposal_id=attempt.proposal.id, value=speedup)
        ]
        return [ConclusionDraft(claim=claim, evidence=evidence, confidence=0.6)]
