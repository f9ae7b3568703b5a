"""make_team: kinds, names, specs and errors."""

import pytest

from kernelarc.agents import (
    AGENT_KINDS,
    AgentContext,
    CompilerAgent,
    TilingAgent,
    TritonTemplateAgent,
    make_team,
)
from kernelarc.config import OFFLINE_STRATEGIES, TEAM_KINDS, AgentSpec, LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import resolve_problem


def test_offline_team_has_one_agent_per_strategy() -> None:
    team = make_team([AgentSpec(kind=kind) for kind in OFFLINE_STRATEGIES], seed=7)
    assert [(a.name, a.strategy) for a in team] == [(k, k) for k in OFFLINE_STRATEGIES]
    assert isinstance(team[0], TilingAgent) and isinstance(team[-1], CompilerAgent)


def test_bare_kinds_and_the_triton_template_agent_still_work() -> None:
    team = make_team(["compiler", "triton_template"], seed=7)
    assert [type(a) for a in team] == [CompilerAgent, TritonTemplateAgent]


def test_every_team_kind_of_the_config_is_an_agent_kind() -> None:
    assert set(TEAM_KINDS) == {*AGENT_KINDS, "llm"}


def test_llm_short_form_names_its_strategy() -> None:
    with pytest.raises(ConfigError, match=r"member 'llm-tiling' is an LLM agent but llm=none"):
        make_team(["compiler", "llm:tiling"], seed=0, llm=LLMConfig())


def test_repeated_kinds_get_distinct_names_and_orders() -> None:
    team = make_team(["triton_template", "triton_template", "compiler", "compiler"], seed=0)
    assert [a.name for a in team] == [
        "triton_template",
        "triton_template-2",
        "compiler",
        "compiler-2",
    ]
    ctx = AgentContext(problem=resolve_problem("rmsnorm"), device="cuda")
    first, second = team[0].propose(ctx), team[1].propose(ctx)
    assert first is not None and second is not None
    assert first.id != second.id


def test_named_members() -> None:
    team = make_team([AgentSpec(kind="tiling", name="tiles-a"), AgentSpec(kind="tiling")], seed=0)
    assert [a.name for a in team] == ["tiles-a", "tiling"]
    with pytest.raises(ConfigError, match="two members are named 'tiling'"):
        make_team([AgentSpec(kind="tiling"), AgentSpec(kind="memory", name="tiling")], seed=0)


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"'gpt'.*'compiler'.*'llm'.*'tiling'"):
        make_team(["compiler", "gpt"], seed=0)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (AgentSpec(kind="tiling", strategy="memory"), "owns strategy 'tiling', not 'memory'"),
        (AgentSpec(kind="compiler", model="gpt-4o"), "`model` is for `kind: llm` only"),
    ],
)
def test_offline_members_take_no_other_strategy_or_model(spec: AgentSpec, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make_team([spec], seed=0)


def test_llm_member_needs_an_endpoint() -> None:
    with pytest.raises(ConfigError, match=r"agents\.team.*llm=none.*llm=openai"):
        make_team([AgentSpec(kind="llm", strategy="tiling")], seed=0, llm=LLMConfig())


def test_empty_team_is_an_error() -> None:
    with pytest.raises(ConfigError, match="empty"):
        make_team([], seed=0)
