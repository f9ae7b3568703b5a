"""The campaign: composes problems, agents, sandboxes, the judge and tracking."""

from kernelarc.campaign.loop import CampaignState, CampaignSummary, run_campaign

__all__ = ["CampaignState", "CampaignSummary", "run_campaign"]
