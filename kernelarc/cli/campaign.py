"""`kernelarc campaign`: the Hydra app that composes conf/ and runs one campaign per job; with
`resume=RUN_DIR` it continues a killed campaign in its run dir (campaign_resume.py).

Place in the flow: `kernelarc.cli.main` imports this module only to run a campaign (or a resume,
or shell completion), so the other commands never import Hydra. Importing it registers the
config schema (`config.register_configs`) and the help's resolvers (`campaign_help.py`), which
Hydra needs before it composes; what a campaign shows is `campaign_view.py`, a sweep's summary
`sweep_summary.py`. Each job composes and validates here, then hands the run dir, config.yaml,
tracker and MLflow sync to `campaign.lifecycle.run_campaign_lifecycle`, which the benchmarks
share.
"""

import contextlib
import logging
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from kernelarc.campaign.device import resolve_device
from kernelarc.campaign.lifecycle import (
    CampaignOpening,
    LifecycleHooks,
    SyncOutcome,
    TrackingChoice,
    run_campaign_lifecycle,
)
from kernelarc.cli.campaign_help import (
    config_dir,
    config_path,
    launcher_check,
    register_help_resolvers,
)
from kernelarc.cli.campaign_overrides import check_override_keys, config_groups
from kernelarc.cli.campaign_resume import resume_args, resumed_config
from kernelarc.cli.campaign_view import CampaignConsole, print_summary
from kernelarc.cli.console import USAGE_ERROR, make_console, print_error
from kernelarc.cli.mlflow_store import limit_mlflow_retries, local_mlflow_uri
from kernelarc.cli.sweep_summary import failed_jobs, record_failure
from kernelarc.command_paths import command, display_path
from kernelarc.config import CampaignConfig, register_configs
from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.problems.files import Problem
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, CONFIG_FILE
from kernelarc.rundir.run_config import flatten_config
from kernelarc.tracking.run_metadata import campaign_tags, run_name

logger = logging.getLogger(__name__)

register_configs()
register_help_resolvers()


_EXCLUSIVE_FLAGS = {
    "-m": "--multirun",
    "--multirun": "--multirun",
    "-c": "--cfg",
    "--cfg": "--cfg",
    "-i": "--info",
    "--info": "--info",
    "-sc": "--shell-completion",
    "--shell-completion": "--shell-completion",
    "-r": "--run",
    "--run": "--run",
}


def run_hydra_campaign(args: list[str], prog: str = "kernelarc campaign") -> int:
    """Run the Hydra app with `args` as its command line; return the exit status."""
    try:
        args = resume_args(args)
        _check_command_line(args)
    except KernelarcError as exc:
        print_error(exc)
        return USAGE_ERROR
    _completion_line()
    saved = sys.argv
    sys.argv = [prog, *args]
    try:
        _hydra_main()
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:  # before or between jobs: nothing of a campaign to mark
        Console(stderr=True).print("\ninterrupted", highlight=False)
        return 130
    finally:
        sys.argv = saved
    return 1 if failed_jobs() else 0


def _check_command_line(args: list[str]) -> None:
    """Errors Hydra would report with a traceback or a misleading hint, before it runs.

    Raises:
        ConfigError: two of Hydra's mode flags, or an override of a key the schema lacks.
    """
    modes = sorted({_EXCLUSIVE_FLAGS[a] for a in args if a in _EXCLUSIVE_FLAGS})
    if len(modes) > 1:
        msg = (
            f"{' and '.join(modes)} cannot be combined: --cfg and --info show one job's config "
            "(drop -m and give one value per key, e.g. `kernelarc campaign --cfg job seed=0`)"
        )
        raise ConfigError(msg)
    check_override_keys(args, config_groups(config_dir()))
    launcher_check(args)


def _completion_line() -> None:
    """Shell completion asks `kernelarc -sc query=bash` with the whole line in COMP_LINE;
    Hydra completes overrides, so the `campaign` word must not be taken for one."""
    line = os.environ.get("COMP_LINE")
    if line is not None:
        os.environ["COMP_LINE"] = re.sub(r"^(\s*\S+)\s+campaign(\s|$)", r"\1\2", line, count=1)


@hydra.main(version_base="1.3", config_path=config_path(), config_name="campaign")
def _hydra_main(dict_cfg: DictConfig) -> float | None:
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    try:
        if dict_cfg.get("resume"):
            # Resumes run with the recorded config (resume_args pointed Hydra at the run dir).
            dict_cfg = resumed_config(dict_cfg, list(hydra_cfg.overrides.task), run_dir)
        cfg = OmegaConf.to_object(dict_cfg)
        assert isinstance(cfg, CampaignConfig)
        return _run(cfg, dict_cfg, run_dir)
    except KernelarcError as exc:
        print_error(exc)
        _failed_job(run_dir, str(exc), multirun)
        if not multirun:
            raise SystemExit(USAGE_ERROR) from exc
    except Exception as exc:
        if not multirun:
            raise
        # One broken job must not end the sweep (the basic launcher would stop at it).
        logger.exception("job failed")
        print_error(KernelarcError(f"{type(exc).__name__}: {exc} (traceback in {run_dir})"))
        _failed_job(run_dir, f"{type(exc).__name__}: {exc}", multirun)
    return None


def _failed_job(run_dir: Path, error: str, multirun: bool) -> None:
    """Undo what Hydra made for a job that never started, and note it in a sweep."""
    started = (run_dir / CAMPAIGN_FILE).is_file() or (run_dir / ATTEMPTS_FILE).is_file()
    if not started:
        _remove_unstarted(run_dir)
    if multirun:
        hydra_cfg = HydraConfig.get()
        record_failure(
            Path(hydra_cfg.sweep.dir),
            int(hydra_cfg.job.num),
            list(hydra_cfg.overrides.task),
            error,
        )


def _remove_unstarted(run_dir: Path) -> None:
    """Remove a run dir that holds only what Hydra and the start wrote (.hydra/, the log,
    config.yaml): a campaign that never started leaves nothing behind. Anything else stays."""
    ours = {".hydra", "kernelarc.log", CONFIG_FILE}
    try:
        entries = list(run_dir.iterdir())
    except OSError:
        return
    if any(entry.name not in ours for entry in entries):
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        run_dir.rmdir()


def _validate(cfg: CampaignConfig, console: Console) -> Problem:
    """Check what can be checked before anything is created (run dir files, MLflow runs); print
    the problem's warnings; return the problem.

    Raises:
        ConfigError, ProblemFormatError: the problem or device cannot be used.
    """
    note = unused_llm_note(cfg)
    if note:
        console.print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)
        logger.info("%s", note)
    problem = resolve_problem(cfg.problem, cfg.workloads)
    for warning in problem.warnings:
        console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
        logger.info("problem: %s", warning)
    resolve_device(cfg.device)
    return problem


def unused_llm_note(cfg: CampaignConfig) -> str | None:
    """A warning when an LLM endpoint is configured but no member of the team would use it."""
    if cfg.llm.kind == "none" or any(spec.kind == "llm" for spec in cfg.agents.team):
        return None
    return (
        f"llm={cfg.llm.kind} is set but no member of agents.team uses an LLM (the team is "
        f"{', '.join(spec.name or spec.kind for spec in cfg.agents.team)}), so no LLM is "
        "called; pick agents=llm (LLM agents only) or agents=mixed (LLM and offline agents), "
        "or add `llm:<strategy>` members to agents.team"
    )


def _run(cfg: CampaignConfig, dict_cfg: DictConfig, run_dir: Path) -> float | None:
    console = make_console(stderr=True)
    problem = _validate(cfg, console)
    # The problem tag groups campaigns by definition; the source says where it came from.
    source = cfg.problem if cfg.problem in builtin_names() else str(problem.path.resolve())
    # config.yaml describes the campaign (a later resume reads it): `resume` is not part of it.
    recorded = dict_cfg.copy()
    recorded.resume = None
    container = OmegaConf.to_container(dict_cfg, resolve=True)
    assert isinstance(container, dict)
    config: dict[str, Any] = {str(k): v for k, v in container.items()}
    tracking = TrackingChoice(
        kind=cfg.tracking.kind,
        uri=cfg.tracking.uri or local_mlflow_uri(),
        experiment=cfg.tracking.experiment or cfg.name,
        finish_timeout_s=cfg.tracking.finish_timeout_s,
    )
    # A dead tracking server must cost seconds, not minutes of retries (attempts.jsonl has all).
    limit_mlflow_retries()
    hydra_cfg = HydraConfig.get()
    overrides = list(hydra_cfg.overrides.task)
    opening = CampaignOpening(
        name=run_name(cfg.name, overrides),
        config_yaml=OmegaConf.to_yaml(recorded, resolve=True),
        params=flatten_config(config),
        tags=campaign_tags(
            config,
            run_dir,
            device=resolve_device(cfg.device),
            choices=dict(hydra_cfg.runtime.choices),
            overrides=overrides,
            problem_name=problem.name,
            problem_source=source,
        ),
    )
    view = CampaignConsole(cfg, console, resolve_device(cfg.device))
    hooks = LifecycleHooks(
        on_attempt=view.on_attempt,
        # on_progress after conclusions too: the footer counts what the summary will (issue 17).
        on_progress=view.on_progress,
        on_idle=view.on_idle,
        live=view,
        on_interrupted=lambda done: _interrupted(console, cfg, run_dir, done),
    )
    try:
        finished = run_campaign_lifecycle(cfg, run_dir, tracking, opening, hooks)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if finished.sync is not None:
        _print_sync(console, run_dir, tracking.uri, finished.sync)
    summary = finished.summary
    print_summary(console, cfg, summary, view.idle, finished.tracker)
    return summary.best.speedup if summary.best else None


def _interrupted(console: Console, cfg: CampaignConfig, run_dir: Path, done: int) -> None:
    """Ctrl-C, once campaign.json is marked INTERRUPTED (MLflow's runs KILLED): say how far the
    campaign got and how to go on."""
    console.print(
        f"\nInterrupted: {done} of {cfg.budget.candidates} candidates recorded in "
        f"{display_path(run_dir)}/attempts.jsonl; the evaluations in flight were stopped.",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"Continue with: {command('kernelarc')} resume {display_path(run_dir)}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _print_sync(console: Console, run_dir: Path, uri: str, sync: SyncOutcome) -> None:
    """What the MLflow sync at the end did: nothing to say when nothing was missing."""
    if sync.error:
        console.print(
            f"[yellow]MLflow is missing part of this campaign[/] ({sync.error}); attempts.jsonl "
            f"has everything: run `kernelarc sync {run_dir}` once {uri} answers.",
            highlight=False,
            soft_wrap=True,
        )
    elif sync.changes:
        console.print(f"MLflow sync: {sync.changes}", highlight=False, soft_wrap=True)
