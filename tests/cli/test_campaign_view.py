"""The live table of a campaign on a terminal: columns only where they carry data.

The terminal is Rich's own (a forced-terminal console writing to a buffer): the live view only
exists on a terminal, which a test's pipes are not.
"""

import io
import logging
import sys

import pytest
from rich.console import Console

from kernelarc.campaign import CampaignState
from kernelarc.cli.campaign_view import CampaignConsole, CurrentStderrHandler
from kernelarc.config import AgentsConfig, CampaignConfig
from kernelarc.schema import Verdict
from tests.tracking.conftest import build_attempt


def _live_table(cfg: CampaignConfig) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    state = CampaignState(budget=3, roster=(("tiling", "tiling"), ("compiler", "compiler")))
    with CampaignConsole(cfg, console) as view:
        attempt = build_attempt(0, agent="tiling", verdict=Verdict.NEW_BEST)
        state.attempts.append(attempt)
        view.on_attempt(attempt, state)
    return buffer.getvalue()


def test_an_offline_team_shows_no_model_tokens_or_cost_columns() -> None:
    cfg = CampaignConfig(agents=AgentsConfig(team=["tiling", "compiler"]))
    table = _live_table(cfg)
    assert "tiling" in table and "budget 1/3" in table
    for empty in ("model", "tokens", "cost"):
        assert empty not in table, f"an offline team's {empty} column is always empty"


def test_an_llm_team_shows_model_tokens_and_cost() -> None:
    cfg = CampaignConfig(agents=AgentsConfig(team=["llm:tiling", "compiler"]))
    table = _live_table(cfg)
    for column in ("model", "tokens", "cost"):
        assert column in table


def test_the_live_table_counts_conclusions_published_after_the_last_attempt() -> None:
    """The loop publishes conclusions after recording an attempt; `on_progress` redraws then,
    so the footer counts what the closing summary reports (issue 17)."""
    cfg = CampaignConfig(agents=AgentsConfig(team=["tiling"]))
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    state = CampaignState(budget=3, roster=(("tiling", "tiling"),))
    with CampaignConsole(cfg, console) as view:
        attempt = build_attempt(0, agent="tiling", verdict=Verdict.NEW_BEST)
        state.attempts.append(attempt)
        view.on_attempt(attempt, state)
        state.conclusions = 2
        view.on_progress(state)
    assert "conclusions 2 (0 retracted)" in " ".join(buffer.getvalue().split())


def test_console_log_records_go_to_the_current_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the live table runs, Rich replaces sys.stderr to print above the table; a handler
    holding the original stream wrote into the table's last line instead."""
    handler = CurrentStderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    replaced = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replaced)
    handler.emit(logging.LogRecord("x", logging.WARNING, __file__, 1, "roofline: %s", ("n",), None))
    assert replaced.getvalue() == "WARNING: roofline: n\n"
