"""Per-agent figures of the live progress view: attempts, best, drafts, tokens and cost."""

from kernelarc.agents.proposals import build_proposal
from kernelarc.campaign.team_stats import team_stats
from kernelarc.schema import Attempt, Language, Verdict
from kernelarc.schema.coordination import ChatMessage, LLMExchange


def _attempt(index: int, agent: str, speedup: float | None, **proposal: object) -> Attempt:
    base = build_proposal(
        problem="p",
        agent=agent,
        strategy=f"{agent}-strategy",
        language=Language.PYTORCH,
        source=f"def run(x):\n    return x  # {index}\n",
        tag=str(index),
        knobs={},
        rationale="",
    )
    return Attempt(
        index=index,
        problem="p",
        proposal=base.model_copy(update=proposal),
        status="PASSED" if speedup else "COMPILE_ERROR",
        traces=[],
        speedup=speedup,
        verdict=Verdict.CORRECT if speedup else Verdict.FAILED,
        started_at="t",
        finished_at="t",
    )


def _exchange(prompt: int, completion: int, cost: float) -> LLMExchange:
    return LLMExchange(
        model="m",
        messages=[ChatMessage(role="user", content="q")],
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
    )


def test_team_stats() -> None:
    attempts = [
        _attempt(0, "llm-tiling", 1.2, model="m", llm=[_exchange(100, 50, 0.01)]),
        _attempt(1, "tiling", None),
        _attempt(
            2,
            "llm-tiling",
            1.5,
            model="m",
            draft=True,
            draft_source="reference",
            llm=[_exchange(10, 5, 0.001), _exchange(20, 5, 0.002)],
        ),
        _attempt(3, "scripted", 0.9),
    ]
    rows = team_stats(attempts, [("tiling", "tiling"), ("llm-tiling", "tiling"), ("idle", "x")])
    assert [r.name for r in rows] == ["tiling", "llm-tiling", "idle", "scripted"]
    tiling, llm, idle, scripted = rows
    assert (tiling.attempts, tiling.passed, tiling.best_speedup) == (1, 0, None)
    assert (llm.attempts, llm.passed, llm.best_speedup, llm.drafts) == (2, 2, 1.5, 1)
    assert (llm.model, llm.tokens) == ("m", 190) and abs(llm.cost_usd - 0.013) < 1e-12
    assert (idle.attempts, idle.tokens, idle.model) == (0, 0, "")
    assert scripted.strategy == "scripted-strategy" and scripted.best_speedup == 0.9


def test_a_best_only_counts_measurements_the_guard_accepted() -> None:
    """Issue 17: the per-agent table showed 189x from a CHALLENGER the re-timing rejected,
    while the campaign's best was 1.16x."""
    accepted = _attempt(0, "compiler", 1.16).model_copy(update={"verdict": Verdict.NEW_BEST})
    rejected = _attempt(1, "compiler", 189.0).model_copy(update={"verdict": Verdict.CHALLENGER})
    (row,) = team_stats([accepted, rejected], [("compiler", "compiler")])
    assert (row.passed, row.best_speedup) == (2, 1.16)
