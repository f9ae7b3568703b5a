"""Knob findings: how offline agents phrase conclusions about knob values, and read them back.

Place in the flow: an offline strategy agent's `conclude` hook turns a measured comparison into a
`ConclusionDraft` with `compare_draft` or `failure_draft`; every agent's `propose` reads the
live conclusions in its context with `read_findings` to rank the values it tries. Claims use one
fixed phrasing, e.g. `BLOCK_H 2048 over 1024: +12% on rmsnorm (attempts 3 vs 5)` or
`NUM_WARPS 16 fails (COMPILE_ERROR) on rmsnorm (attempt 7)`; conclusions in other words (an
LLM's) are shown to agents but carry no knob preference for offline ones. Pure.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelarc.agents.knob_search import KnobValue
from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Conclusion, ConclusionDraft, Evidence

_COMPARE = re.compile(r"^(?P<knob>[A-Za-z_]\w*) (?P<better>\S+) over (?P<worse>\S+): [+-]?\d+%")
_FAILURE = re.compile(r"^(?P<knob>[A-Za-z_]\w*) (?P<value>\S+) fails \((?P<status>\w+)\)")


@dataclass
class KnobFindings:
    """What the live conclusions say about knob values (values as text)."""

    better: dict[str, set[str]] = field(default_factory=dict)
    """Knob -> values some conclusion found better than another value."""
    worse: dict[str, set[str]] = field(default_factory=dict)
    """Knob -> values some conclusion found worse (and no conclusion found better)."""
    failing: dict[str, set[str]] = field(default_factory=dict)
    """Knob -> values some conclusion saw fail."""
    used: list[str] = field(default_factory=list)
    """Ids of the conclusions that said anything about knobs."""

    def rank(self, knob: str, value: KnobValue) -> int:
        """0 for a value found better, 2 for one found worse, 3 for one seen failing, else 1."""
        text = str(value)
        if text in self.failing.get(knob, set()):
            return 3
        if text in self.better.get(knob, set()):
            return 0
        if text in self.worse.get(knob, set()):
            return 2
        return 1

    def recommended(self, knob: str) -> set[str]:
        """Values of a knob found better than some other value."""
        return self.better.get(knob, set())


def read_findings(conclusions: Iterable[Conclusion]) -> KnobFindings:
    """Knob preferences from the conclusions phrased as knob findings."""
    findings = KnobFindings()
    for conclusion in conclusions:
        compare = _COMPARE.match(conclusion.claim)
        failure = _FAILURE.match(conclusion.claim)
        if compare:
            knob = compare["knob"]
            findings.better.setdefault(knob, set()).add(compare["better"])
            findings.worse.setdefault(knob, set()).add(compare["worse"])
        elif failure:
            findings.failing.setdefault(failure["knob"], set()).add(failure["value"])
        else:
            continue
        findings.used.append(conclusion.id)
    for knob, values in findings.worse.items():
        values -= findings.better.get(knob, set())
    return findings


def compare_draft(
    knob: str, faster: Attempt, slower: Attempt, problem: str, confidence: float
) -> ConclusionDraft:
    """`<knob> <a> over <b>: +x% on <problem> (attempts i vs j)`, citing both speedups."""
    assert faster.speedup is not None and slower.speedup is not None
    delta = faster.speedup / slower.speedup - 1.0
    claim = (
        f"{knob} {faster.proposal.knobs[knob]} over {slower.proposal.knobs[knob]}: "
        f"{delta:+.0%} on {problem} (attempts {faster.index} vs {slower.index})"
    )
    evidence = [
        Evidence(
            attempt_index=faster.index,
            proposal_id=faster.proposal.id,
            value=faster.speedup,
            baseline=slower.speedup,
            delta=delta,
        ),
        Evidence(attempt_index=slower.index, proposal_id=slower.proposal.id, value=slower.speedup),
    ]
    return ConclusionDraft(claim=claim, evidence=evidence, confidence=confidence)


def failure_draft(knob: str, failed: Attempt, problem: str) -> ConclusionDraft:
    """`<knob> <v> fails (<STATUS>) on <problem> (attempt i)`, citing the status."""
    claim = (
        f"{knob} {failed.proposal.knobs[knob]} fails ({failed.status}) on {problem} "
        f"(attempt {failed.index})"
    )
    evidence = [
        Evidence(attempt_index=failed.index, proposal_id=failed.proposal.id, metric="status")
    ]
    return ConclusionDraft(claim=claim, evidence=evidence, confidence=0.7)
