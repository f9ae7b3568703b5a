"""The coordination and agents config groups compose from the real conf/ and type-check."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kernelarc.agents import make_team
from kernelarc.config import OFFLINE_STRATEGIES, AgentSpec, CampaignConfig, register_configs
from kernelarc.errors import ConfigError

CONF = Path(__file__).resolve().parents[2] / "conf"

PRESETS = {
    "full": (True, True, True, True),
    "none": (False, False, False, False),
    "no_memory": (False, True, True, True),
    "no_guard": (True, False, True, True),
    "no_peer_state": (True, True, False, True),
    "no_drafting": (True, True, True, False),
}


def _compose(overrides: list[str]) -> CampaignConfig:
    register_configs()  # the schema conf/campaign.yaml is typed by
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_object(compose("campaign", overrides=overrides))
    assert isinstance(cfg, CampaignConfig)
    return cfg


def test_every_coordination_preset_is_listed_here() -> None:
    assert {p.stem for p in (CONF / "coordination").glob("*.yaml")} == set(PRESETS)


@pytest.mark.parametrize(("preset", "switches"), PRESETS.items())
def test_coordination_presets(preset: str, switches: tuple[bool, ...]) -> None:
    c = _compose([f"coordination={preset}"]).coordination
    assert (c.memory, c.guard, c.peer_state, c.drafting) == switches


def test_default_team_is_the_offline_one_and_builds() -> None:
    cfg = _compose([])
    assert [spec.kind for spec in cfg.agents.team] == list(OFFLINE_STRATEGIES)
    team = make_team(list(cfg.agents.team), cfg.seed, llm=cfg.llm)
    assert [a.strategy for a in team] == list(OFFLINE_STRATEGIES)


@pytest.mark.parametrize("preset", ["llm", "mixed"])
def test_llm_presets_compose_to_typed_specs(preset: str) -> None:
    team = _compose([f"agents={preset}", "llm.model=m"]).agents.team
    assert all(isinstance(spec, AgentSpec) for spec in team) and len(team) == 7
    llm = [spec for spec in team if spec.kind == "llm"]
    assert llm and all(spec.strategy for spec in llm)
    assert {spec.strategy or spec.kind for spec in team} == set(OFFLINE_STRATEGIES)


def test_command_line_overrides() -> None:
    cfg = _compose(
        [
            "agents.team=[{kind: compiler}, {kind: llm, strategy: tiling, model: m2}]",
            "coordination=no_drafting",
            "coordination.plateau_patience=7",
            "coordination.draft_from=reference",
            "budget.max_proposing=2",
        ]
    )
    assert cfg.agents.team == [
        AgentSpec(kind="compiler"),
        AgentSpec(kind="llm", strategy="tiling", model="m2"),
    ]
    assert cfg.coordination.plateau_patience == 7 and cfg.coordination.draft_from == "reference"
    assert cfg.budget.max_proposing == 2


def test_team_items_may_be_bare_kinds() -> None:
    team = _compose(["agents.team=[compiler,tiling]"]).agents.team
    assert team == [AgentSpec(kind="compiler"), AgentSpec(kind="tiling")]
    assert [a.name for a in make_team(list(team), seed=0)] == ["compiler", "tiling"]


def test_team_may_mix_short_forms_and_mappings() -> None:
    # No request is sent: building an LLM agent only makes its client (this endpoint is unused).
    cfg = _compose(
        [
            "agents.team=[compiler,llm:tiling,{kind: llm, strategy: memory, model: m2}]",
            "llm=openai",
            "llm.base_url=http://127.0.0.1:9/v1",
            "llm.model=m",
        ]
    )
    assert cfg.agents.team == [
        AgentSpec(kind="compiler"),
        AgentSpec(kind="llm", strategy="tiling"),
        AgentSpec(kind="llm", strategy="memory", model="m2"),
    ]
    team = make_team(list(cfg.agents.team), cfg.seed, llm=cfg.llm)
    assert [(a.name, a.strategy) for a in team] == [
        ("compiler", "compiler"),
        ("llm-tiling", "tiling"),
        ("llm-memory", "memory"),
    ]


@pytest.mark.parametrize(
    ("team", "match"),
    [
        ("[compiler,gpt]", r"agents\.team\[1\]: unknown agent kind 'gpt'; valid kinds: .*'llm'"),
        ("[llm]", r"agents\.team\[0\]: an `llm` member needs a strategy; write `llm:<strategy>`"),
        ("[{kind: llm}]", r"agents\.team\[0\]: an `llm` member needs a strategy"),
        ("[{kind: tiling, stratgy: x}]", r"agents\.team\[0\]: unknown key 'stratgy'"),
        ("[{llm: tiling}]", r"write `llm:tiling`, without the space"),
        ("[{strategy: tiling}]", r"agents\.team\[0\] has no `kind`"),
        ("[]", r"agents\.team is empty"),
    ],
)
def test_bad_team_items_fail_at_compose_naming_the_item(team: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _compose([f"agents.team={team}"])


@pytest.mark.parametrize(
    "override",
    [
        "coordination.plateau_patience=0",
        "coordination.draft_from=peers",
        "coordination.max_claim_chars=5000",
        "budget.max_proposing=0",
    ],
)
def test_bad_values_fail_at_compose(override: str) -> None:
    with pytest.raises(ConfigError):
        _compose([override])
