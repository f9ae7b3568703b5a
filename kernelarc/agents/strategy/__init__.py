"""The offline strategy agents: one agent per optimisation strategy, no model involved.

Place in the flow: `make_team` builds these for the offline kinds of `agents.team`
(`AGENT_KINDS`). Six search a knob space their strategy owns (`knob_agent.KnobStrategyAgent`,
subclassed in `kinds.py`): four over the Triton kernels of `kernelarc.agents.triton`, two over
library and precision variants of the reference (`torch_variants.py`). The seventh,
`compiler_agent.CompilerAgent`, proposes the reference and torch.compile variants of it. They only
write source text: nothing here imports torch or triton.
"""

from kernelarc.agents.strategy.compiler_agent import CompilerAgent
from kernelarc.agents.strategy.kinds import (
    FusionAgent,
    LibraryAgent,
    MemoryAgent,
    PipeliningAgent,
    PrecisionAgent,
    TilingAgent,
)
from kernelarc.agents.strategy.knob_agent import KnobStrategyAgent

__all__ = [
    "CompilerAgent",
    "FusionAgent",
    "KnobStrategyAgent",
    "LibraryAgent",
    "MemoryAgent",
    "PipeliningAgent",
    "PrecisionAgent",
    "TilingAgent",
]
