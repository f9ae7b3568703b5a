"""The deterministic benchmark guard: the one trusted judge of "is this correct, and is it
really faster than the incumbent".

Place in the flow: `campaign/loop.py` runs `scan_solution` before a proposal reaches a sandbox,
`run_challenge` for a passing candidate that beats the incumbent (interleaved re-timing, then a
confirmation run on fresh inputs), and `judge_attempt` to decide; `replay_verdicts` re-derives
every decision from the recorded attempts alone (`rundir.rejudge.replay_run` reads them from a
run dir). Rules and decision procedure: docs/guard.md.
"""

from kernelarc.guard.bootstrap import decide_rounds, decide_samples
from kernelarc.guard.challenge import Challenge, run_challenge
from kernelarc.guard.rejudge import (
    ReplayMismatch,
    replay_judgements,
    replay_mismatches,
    replay_verdicts,
)
from kernelarc.guard.roofline import roofline_bound, roofline_bounds
from kernelarc.guard.score import Score, score_traces
from kernelarc.guard.settings import guard_settings, roofline_for
from kernelarc.guard.static_rules import RULES, Rule, blocking, scan_solution
from kernelarc.guard.verdict import Judgement, is_challenger, judge_attempt, roofline_message

__all__ = [
    "RULES",
    "Challenge",
    "Judgement",
    "ReplayMismatch",
    "Rule",
    "Score",
    "blocking",
    "decide_rounds",
    "decide_samples",
    "guard_settings",
    "is_challenger",
    "judge_attempt",
    "replay_judgements",
    "replay_mismatches",
    "replay_verdicts",
    "roofline_bound",
    "roofline_bounds",
    "roofline_for",
    "roofline_message",
    "run_challenge",
    "scan_solution",
    "score_traces",
]
