"""The campaign: composes problems, agents, sandboxes, the judge and tracking."""

from kernelarc.campaign.loop import run_campaign
from kernelarc.campaign.state import CampaignState, CampaignSummary

__all__ = ["CampaignState", "CampaignSummary", "run_campaign"]
