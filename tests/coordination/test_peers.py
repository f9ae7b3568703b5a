"""Read-only peer state: snapshots cannot change the campaign's record, by construction."""

import dataclasses

import pytest
from pydantic import ValidationError
from records import attempt

from kernelarc.coordination import build_peer_snapshots
from kernelarc.schema import SourceFile

TEAM = [("tiling", "tiling"), ("memory", "memory"), ("compiler", "compiler")]


def _campaign() -> list:
    return [
        attempt(0, agent="tiling", speedup=1.1),
        attempt(1, agent="memory", speedup=1.4),
        attempt(2, agent="memory", status="COMPILE_ERROR", speedup=None),
        attempt(3, agent="memory", speedup=1.2),
    ]


def test_snapshots_show_each_peers_incumbent_best_and_trend() -> None:
    attempts = _campaign()
    peers = build_peer_snapshots(TEAM, attempts, me="tiling")
    assert [p.agent for p in peers] == ["memory", "compiler"], "the agent itself is left out"
    memory, compiler = peers
    assert memory.incumbent == attempts[1] and memory.best_speedup == 1.4
    assert memory.attempts == 3 and memory.recent_speedups == (1.4, None, 1.2)
    assert compiler.incumbent is None and compiler.attempts == 0 and compiler.recent_speedups == ()


def test_snapshots_cannot_be_changed_and_share_nothing_with_the_record() -> None:
    attempts = _campaign()
    before = [a.model_dump_json() for a in attempts]
    memory = build_peer_snapshots(TEAM, attempts, me="tiling")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        memory.best_speedup = 99.0  # type: ignore[misc]
    assert memory.incumbent is not None
    with pytest.raises(ValidationError):
        memory.incumbent.speedup = 99.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        memory.incumbent.proposal.solution.sources[0].content = "stolen"  # type: ignore[misc]
    # pydantic keeps lists as lists: mutating them must only touch the copy.
    memory.incumbent.proposal.solution.sources.append(SourceFile(path="x.py", content="y"))
    memory.incumbent.proposal.knobs["BLOCK_H"] = 1
    memory.incumbent.traces.clear()
    assert memory.incumbent is not attempts[1]
    assert [a.model_dump_json() for a in attempts] == before
    fresh = build_peer_snapshots(TEAM, attempts, me="tiling")[0]
    assert fresh.incumbent == attempts[1], "a later snapshot shows the record, not the mutation"
    with pytest.raises(AttributeError):
        fresh.recent_speedups.append(1.0)  # type: ignore[attr-defined]
