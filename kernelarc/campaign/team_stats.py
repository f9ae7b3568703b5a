"""Per-agent figures of a running campaign, for the live progress view and the summary.

Place in the flow: `cli/campaign_view.py` calls `team_stats` from the loop's progress callback
with the attempts recorded so far and renders them with rich. Pure: attempts in, figures out. Tokens
and cost come from the LLM exchanges recorded on each proposal (zero for offline agents).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from kernelarc.guard.verdict import measurement_accepted
from kernelarc.schema import Attempt, EvalStatus


@dataclass(frozen=True)
class AgentStats:
    """One agent's figures so far."""

    name: str
    """Agent name."""
    strategy: str
    """Its strategy."""
    model: str
    """LLM model(s) it used, or "" for an offline agent."""
    attempts: int
    """Attempts recorded."""
    passed: int
    """Of those, PASSED."""
    best_speedup: float | None
    """Best speedup of its attempts whose measurement the guard accepted (a CHALLENGER's
    unreproduced number never shows here)."""
    drafts: int
    """Drafted proposals."""
    tokens: int
    """Prompt plus completion tokens of its LLM exchanges."""
    cost_usd: float
    """Cost of those exchanges."""


def team_stats(
    attempts: Sequence[Attempt], team: Sequence[tuple[str, str]] = ()
) -> list[AgentStats]:
    """Figures per agent: every (name, strategy) of `team` in order (zeros until it records an
    attempt), then any other agent found in `attempts`, in order of first attempt."""
    order = [name for name, _ in team]
    strategies = dict(team)
    for attempt in attempts:
        if attempt.proposal.agent not in strategies:
            order.append(attempt.proposal.agent)
            strategies[attempt.proposal.agent] = attempt.proposal.strategy
    return [_stats(name, strategies[name], attempts) for name in order]


def _stats(name: str, strategy: str, attempts: Sequence[Attempt]) -> AgentStats:
    own = [a for a in attempts if a.proposal.agent == name]
    passed = [a for a in own if a.status == EvalStatus.PASSED]
    speedups = [a.speedup for a in passed if a.speedup is not None and measurement_accepted(a)]
    exchanges = [x for a in own for x in a.proposal.llm]
    models = sorted({a.proposal.model for a in own if a.proposal.model})
    return AgentStats(
        name=name,
        strategy=strategy,
        model=", ".join(models),
        attempts=len(own),
        passed=len(passed),
        best_speedup=max(speedups) if speedups else None,
        drafts=sum(1 for a in own if a.proposal.draft),
        tokens=sum(x.prompt_tokens + x.completion_tokens for x in exchanges),
        cost_usd=sum(x.cost_usd for x in exchanges),
    )
