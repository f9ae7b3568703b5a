"""The campaign benchmark's runs: one offline campaign per problem, then missing baselines.

Place in the flow: `scripts/bench_campaign.py` (built-in problems) and `scripts/bench_suite.py`
(problem dirs, through `kernelarc.benchmark.suite`) parse their options into `BenchSettings` and
call `run_bench`. Per problem: compose the campaign config exactly as `kernelarc campaign` does
(Hydra, conf/, the offline team) with the bench's overrides, run the campaign through the same
lifecycle as the command (`campaign.lifecycle`; tracking off, no config.yaml) with the time left
until the problem's deadline as its wall-clock budget (`budget.time_s`: no proposal after it, no
candidate that is not expected to finish before it), then evaluate the torch.compile variants the
campaign did not (compile default and max-autotune) and the rounds each needs for a confidence
interval, through the same sandbox and timing protocol, never past the end of the problem's time
slice (baselines.py; a baseline not measured in time stays NOT_RUN). A problem that raises is
recorded as failed and the run goes on. Rows (report.py) and the JSON/markdown outputs
(outputs.py) are rewritten after every problem, so a run cut short still leaves its finished
problems.
"""

import importlib.util
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from kernelarc.benchmark.baselines import measure_baselines
from kernelarc.benchmark.outputs import (
    BenchProgress,
    ProblemResult,
    Writer,
    machine_facts,
    write_outputs,
)
from kernelarc.benchmark.report import build_row, markdown_table
from kernelarc.benchmark.settings import BenchSettings, Log, is_problem_dir, problem_label
from kernelarc.campaign import CampaignState
from kernelarc.campaign.lifecycle import (
    CampaignOpening,
    LifecycleHooks,
    TrackingChoice,
    run_campaign_lifecycle,
)
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import builtin_dir
from kernelarc.problems.files import load_problem
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_record
from kernelarc.schema import Attempt

logger = logging.getLogger(__name__)

#: Overrides every bench campaign gets before the user's `--set` ones: a quicker but still
#: noise-aware guard (2-3 re-timing rounds instead of 3-8 on CUDA; 2 is the least that decides),
#: 3 correctness rounds, a longer evaluation limit and hang allowance (max-autotune compiles on
#: its first call), tracking off (attempts.jsonl has it all).
BENCH_OVERRIDES = (
    "tracking=none",
    "guard.min_repeats=2",
    "guard.max_repeats=3",
    "eval.timeout_s=420",
    "eval.hang_allowance_s=400",
)
#: Share of a problem's time slice given to its campaign; the rest covers the evaluation in
#: flight at the deadline, the guard's re-timing of it, and the baselines measured afterwards.
CAMPAIGN_SHARE = 0.6


def _config_dir() -> tuple[str, str]:
    """('dir', <checkout>/conf) when this package runs from a checkout (its own conf/, even if
    an editable install of another checkout provides `kernelarc.conf`), else the installed
    ('module', 'kernelarc.conf')."""
    checkout_conf = Path(__file__).resolve().parents[2] / "conf"
    if (checkout_conf / "campaign.yaml").is_file():
        return "dir", str(checkout_conf)
    if importlib.util.find_spec("kernelarc.conf") is None:
        msg = f"no Hydra configs: neither {checkout_conf} nor the package kernelarc.conf"
        raise ConfigError(msg)
    return "module", "kernelarc.conf"


def compose_config(overrides: Sequence[str]) -> CampaignConfig:
    """The campaign config `kernelarc campaign OVERRIDES` would run (conf/ + schema).

    Raises:
        ConfigError: an override does not compose.
    """
    from hydra import compose, initialize_config_dir, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from kernelarc.config import register_configs

    register_configs()
    kind, where = _config_dir()
    GlobalHydra.instance().clear()
    init = (
        initialize_config_module(config_module=where, version_base="1.3")
        if kind == "module"
        else initialize_config_dir(config_dir=where, version_base="1.3")
    )
    try:
        with init:
            dict_cfg = compose(config_name="campaign", overrides=list(overrides))
        cfg = OmegaConf.to_object(dict_cfg)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        msg = f"bench overrides {list(overrides)} do not compose: {exc}"
        raise ConfigError(msg) from exc
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, CampaignConfig)
    return cfg


def bench_problem(name: str, settings: BenchSettings) -> str:
    """The `problem=` value: the built-in name or the dir, or a trimmed copy under
    out/problems/."""
    given = Path(name)
    own_dir = is_problem_dir(given)
    if settings.max_workloads <= 0:
        return str(given.resolve()) if own_dir else name
    source = given if own_dir else builtin_dir() / name
    target = settings.out / "problems" / problem_label(name)
    shutil.copytree(source, target, dirs_exist_ok=True)
    lines = (source / settings.workloads).read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip()][-settings.max_workloads :]
    (target / settings.workloads).write_text("\n".join(kept) + "\n", encoding="utf-8")
    return str(target.resolve())


def campaign_overrides(
    name: str, settings: BenchSettings, time_s: float | None = None
) -> list[str]:
    """Every override of one problem's campaign, in order (the user's last); `time_s` is the
    campaign's wall-clock budget (None: none)."""
    budget_time = [f"budget.time_s={max(1.0, time_s):.1f}"] if time_s is not None else []
    return [
        f"name=bench-{problem_label(name)}",
        f"problem={bench_problem(name, settings)}",
        f"workloads={settings.workloads}",
        f"device={settings.device}",
        f"seed={settings.seed}",
        f"budget.candidates={settings.budget}",
        f"eval.correctness_rounds={settings.correctness_rounds}",
        *budget_time,
        *BENCH_OVERRIDES,
        *settings.overrides,
    ]


def _progress(name: str, started: float, log: Log) -> Callable[[Attempt, CampaignState], None]:
    def on_attempt(attempt: Attempt, state: CampaignState) -> None:
        lat = f"{attempt.latency_ms:.4g} ms" if attempt.latency_ms else "-"
        best = state.best.latency_ms if state.best else None
        log(
            f"  [{name} {time.monotonic() - started:5.0f}s] #{attempt.index:<3} "
            f"{attempt.proposal.agent:<18} {attempt.status:<20} {lat:<12} "
            f"{attempt.verdict:<11} best {f'{best:.4g} ms' if best else '-'}  "
            f"{attempt.proposal.solution.name[-48:]}"
        )

    return on_attempt


def run_problem(
    name: str,
    settings: BenchSettings,
    deadline: float | None,
    log: Log,
    baseline_deadline: float | None = None,
) -> ProblemResult:
    """One campaign (its time budget ends at `deadline`, time.monotonic), then its missing
    baselines (none started after `baseline_deadline`), then its row."""
    label = problem_label(name)
    time_s = deadline - time.monotonic() if deadline is not None else None
    cfg = compose_config(campaign_overrides(name, settings, time_s))
    run_dir = settings.out / "runs" / label
    if run_dir.exists():
        shutil.rmtree(run_dir)
    started = time.monotonic()
    limit = f"{cfg.budget.time_s:.0f} s" if cfg.budget.time_s else "none"
    team = ", ".join(spec.kind for spec in cfg.agents.team)
    log(f"== {label}: budget {cfg.budget.candidates}, time limit {limit}, team {team}")
    # Tracking off whatever the overrides say (attempts.jsonl has it all), and no config.yaml.
    summary = run_campaign_lifecycle(
        cfg,
        run_dir,
        TrackingChoice(kind="none"),
        CampaignOpening(name=cfg.name),
        LifecycleHooks(on_attempt=_progress(label, started, log)),
    ).summary
    campaign_wall = time.monotonic() - started
    attempts = read_attempts(run_dir / ATTEMPTS_FILE)
    record = read_campaign_record(run_dir)
    problem = load_problem(Path(record.problem_dir))
    log(
        f"  campaign {summary.status} ({summary.stop_reason}): {summary.attempts} attempts, "
        f"{summary.passed} passed, {summary.guard_evaluations} guard evaluations, "
        f"{campaign_wall:.0f} s"
    )
    throughput = summary.throughput
    if throughput is not None and throughput.stages:
        spent = ", ".join(f"{k} {v:.1f}" for k, v in throughput.stages.items() if v >= 0.05)
        log(f"  seconds per stage: {spent}")
    b_started = time.monotonic()
    runs = measure_baselines(
        cfg,
        problem,
        summary.device,
        attempts,
        log,
        wanted=settings.baselines,
        rounds=settings.baseline_rounds,
        deadline=baseline_deadline,
    )
    row = build_row(label, attempts, record, runs)
    return ProblemResult(
        row=row,
        run_dir=str(run_dir),
        campaign_wall_s=round(campaign_wall, 1),
        baseline_wall_s=round(time.monotonic() - b_started, 1),
        baselines=[asdict(r) for r in runs],
        ceiling=record.roofline.ceiling.model_dump() if record.roofline else None,
        throughput=throughput.model_dump(mode="json") if throughput is not None else None,
    )


def run_bench(
    settings: BenchSettings,
    command: Sequence[str],
    log: Log = print,
    writer: Writer = write_outputs,
) -> BenchProgress:
    """Every problem in order, within the time limits, `writer` after each; a problem that
    raises is recorded as failed and the run goes on. Returns what was measured."""
    settings.out.mkdir(parents=True, exist_ok=True)
    progress = BenchProgress(
        meta={
            "command": " ".join(command),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_facts(settings.device),
        }
    )
    progress.sources = {problem_label(spec): spec for spec in settings.problems}
    log(f"machine: {progress.meta['machine']}")
    start = time.monotonic()
    writer(settings, progress)
    for i, spec in enumerate(settings.problems):
        name = problem_label(spec)
        now = time.monotonic()
        deadline: float | None = None
        slice_end: float | None = None
        if settings.total_time_s > 0:
            left = start + settings.total_time_s - now
            if left <= 0:
                progress.not_reached[name] = f"total time {settings.total_time_s:g} s used up"
                log(f"== {name}: not reached ({progress.not_reached[name]})")
                continue
            slice_end = now + left / (len(settings.problems) - i)
            deadline = now + CAMPAIGN_SHARE * left / (len(settings.problems) - i)
        if settings.campaign_time_s > 0:
            own = now + settings.campaign_time_s
            deadline = own if deadline is None else min(deadline, own)
        try:
            progress.results[name] = run_problem(spec, settings, deadline, log, slice_end)
        except Exception as exc:  # one problem's crash must not end the run
            progress.failed[name] = f"{type(exc).__name__}: {exc}"
            log(f"== {name}: failed: {progress.failed[name]}")
            logger.debug("problem %s failed", name, exc_info=True)
        writer(settings, progress)
    json_path, md_path = writer(settings, progress)
    rows = [r.row for r in progress.results.values()]
    log("")
    log(markdown_table(rows))
    log(f"total {time.monotonic() - start:.0f} s; wrote {json_path} and {md_path}")
    return progress
