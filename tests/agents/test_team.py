"""make_team: kinds, names and errors."""

import pytest

from kernelarc.agents import AgentContext, CompilerAgent, TritonTemplateAgent, make_team
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import resolve_problem


def test_default_team() -> None:
    team = make_team(["compiler", "triton_template"], seed=7)
    assert [type(a) for a in team] == [CompilerAgent, TritonTemplateAgent]
    assert [(a.name, a.strategy) for a in team] == [
        ("compiler", "compiler"),
        ("triton_template", "triton_template"),
    ]


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


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"'llm'.*\['compiler', 'triton_template'\]"):
        make_team(["compiler", "llm"], seed=0)


def test_empty_team_is_an_error() -> None:
    with pytest.raises(ConfigError, match="empty"):
        make_team([], seed=0)
