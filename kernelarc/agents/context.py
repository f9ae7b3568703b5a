"""What an agent sees when asked for its next proposal.

Place in the flow: the campaign loop builds one `AgentContext` per `propose` call from the loaded
problem, the device and the attempts so far, and passes it to `Agent.propose` (see __init__.py).
"""

from dataclasses import dataclass, field
from typing import Literal

from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt


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
