"""Which ablation arm a campaign belongs to: the swept settings minus the seed (pure).

Place in the flow: `report.build` labels every campaign with `arm_label` before the statistics.
The arm keys are the Hydra overrides whose values differ between the campaigns of the report
(e.g. `coordination=full` vs `coordination=none`), without the seed, the problem (a report
dimension of its own) and the campaign name. When the campaigns carry no overrides (launched
with different config files), the differing flattened config keys are used instead; a caller
can also name the keys.
"""

from collections.abc import Sequence

from kernelarc.rundir.reader import CampaignSource

NOT_ARM_KEYS = frozenset({"seed", "problem", "name", "tracking"})
"""Keys that never define an arm (where runs are logged is not a treatment)."""
NOT_ARM_PREFIXES = ("hydra.", "hydra/", "tracking.")
"""Key prefixes that never define an arm."""
ALL_RUNS = "all runs"
"""Arm label when nothing differs between the campaigns."""


def arm_keys(campaigns: Sequence[CampaignSource], explicit: Sequence[str] = ()) -> list[str]:
    """The keys that define the arms: `explicit`, else the overridden keys whose values differ,
    else the config keys whose values differ."""
    if explicit:
        return list(explicit)
    overridden = sorted({k for c in campaigns for k in c.overrides})
    found = _differing(campaigns, overridden)
    if found:
        return found
    return _differing(campaigns, sorted({k for c in campaigns for k in c.config}))


def value_of(campaign: CampaignSource, key: str) -> str:
    """A setting's value in a campaign: its override, else its config group choice, else its
    config value; `-` when none says."""
    for source in (campaign.overrides, campaign.choices, campaign.config):
        if key in source:
            return source[key]
    return "-"


def arm_label(campaign: CampaignSource, keys: Sequence[str]) -> str:
    """`key=value, ...` of the campaign for the arm keys."""
    if not keys:
        return ALL_RUNS
    return ", ".join(f"{key}={value_of(campaign, key)}" for key in keys)


def _differing(campaigns: Sequence[CampaignSource], keys: Sequence[str]) -> list[str]:
    return [
        k
        for k in keys
        if k not in NOT_ARM_KEYS
        and not k.startswith(NOT_ARM_PREFIXES)
        and len({value_of(c, k) for c in campaigns}) > 1
    ]
