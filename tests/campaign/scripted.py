"""Scripted agents for campaign tests: fixed candidates, every context they saw kept for asserts.

A test double of the Agent protocol (the offline and LLM agents are tested on their own); the
candidates are real sources evaluated in real LocalSandbox processes on the tiny `vector_add`
sample problem. (A plain module, not conftest.py: several test dirs have a conftest.)
"""

import threading
from collections.abc import Callable
from pathlib import Path

from kernelarc.agents import AgentContext
from kernelarc.agents.proposals import build_proposal
from kernelarc.config import (
    BudgetConfig,
    CampaignConfig,
    CoordinationConfig,
    EvalConfig,
    ExecutorConfig,
    GuardConfig,
    TrackingConfig,
)
from kernelarc.schema import Attempt, Language, Proposal
from kernelarc.schema.coordination import ConclusionDraft

PROBLEM_DIR = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"
DEFINITION = "vector_add_f32"


def adder(tag: str, *, sleep_s: float = 0.0, fail_if: Path | None = None) -> str:
    """A correct `x + y` (distinct per tag); optionally slow, or wrong once `fail_if` exists."""
    lines = ["import torch"]
    if sleep_s:
        lines.append("import time")
    if fail_if is not None:
        lines.append("import os.path")
    lines += ["", "", "def run(x, y):", f"    # candidate {tag}"]
    if sleep_s:
        lines.append(f"    time.sleep({sleep_s})")
    if fail_if is not None:
        lines += [f"    if os.path.exists({str(fail_if)!r}):", "        return x - y"]
    lines.append("    return x + y")
    return "\n".join(lines) + "\n"


Conclude = Callable[[Attempt, AgentContext], list[ConclusionDraft]]


class ScriptedAgent:
    """Proposes `sources` in order, then None; records every context and conclude call."""

    def __init__(
        self,
        name: str,
        sources: list[str],
        conclude: Conclude | None = None,
        gate: threading.Event | None = None,
        fail_on_call: int | None = None,
    ) -> None:
        self.name = name
        self.strategy = "scripted"
        self.contexts: list[AgentContext] = []
        self.concluded: list[tuple[int, AgentContext]] = []
        self._sources = list(sources)
        self._conclude = conclude
        self._gate = gate
        self._fail_on_call = fail_on_call

    def propose(self, ctx: AgentContext) -> Proposal | None:
        self.contexts.append(ctx)
        if self._fail_on_call == len(self.contexts):
            msg = "scripted agent bug"
            raise RuntimeError(msg)
        if self._gate is not None and len(self.contexts) == 1:
            assert self._gate.wait(timeout=300), "gate never opened"
        if not self._sources:
            return None
        source = self._sources.pop(0)
        return build_proposal(
            problem=DEFINITION,
            agent=self.name,
            strategy=self.strategy,
            language=Language.PYTORCH,
            source=source,
            tag=f"c{len(self.contexts)}",
            knobs={},
            rationale="scripted",
        )

    def conclude(self, attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        self.concluded.append((attempt.index, ctx))
        return self._conclude(attempt, ctx) if self._conclude is not None else []


def campaign_config(
    candidates: int,
    coordination: CoordinationConfig,
    *,
    guard: bool = False,
    max_parallel: int = 2,
    correctness_pool: bool = False,
) -> CampaignConfig:
    """A tiny CPU campaign on vector_add, tracking off (guard off unless asked: fewer runs).

    Without `correctness_pool` the executor has timed slots only, so a candidate is one sandbox
    run, not a screen and then a timed run, and no correctness slot keeps a spare runner: the
    screen is the executor's business (tests/executor/), not what these campaigns test.
    """
    return CampaignConfig(
        name="coordination-test",
        problem=str(PROBLEM_DIR),
        device="cpu",
        budget=BudgetConfig(candidates=candidates, max_parallel=max_parallel),
        eval=EvalConfig(correctness_rounds=1, warmup=0, iterations=2),
        tracking=TrackingConfig(kind="none"),
        guard=GuardConfig(enabled=guard, confirm=guard),
        coordination=coordination,
        executor=ExecutorConfig(correctness_slots=1 if correctness_pool else 0),
    )
