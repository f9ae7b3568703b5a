"""What an agent sees when asked for its next proposal.

Place in the flow: the campaign loop builds one `AgentContext` per `propose` call from the loaded
problem, the device, the agent's own attempts and — depending on the coordination switches — the
shared conclusions, read-only snapshots of its peers, and a drafting order when the agent has
plateaued. Everything in it is immutable: an agent can read peer state, never change it.
"""

from dataclasses import dataclass, field
from typing import Literal

from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Conclusion


@dataclass(frozen=True)
class PeerSnapshot:
    """An immutable view of one peer agent at the moment the context was built."""

    agent: str
    """Peer name."""
    strategy: str
    """Peer strategy."""
    incumbent: Attempt | None
    """The peer's best passing attempt (its code and traces), if any."""
    best_speedup: float | None
    """Its best speedup over the reference."""
    attempts: int
    """How many attempts it has made."""
    recent_speedups: tuple[float | None, ...] = ()
    """Speedups of its last few attempts, oldest first (None: did not pass): the trend."""


@dataclass(frozen=True)
class DraftOrder:
    """Plateau-triggered drafting: start a fresh line under the agent's own strategy."""

    source: Literal["global_best", "reference"]
    """What to start from."""
    base: Attempt | None
    """The attempt to start from (the global best), or None for the reference."""
    reason: str
    """Why drafting fired (e.g. `no gain beyond 2% in 4 attempts`)."""


@dataclass(frozen=True)
class AgentContext:
    """Read-only inputs of one `propose` call."""

    problem: Problem
    """The problem being optimised."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where candidates will run (`cpu` means Triton's interpreter)."""
    attempts: tuple[Attempt, ...] = ()
    """This agent's own past attempts, in completion order."""
    seen_ids: frozenset[str] = field(default_factory=frozenset)
    """Proposal ids already evaluated (or in flight) anywhere in the campaign; skip them."""
    gpu: str = ""
    """Target GPU name (e.g. `NVIDIA H200`); "" on CPU or before the first trace."""
    incumbent: Attempt | None = None
    """This agent's own best passing attempt, if any."""
    conclusions: tuple[Conclusion, ...] = ()
    """Live (not retracted) shared conclusions; always empty with shared memory off."""
    peers: tuple[PeerSnapshot, ...] = ()
    """Snapshots of the other agents; always empty with peer state off."""
    draft: DraftOrder | None = None
    """Set when the agent has plateaued (drafting on): its next proposal starts a fresh line."""
