"""`kernelarc campaign`: the Hydra app that composes conf/ and runs one campaign per job; with
`resume=RUN_DIR` it continues a killed campaign in its run dir (campaign_resume.py)."""

import importlib.util
import logging
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from kernelarc.campaign import CampaignState, CampaignSummary, run_campaign
from kernelarc.campaign.device import resolve_device
from kernelarc.campaign.progress_line import stop_line, throughput_line
from kernelarc.campaign.restore import CONFIG_FILE, recorded_attempts
from kernelarc.campaign.team_stats import team_stats
from kernelarc.campaign_resume import resume_args, resumed_config
from kernelarc.cli import limit_mlflow_retries
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError
from kernelarc.report.sol_score import SolScorer
from kernelarc.schema import Attempt
from kernelarc.tracking import keys, make_tracker
from kernelarc.tracking.run_metadata import campaign_tags, flatten_config, run_name

logger = logging.getLogger(__name__)

ConfigStore.instance().store(name="campaign_schema", node=CampaignConfig)


def _config_path() -> str:
    """The conf/ beside this kernelarc package (a checkout), else `pkg://kernelarc.conf`.

    The checkout's conf/ comes first so that code and configs always come from the same tree:
    an editable install of another checkout maps `kernelarc.conf` to that checkout's conf/.
    """
    checkout = Path(__file__).resolve().parents[1] / "conf"
    if (checkout / "campaign.yaml").is_file():
        return str(checkout)
    if importlib.util.find_spec("kernelarc.conf") is not None:
        return "pkg://kernelarc.conf"
    return str(checkout)


def run_hydra_campaign(args: list[str]) -> int:
    """Run the Hydra app with `args` as its command line; return the exit status."""
    try:
        args = resume_args(args)
    except KernelarcError as exc:
        _print_error(exc)
        return 2
    saved = sys.argv
    sys.argv = ["kernelarc campaign", *args]
    try:
        _hydra_main()
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 1
    finally:
        sys.argv = saved
    return 0


@hydra.main(version_base="1.3", config_path=_config_path(), config_name="campaign")
def _hydra_main(dict_cfg: DictConfig) -> float | None:
    try:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        if dict_cfg.get("resume"):
            # Resumes run with the recorded config (resume_args pointed Hydra at the run dir).
            dict_cfg = resumed_config(dict_cfg, list(HydraConfig.get().overrides.task), run_dir)
        cfg = OmegaConf.to_object(dict_cfg)
        assert isinstance(cfg, CampaignConfig)
        return _run(cfg, dict_cfg, run_dir)
    except KernelarcError as exc:
        _print_error(exc)
        raise SystemExit(2) from exc


def _print_error(exc: KernelarcError) -> None:
    """The error on stderr, its text escaped: `[compiler,llm:tiling]` is not Rich markup."""
    Console(stderr=True).print(
        f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
    )


def default_tracking_uri() -> str:
    """sqlite store in the launch directory (Hydra does not change the working directory)."""
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def _run(cfg: CampaignConfig, dict_cfg: DictConfig, run_dir: Path) -> float | None:
    run_dir.mkdir(parents=True, exist_ok=True)
    # config.yaml describes the campaign (a later resume reads it): `resume` is not part of it.
    recorded = dict_cfg.copy()
    recorded.resume = None
    config_yaml = OmegaConf.to_yaml(recorded, resolve=True)
    _write_atomically(run_dir / CONFIG_FILE, config_yaml)
    container = OmegaConf.to_container(dict_cfg, resolve=True)
    assert isinstance(container, dict)
    config: dict[str, Any] = {str(k): v for k, v in container.items()}
    uri = cfg.tracking.uri or default_tracking_uri()
    experiment = cfg.tracking.experiment or cfg.name
    # A dead tracking server must cost seconds, not minutes of retries (attempts.jsonl has all).
    limit_mlflow_retries()
    options: dict[str, Any] = {}
    if cfg.tracking.kind == "mlflow":
        options = {
            "tracking_uri": uri,
            "experiment": experiment,
            "run_dir": run_dir,
            "sol_score": SolScorer.for_run_dir(run_dir),
        }
    tracker = make_tracker(cfg.tracking.kind, **options)
    hydra_cfg = HydraConfig.get()
    overrides = list(hydra_cfg.overrides.task)
    opening: dict[str, Any] = {
        "name": run_name(cfg.name, overrides),
        "params": flatten_config(config),
        "tags": campaign_tags(
            config,
            run_dir,
            device=resolve_device(cfg.device),
            choices=dict(hydra_cfg.runtime.choices),
            overrides=overrides,
        ),
        "config_yaml": config_yaml,
    }
    resume_tracking = getattr(tracker, "resume_campaign", None)
    if cfg.resume is not None and callable(resume_tracking):
        # Re-attach the campaign's MLflow runs (its ledger names them); nothing is logged twice.
        resume_tracking(**opening, attempts=recorded_attempts(run_dir))
    else:
        tracker.start_campaign(**opening)
    console = Console(stderr=True)
    status, summary_metrics = "FAILED", {}
    started = time.monotonic()
    try:
        with Live(_view(cfg, None), console=console, refresh_per_second=2) as live:

            def on_attempt(attempt: Attempt, state: CampaignState) -> None:
                live.update(_view(cfg, state))

            summary = run_campaign(cfg, run_dir, tracker, on_attempt)
        status = summary.status
        summary_metrics = {
            "campaign/wall_s": round(time.monotonic() - started, 3),
            "campaign/guard_evaluations": float(summary.guard_evaluations),
            "campaign/time_used_s": summary.time_used_s,
        }
        if summary.throughput is not None:
            numbers = summary.throughput.numbers().items()
            summary_metrics.update({keys.THROUGHPUT_PREFIX + k: v for k, v in numbers})
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        tracker.finish(status, summary_metrics)
    if cfg.tracking.kind == "mlflow":
        _sync_at_end(console, run_dir, uri, experiment)
    _print_summary(console, cfg, summary, tracker.ui_hint())
    return summary.best.speedup if summary.best else None


def _write_atomically(path: Path, text: str) -> None:
    """Write a file so that a kill leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _sync_at_end(console: Console, run_dir: Path, uri: str, experiment: str) -> None:
    """Upload what the tracker could not (an outage); a no-op when nothing is missing."""
    from kernelarc.tracking.mlflow_sync import sync_run_dir

    try:
        report = sync_run_dir(
            run_dir, uri, experiment=experiment, sol_score=SolScorer.for_run_dir(run_dir)
        )
    except KernelarcError as exc:
        logger.warning("MLflow sync at the end failed: %s", exc)
        console.print(
            f"[yellow]MLflow is missing part of this campaign[/] ({exc}); attempts.jsonl has "
            f"everything: run `kernelarc sync {run_dir}` once {uri} answers.",
            highlight=False,
            soft_wrap=True,
        )
        return
    if report.changed:
        console.print(f"MLflow sync: {report.describe()}", highlight=False, soft_wrap=True)


def _view(cfg: CampaignConfig, state: CampaignState | None) -> Table:
    """The live progress: budget, best, coordination counts, and one row per agent (called
    from the loop's progress callback, under its lock, so the state is consistent)."""
    switches = [
        k for k in ("memory", "guard", "peer_state", "drafting") if getattr(cfg.coordination, k)
    ]
    table = Table(
        title=f"campaign {cfg.name} on {Path(cfg.problem).name}  (coordination: "
        f"{', '.join(switches) or 'none'})",
        title_justify="left",
    )
    table.add_column("agent", no_wrap=True)
    table.add_column("strategy", no_wrap=True)
    table.add_column("model")
    for column in ("tried", "ok", "best", "drafts", "tokens", "cost"):
        table.add_column(column, justify="right")
    if state is None:
        table.caption = f"budget 0/{cfg.budget.candidates}: starting"
        return table
    stats = team_stats(state.attempts, state.roster)
    for row in stats:
        table.add_row(
            row.name,
            row.strategy,
            row.model or "-",
            str(row.attempts),
            str(row.passed),
            f"{row.best_speedup:.2f}x" if row.best_speedup is not None else "-",
            str(row.drafts),
            str(row.tokens),
            f"${row.cost_usd:.3f}",
        )
    best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
    tokens = sum(r.tokens for r in stats)
    cost = sum(r.cost_usd for r in stats)
    table.caption = (
        f"budget {len(state.attempts)}/{state.budget}  best {best}  failures {state.failures}  "
        f"conclusions {state.conclusions} ({state.retracted} retracted)  drafts {state.drafts}  "
        f"guard runs {state.guard_evaluations}  tokens {tokens}  cost ${cost:.4f}"
        + throughput_line(state)
    )
    return table


def _print_summary(
    console: Console, cfg: CampaignConfig, summary: CampaignSummary, ui_hint: str | None
) -> None:
    best = summary.best
    console.print(
        f"\n[bold]Campaign {cfg.name}[/] on [bold]{summary.problem}[/] ({summary.device}): "
        f"{summary.attempts} candidates, {summary.passed} passed, {summary.failures} failed; "
        f"{summary.conclusions} conclusions ({summary.retracted} retracted), "
        f"{summary.drafts} drafts."
    )
    if best is not None:
        console.print(
            f"Best: {best.proposal.id} by {best.proposal.agent} "
            f"({best.proposal.rationale}) speedup {best.speedup:.2f}x over the reference."
        )
    else:
        console.print("No correct candidate was found.")
    console.print(stop_line(summary, cfg.budget.time_s))
    rate = summary.throughput
    if rate is not None:
        console.print(
            f"Throughput: {rate.candidates_per_min:.2f} candidates/min "
            f"({rate.candidates_per_min_per_gpu:.2f} per timed slot, executor {rate.executor}), "
            f"timed slots busy {rate.timed_busy_fraction:.0%}, "
            f"mean queue wait {rate.queue_wait_s_mean:.1f} s."
        )
    console.print(f"Run dir:   {summary.run_dir.resolve()}  (attempts.jsonl, campaign.json)")
    console.print(f"Export:    kernelarc export {summary.run_dir} --out exports/")
    if ui_hint:
        console.print(f"MLflow UI: {ui_hint}  (experiment {cfg.tracking.experiment or cfg.name!r})")
