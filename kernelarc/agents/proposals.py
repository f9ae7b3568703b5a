"""Packaging of an agent's kernel source into a SOL-ExecBench Solution and a KernelArc Proposal.

Place in the flow: every offline agent renders a `kernel.py` text and calls `build_proposal`; the
proposal's id (a content hash of the solution) is what the campaign dedupes on.
"""

import hashlib

from kernelarc.schema import (
    BuildSpec,
    Language,
    Proposal,
    Solution,
    SourceFile,
    TargetHardware,
    proposal_id_for,
)

ENTRY_FILE = "kernel.py"
ENTRY_POINT = f"{ENTRY_FILE}::run"


def stable_hash(text: str) -> int:
    """A 32-bit hash of a string that is the same in every process (unlike the salted hash())."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def build_proposal(
    *,
    problem: str,
    agent: str,
    strategy: str,
    language: Language,
    source: str,
    tag: str,
    knobs: dict[str, str | int | float | bool],
    rationale: str,
) -> Proposal:
    """A return-style (non-DPS) single-file solution `kernel.py::run` wrapped in a Proposal."""
    solution = Solution(
        name=f"{problem}-{agent}-{tag}",
        definition=problem,
        author=agent,
        spec=BuildSpec(
            languages=[language],
            target_hardware=[TargetHardware.LOCAL],
            entry_point=ENTRY_POINT,
            destination_passing_style=False,
        ),
        sources=[SourceFile(path=ENTRY_FILE, content=source)],
        description=rationale,
    )
    return Proposal(
        id=proposal_id_for(solution),
        agent=agent,
        strategy=strategy,
        solution=solution,
        knobs=knobs,
        rationale=rationale,
    )
