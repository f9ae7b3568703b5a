"""What goes around one campaign, shared by `kernelarc campaign` and the benchmarks: the run dir
and its config.yaml, the tracker (made, then started, or re-attached for a resume), the campaign
itself (`run_campaign`), the tracker finished with the outcome, and with MLflow tracking a sync
at the end of whatever the tracker could not upload (an outage).

Place in the flow: `cli/campaign.py` composes the config with Hydra, renders config.yaml, builds
the tracker's opening (run name, params, tags) and its live view, then calls
`run_campaign_lifecycle`; `benchmark/campaigns.py` calls it with its own composed config, no
config.yaml and tracking off. Composition stays with the callers: nothing here imports Hydra or
omegaconf. Neither does anything here print: the live view and the interrupt message are the
caller's hooks, and the sync's outcome is returned for the caller to show.

On failure: the loop closes the executor whatever happens (`run_assembled`); any exception
finishes the tracker FAILED and propagates. Ctrl-C (KeyboardInterrupt) finishes it KILLED, marks
campaign.json INTERRUPTED (so `kernelarc resume` knows it was cut short) and tells
`LifecycleHooks.on_interrupted` how many attempts are recorded, with a second Ctrl-C ignored
meanwhile (those marks are what a resume needs), then propagates.
"""

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.campaign.loop import run_campaign
from kernelarc.campaign.restore import recorded_attempts
from kernelarc.campaign.state import (
    CampaignSummary,
    IdleCallback,
    ProgressCallback,
    StateCallback,
)
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError
from kernelarc.report.sol_score import SolScorer
from kernelarc.rundir import ATTEMPTS_FILE, CONFIG_FILE
from kernelarc.rundir.run_record import mark_interrupted
from kernelarc.tracking import Tracker, keys, make_tracker

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackingChoice:
    """Which tracker a campaign reports to (`tracking.TRACKER_KINDS`) and, for MLflow, where."""

    kind: str
    """`mlflow` or `none`."""
    uri: str = ""
    """The MLflow tracking URI (the caller resolves the default store)."""
    experiment: str = ""
    """The MLflow experiment."""
    finish_timeout_s: float = 60.0
    """`tracking.finish_timeout_s`."""


@dataclass(frozen=True)
class CampaignOpening:
    """How a campaign is recorded at its start: config.yaml and the tracker's campaign run."""

    name: str
    """The tracker's run name."""
    config_yaml: str | None = None
    """The resolved config, written to the run dir's config.yaml (what a resume runs with) and
    given to the tracker; None: no config.yaml (the benchmarks)."""
    params: Mapping[str, str] = field(default_factory=dict)
    """The flattened config, the tracker's params."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """The campaign run's tags (`tracking.run_metadata.campaign_tags`)."""


@dataclass(frozen=True)
class LifecycleHooks:
    """What the caller shows while the campaign runs (all optional)."""

    on_attempt: ProgressCallback | None = None
    """Once per recorded attempt (`run_campaign`)."""
    on_progress: StateCallback | None = None
    """Whenever the state changes (`run_campaign`)."""
    on_idle: IdleCallback | None = None
    """Once per agent that does not apply to the problem (`run_campaign`)."""
    live: AbstractContextManager[object] | None = None
    """Entered just before the agents start and left when they have stopped (a live view)."""
    on_interrupted: Callable[[int], None] | None = None
    """After Ctrl-C, once campaign.json is marked: told how many attempts attempts.jsonl holds
    (a second Ctrl-C is ignored while it runs)."""


@dataclass(frozen=True)
class SyncOutcome:
    """The MLflow sync at the end of a campaign."""

    changes: str = ""
    """What it uploaded or changed (`SyncReport.describe`); '' when nothing was missing."""
    error: str = ""
    """Why it failed ('' when it did not): MLflow lacks part of the campaign, attempts.jsonl has
    it, and `kernelarc sync RUN_DIR` uploads it later."""


@dataclass(frozen=True)
class FinishedCampaign:
    """A campaign that ran to its end, with the tracker it reported to."""

    summary: CampaignSummary
    tracker: Tracker
    """Finished; still asked for its UI hint, URI and whether it degraded."""
    sync: SyncOutcome | None
    """The sync at the end (MLflow tracking only)."""


def run_campaign_lifecycle(
    cfg: CampaignConfig,
    run_dir: Path,
    tracking: TrackingChoice,
    opening: CampaignOpening,
    hooks: LifecycleHooks | None = None,
) -> FinishedCampaign:
    """Run one campaign into `run_dir` with everything around it (module docstring); with
    `cfg.resume` set, `run_dir` is the killed campaign's run dir and the tracker re-attaches its
    runs instead of starting new ones.

    Raises:
        ConfigError: unknown tracking kind, or the campaign cannot be set up (`run_campaign`).
        KeyboardInterrupt: Ctrl-C, after the tracker is finished and campaign.json is marked.
    """
    hooks = hooks or LifecycleHooks()
    run_dir.mkdir(parents=True, exist_ok=True)
    if opening.config_yaml is not None:
        _write_atomically(run_dir / CONFIG_FILE, opening.config_yaml)
    tracker = make_campaign_tracker(tracking, run_dir)
    _open(tracker, cfg, run_dir, opening)
    status, summary_metrics = "FAILED", {}
    started = time.monotonic()
    try:
        with hooks.live or contextlib.nullcontext():
            summary = run_campaign(
                cfg,
                run_dir,
                tracker,
                hooks.on_attempt,
                on_progress=hooks.on_progress,
                on_idle=hooks.on_idle,
            )
        status = summary.status
        summary_metrics = _summary_metrics(summary, time.monotonic() - started)
    except KeyboardInterrupt:
        status = "KILLED"
        _interrupted(tracker, run_dir, hooks.on_interrupted)
        raise
    finally:
        tracker.finish(status, summary_metrics)  # once: a second call does nothing
    sync = _sync_at_end(run_dir, tracking) if tracking.kind == "mlflow" else None
    return FinishedCampaign(summary=summary, tracker=tracker, sync=sync)


def make_campaign_tracker(tracking: TrackingChoice, run_dir: Path) -> Tracker:
    """The tracker of `tracking`; an MLflow one also notes its uploads in the run dir's ledger
    and scores attempts against the run dir's copy of the problem.

    Raises:
        ConfigError: unknown tracking kind.
    """
    if tracking.kind != "mlflow":
        return make_tracker(tracking.kind)
    return make_tracker(
        "mlflow",
        tracking_uri=tracking.uri,
        experiment=tracking.experiment,
        run_dir=run_dir,
        sol_score=SolScorer.for_run_dir(run_dir),
        finish_timeout_s=tracking.finish_timeout_s,
    )


def _open(tracker: Tracker, cfg: CampaignConfig, run_dir: Path, opening: CampaignOpening) -> None:
    """Start the campaign's runs, or re-attach a resumed campaign's (its ledger names them), so
    nothing is logged twice."""
    config_yaml = opening.config_yaml or ""
    if cfg.resume is not None:
        tracker.resume_campaign(
            name=opening.name,
            params=opening.params,
            tags=opening.tags,
            config_yaml=config_yaml,
            attempts=recorded_attempts(run_dir),
        )
    else:
        tracker.start_campaign(
            name=opening.name, params=opening.params, tags=opening.tags, config_yaml=config_yaml
        )


def _summary_metrics(summary: CampaignSummary, wall_s: float) -> dict[str, float]:
    """The final metrics the tracker closes the campaign run with."""
    metrics = {
        "campaign/wall_s": round(wall_s, 3),
        "campaign/guard_evaluations": float(summary.guard_evaluations),
        "campaign/time_used_s": summary.time_used_s,
    }
    if summary.throughput is not None:
        numbers = summary.throughput.numbers().items()
        metrics.update({keys.THROUGHPUT_PREFIX + k: v for k, v in numbers})
    return metrics


def _interrupted(
    tracker: Tracker, run_dir: Path, on_interrupted: Callable[[int], None] | None
) -> None:
    """Ctrl-C: MLflow's runs KILLED, campaign.json INTERRUPTED, then the caller's message; a
    second Ctrl-C meanwhile is ignored (signal handlers can only be set in the main thread)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        tracker.finish("KILLED", {})
        mark_interrupted(run_dir)
        if on_interrupted is not None:
            done = len(recorded_attempts(run_dir)) if (run_dir / ATTEMPTS_FILE).is_file() else 0
            on_interrupted(done)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def _sync_at_end(run_dir: Path, tracking: TrackingChoice) -> SyncOutcome:
    """Upload what the tracker could not (an outage); a no-op when nothing is missing."""
    from kernelarc.tracking.mlflow_sync import sync_run_dir  # imports mlflow (1+ s)

    try:
        report = sync_run_dir(
            run_dir,
            tracking.uri,
            experiment=tracking.experiment,
            sol_score=SolScorer.for_run_dir(run_dir),
        )
    except KernelarcError as exc:
        logger.warning("MLflow sync at the end failed: %s", exc)
        return SyncOutcome(error=str(exc))
    return SyncOutcome(changes=report.describe() if report.changed else "")


def _write_atomically(path: Path, text: str) -> None:
    """Write a file so that a kill leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
