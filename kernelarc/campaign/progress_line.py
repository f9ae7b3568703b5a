"""One-line summaries of a campaign's pace for the live view and the final console summary.

Place in the flow: `cli.campaign_view.CampaignConsole` appends `throughput_line(state)` to the
live table's caption after each attempt (the loop refreshes `CampaignState.throughput` first),
and `cli.campaign_view.print_summary` prints `stop_line(summary)`: why and when the campaign
stopped.
"""

from kernelarc.campaign.state import CampaignState, CampaignSummary

_STAGES = (("screen", "screen"), ("timing", "timing"), ("guard", "guard"))


def throughput_line(state: CampaignState) -> str:
    """`\\n<candidates/min>  timed slot busy  time per stage  queue waits  time left`, or '' before
    the first attempt."""
    rate = state.throughput
    if rate is None:
        return ""
    stages = rate.stages
    parts = [
        f"{rate.candidates_per_min:.2f} candidates/min",
        f"timed slot busy {rate.timed_busy_fraction:.0%}",
        f"build {stages.get('runner_build', 0.0):.0f} s",
    ]
    for key, label in _STAGES:
        if stages.get(key):
            parts.append(f"{label} {stages[key]:.0f} s")
    waits = sum(stages.get(f"{key}_queue_wait", 0.0) for key, _ in _STAGES)
    parts.append(f"queue waits {waits:.0f} s")
    left = state.clock.left_s()
    if left is not None:
        parts.append(f"time left {left:.0f} s")
    return "\n" + "  ".join(parts)


def stop_line(summary: CampaignSummary, time_budget_s: float | None) -> str:
    """Why the campaign stopped and the wall time it used."""
    reasons = {
        "candidates": "the candidate budget is spent",
        "time_budget": "the time budget is spent",
        "agents_done": "no agent had anything new to propose",
        "aborted": "aborted",
    }
    used = f"{summary.time_used_s:.0f} s used"
    if time_budget_s is not None:
        used += f" of {time_budget_s:g} s"
    return f"Stopped: {reasons.get(summary.stop_reason, summary.stop_reason)} ({used})."
