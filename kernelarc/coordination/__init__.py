"""Coordination between the agents of a campaign: the four mechanisms of docs/coordination.md.

Place in the flow: `campaign/loop.py` composes these (each behind a `coordination.*` switch):
`ConclusionBoard` (conclusions-only shared memory, `memory.py`), `build_peer_snapshots`
(read-only cross-agent state, `peers.py`), `PlateauTracker` and `draft_order` (plateau-triggered
drafting, `plateau.py`). The fourth mechanism, the benchmark guard, lives in `kernelarc/guard/`.
"""

from kernelarc.coordination.memory import (
    ConclusionBoard,
    ConclusionRejected,
    read_conclusion_events,
)
from kernelarc.coordination.no_code import code_reasons
from kernelarc.coordination.peers import best_passing, build_peer_snapshots, frozen_copy
from kernelarc.coordination.plateau import PlateauTracker, draft_order
from kernelarc.rundir import CONCLUSIONS_FILE

__all__ = [
    "CONCLUSIONS_FILE",
    "ConclusionBoard",
    "ConclusionRejected",
    "PlateauTracker",
    "best_passing",
    "build_peer_snapshots",
    "code_reasons",
    "draft_order",
    "frozen_copy",
    "read_conclusion_events",
]
