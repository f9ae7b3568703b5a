"""What a running campaign shows: a live table on a terminal, plain progress lines elsewhere, and
the closing summary with one block of next steps.

Place in the flow: `cli/campaign.py` (`_run`) opens a `CampaignConsole` around `run_campaign`
and hands its `on_attempt`/`on_progress`/`on_idle` to the loop, then calls `print_summary`. On a
terminal the team table is redrawn in place (Rich Live on stderr), after conclusions too. Off a
terminal (a file, a CI log, a pipe) nothing can be redrawn, so every attempt prints one complete
line as it is recorded and, while nothing is recorded, a status line every
`KERNELARC_PROGRESS_INTERVAL_S` seconds (default 30), so a long campaign never looks hung.
Columns that carry nothing for the team (model, tokens and cost of an offline team) are left
out.
"""

import logging
import os
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from kernelarc.campaign import CampaignState, CampaignSummary
from kernelarc.campaign.progress_line import stop_line, throughput_line
from kernelarc.campaign.team_stats import AgentStats, team_stats
from kernelarc.command_paths import command, display_path
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError
from kernelarc.problems.files import load_definition
from kernelarc.problems.reference import is_reference
from kernelarc.schema import Attempt, EvalStatus
from kernelarc.timing_labels import CPU_TIMING_NOTE, cpu_timed, speedup_text
from kernelarc.tracking import Tracker

PROGRESS_INTERVAL_ENV = "KERNELARC_PROGRESS_INTERVAL_S"
"""Seconds between status lines off a terminal while nothing is recorded (default 30)."""

MLFLOW_UI_PORT = 5000


class CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A logging handler that writes to whatever `sys.stderr` is at the time of each record
    (the console handler of conf/hydra/job_logging), so records logged while the live table
    runs are printed above it rather than mixed into its last line."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        """The current sys.stderr."""
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the stream is always the current sys.stderr."""


class CampaignConsole:
    """The console view of one campaign (a context manager around `run_campaign`)."""

    def __init__(self, cfg: CampaignConfig, console: Console, device: str = "") -> None:
        self.cfg = cfg
        self.console = console
        self.device = device
        self.idle: dict[str, str] = {}
        """Agent -> why it does not apply (said once each)."""
        self._llm = any(getattr(spec, "kind", "") == "llm" for spec in cfg.agents.team)
        self._live: Live | None = None
        self._state: CampaignState | None = None
        self._started = time.monotonic()
        self._last_line = self._started
        self._done = threading.Event()
        self._ticker: threading.Thread | None = None
        self._lock = threading.Lock()

    # --- context -----------------------------------------------------------------------------

    def __enter__(self) -> "CampaignConsole":
        self._started = self._last_line = time.monotonic()
        if self.console.is_terminal:
            if self.device == "cpu":
                self.console.print(CPU_TIMING_NOTE, markup=False, highlight=False)
            self._live = Live(self._table(None), console=self.console, refresh_per_second=2)
            self._live.__enter__()
            return self
        self._say(f"campaign {self.cfg.name} on {self.cfg.problem}: {self._coordination()}")
        if self.device == "cpu":
            self._say(CPU_TIMING_NOTE)
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)
            self._live = None
        if self._ticker is not None:
            self._ticker.join(timeout=5)

    # --- what the loop calls -----------------------------------------------------------------

    def on_attempt(self, attempt: Attempt, state: CampaignState) -> None:
        """An attempt was recorded (called under the loop's state lock)."""
        self._state = state
        if self._live is not None:
            self._live.update(self._table(state))
            return
        speed = ""
        if attempt.speedup is not None:
            speed = " " + speedup_text(
                attempt.speedup,
                attempt.speedup_ci_low,
                attempt.speedup_ci_high,
                attempt.interleaved_speedup,
            )
        best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
        verdict = f" {attempt.verdict}" if attempt.verdict else ""
        self._say(
            f"attempt {len(state.attempts)}/{state.budget} by {attempt.proposal.agent}: "
            f"{attempt.status}{speed}{verdict}; best {best}"
        )

    def on_progress(self, state: CampaignState) -> None:
        """The state changed (an attempt, or conclusions published): redraw the live table, so
        its counts are the ones the closing summary reports (off a terminal, `on_attempt`'s
        lines and the status ticker say enough)."""
        self._state = state
        if self._live is not None:
            self._live.update(self._table(state))

    def on_idle(self, agent: str, reason: str) -> None:
        """An agent does not apply to the problem: say why, once."""
        with self._lock:
            if agent in self.idle:
                return
            self.idle[agent] = reason
        self._say(f"{agent} does not apply: {reason}")

    # --- internals ---------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        """One line: above the live table on a terminal, with the elapsed time elsewhere."""
        with self._lock:
            self._last_line = time.monotonic()
        if self._live is not None:
            self._live.console.print(escape(text), highlight=False)
            return
        elapsed = _clock(time.monotonic() - self._started)
        self.console.print(f"[{elapsed}] {text}", markup=False, highlight=False)

    def _tick(self) -> None:
        interval = _interval()
        while not self._done.wait(min(interval, 1.0)):
            with self._lock:
                quiet = time.monotonic() - self._last_line
            if quiet < interval:
                continue
            state = self._state
            if state is None:
                self._say(f"budget 0/{self.cfg.budget.candidates}: evaluating the first candidates")
                continue
            with state.lock:
                done, budget = len(state.attempts), state.budget
                running = max(0, state.reserved - done)
                best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
            if running or done < budget:
                self._say(f"budget {done}/{budget}, {running} evaluating, best {best}")
            else:
                self._say(f"all {done} candidates recorded; closing the sandboxes")

    def _coordination(self) -> str:
        switches = [
            k
            for k in ("memory", "guard", "peer_state", "drafting")
            if getattr(self.cfg.coordination, k)
        ]
        return f"coordination: {', '.join(switches) or 'none'}"

    def _table(self, state: CampaignState | None) -> Table:
        """The live progress: one row per agent, budget and counts in the caption."""
        table = Table(
            title=f"campaign {self.cfg.name} on {Path(self.cfg.problem).name}  "
            f"({self._coordination()})",
            title_justify="left",
        )
        stats = team_stats(state.attempts, state.roster) if state is not None else []
        llm = self._llm or any(r.model or r.tokens for r in stats)
        for column in _columns(llm):
            table.add_column(column, no_wrap=column in ("agent", "strategy"))
        if state is None:
            table.caption = f"budget 0/{self.cfg.budget.candidates}: starting"
            return table
        for row in stats:
            table.add_row(*_cells(row, llm))
        best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
        caption = (
            f"budget {len(state.attempts)}/{state.budget}  best {best}  failures "
            f"{state.failures}  conclusions {state.conclusions} ({state.retracted} retracted)  "
            f"drafts {state.drafts}  guard runs {state.guard_evaluations}"
        )
        if llm:
            tokens = sum(r.tokens for r in stats)
            cost = sum(r.cost_usd for r in stats)
            caption += f"  tokens {tokens}  cost ${cost:.4f}"
        table.caption = caption + throughput_line(state)
        return table


def _columns(llm: bool) -> list[str]:
    columns = ["agent", "strategy"] + (["model"] if llm else [])
    columns += ["tried", "ok", "best", "drafts"]
    return columns + (["tokens", "cost"] if llm else [])


def _cells(row: AgentStats, llm: bool) -> list[str]:
    cells = [row.name, row.strategy] + ([row.model or "-"] if llm else [])
    cells += [
        str(row.attempts),
        str(row.passed),
        f"{row.best_speedup:.2f}x" if row.best_speedup is not None else "-",
        str(row.drafts),
    ]
    return cells + ([str(row.tokens), f"${row.cost_usd:.3f}"] if llm else [])


def _interval() -> float:
    try:
        value = float(os.environ.get(PROGRESS_INTERVAL_ENV, "30"))
    except ValueError:
        return 30.0
    return value if value > 0 else 30.0


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:d}m{secs:02d}s"


def print_summary(
    console: Console,
    cfg: CampaignConfig,
    summary: CampaignSummary,
    idle: dict[str, str],
    tracker: Tracker,
) -> None:
    """The closing lines: outcome, why the campaign stopped early, and the next steps."""
    say = _printer(console)
    say(
        f"\nCampaign {cfg.name} on {summary.problem} ({summary.device}): {summary.attempts} "
        f"candidates, {summary.passed} passed, {summary.failures} failed; {summary.conclusions} "
        f"conclusions ({summary.retracted} retracted), {summary.drafts} drafts."
    )
    best = summary.best
    reference_best = best is not None and _is_reference(summary.run_dir, best)
    if best is None:
        say("No correct candidate was found.")
    elif reference_best:
        say(
            f"No generated kernel beat the reference: the best correct candidate is the "
            f"reference itself, unchanged ({best.proposal.id} by {best.proposal.agent}, "
            f"{_speedup(best)})."
        )
    else:
        say(
            f"Best: {best.proposal.id} by {best.proposal.agent} ({best.proposal.rationale}) "
            f"speedup {_speedup(best)} over the reference."
        )
    if best is not None and cpu_timed([best]):
        say(CPU_TIMING_NOTE + ".")
    finished = summary.status == "FINISHED"
    stopped_early = finished and summary.attempts < cfg.budget.candidates
    if stopped_early and summary.stop_reason in ("agents_done", ""):
        names = ", ".join(sorted(idle))  # agents report from their own threads
        verb = "does" if len(idle) == 1 else "do"
        idle_note = f"; {names} {verb} not apply to this problem (see above)" if idle else ""
        say(
            f"Stopped with budget {summary.attempts}/{cfg.budget.candidates} used: no agent has "
            f"anything new to propose{idle_note} ({summary.time_used_s:.0f} s used)."
        )
    else:
        say(stop_line(summary, cfg.budget.time_s))
    rate = summary.throughput
    if rate is not None and summary.attempts:
        say(
            f"Throughput: {rate.candidates_per_min:.2f} candidates/min "
            f"({rate.candidates_per_min_per_gpu:.2f} per timed slot, executor {rate.executor}), "
            f"timed slots busy {rate.timed_busy_fraction:.0%}, "
            f"mean queue wait {rate.queue_wait_s_mean:.1f} s."
        )
    run_dir = display_path(summary.run_dir)
    say(f"Run dir: {run_dir}  (attempts.jsonl, campaign.json, kernelarc.log)")
    say("Next steps:")
    kernelarc = command("kernelarc")
    if best is not None and not reference_best:
        out = Path("exports")
        solution = out / summary.problem / "solution.json"
        say(f"  export the best kernel:  {kernelarc} export {run_dir} --out {out}/")
        say(f"  check the export:        {kernelarc} eval {run_dir}/problem --solution {solution}")
    else:
        say("  (nothing to export: no generated kernel passed and beat the reference)")
    for line in mlflow_lines(cfg, tracker, run_dir):
        say(f"  {line}")
    if finished and summary.stop_reason == "time_budget" and cfg.budget.time_s:
        more_s = 2 * cfg.budget.time_s
        say(f"  more time:               {kernelarc} resume {run_dir} budget.time_s={more_s:g}")
    elif finished and not stopped_early:
        more = 2 * cfg.budget.candidates
        say(f"  more candidates:         {kernelarc} resume {run_dir} budget.candidates={more}")


def mlflow_lines(cfg: CampaignConfig, tracker: Tracker, run_dir: str) -> list[str]:
    """Where to see the campaign in MLflow, as commands that run from here."""
    if cfg.tracking.kind != "mlflow":
        return [f"upload to MLflow:        {command('kernelarc')} sync {run_dir}"]
    uri = tracker.tracking_uri or cfg.tracking.uri or ""
    experiment = tracker.experiment_name or cfg.tracking.experiment or cfg.name
    experiment_id = tracker.experiment_id
    run_id = tracker.parent_run_id
    if uri.startswith(("http://", "https://")):
        base = uri.rstrip("/")
        page = f"{base}/#/experiments/{experiment_id}/runs/{run_id}" if run_id else base
        return [f"MLflow run:              {page}"]
    port = MLFLOW_UI_PORT
    return [
        f"MLflow UI:               {command('mlflow')} ui --backend-store-uri {uri} --port {port}",
        f"                         then open http://127.0.0.1:{port} (experiment {experiment!r})",
    ]


def _is_reference(run_dir: Path, best: Attempt) -> bool:
    """Whether the best attempt is the problem's reference unchanged (read from the run dir)."""
    if best.status != EvalStatus.PASSED:
        return False
    try:
        definition = load_definition(run_dir / "problem" / "definition.json")
    except KernelarcError:  # an unreadable copy only loses the wording, never the summary
        return best.proposal.knobs.get("compiled") is False
    return is_reference(best.proposal.solution, definition)


def _printer(console: Console) -> Any:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    return say


def _speedup(attempt: Attempt) -> str:
    """The attempt's speedup as the attempt lines print it (with the interleaved estimate when
    the official one lies outside its interval)."""
    if attempt.speedup is None:
        return "-"
    return speedup_text(
        attempt.speedup,
        attempt.speedup_ci_low,
        attempt.speedup_ci_high,
        attempt.interleaved_speedup,
    )
