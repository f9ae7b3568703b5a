"""The campaign benchmark's runs: one offline campaign per problem, then missing baselines.

Place in the flow: `scripts/bench_campaign.py` (built-in problems) and `scripts/bench_suite.py`
(problem dirs, through `kernelarc.benchmark.suite`) parse their options into `BenchSettings` and
call `run_bench`. Per problem: compose the campaign config exactly as `kernelarc campaign` does
(Hydra, conf/, the offline team) with the bench's overrides, run the campaign with the time left
until the problem's deadline as its wall-clock budget (`budget.time_s`: no proposal after it, no
candidate that is not expected to finish before it), then evaluate the torch.compile variants the
campaign did not (compile default and max-autotune) and the rounds each needs for a confidence
interval, through the same sandbox and timing protocol, never past the end of the problem's time
slice (a baseline not measured in time stays NOT_RUN). A problem that raises is recorded as failed
and the run goes on. Rows (report.py) and the JSON/markdown outputs are rewritten after every
problem, so a run cut short still leaves its finished problems.
"""

import importlib.util
import json
import logging
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelarc.agents.proposals import build_proposal
from kernelarc.agents.strategy.compiler_agent import VARIANTS, render_compiled_source
from kernelarc.benchmark.report import (
    BASELINE_DEFAULT,
    CI_METHOD,
    COMPILE_PREFIX,
    MAX_AUTOTUNE,
    BaselineRun,
    ProblemRow,
    baseline_runs_from_attempts,
    build_row,
    markdown_table,
    measured,
    merge_runs,
    summarize,
    trace_latencies,
)
from kernelarc.campaign import CampaignState, run_campaign
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError, SandboxError
from kernelarc.guard import score_traces
from kernelarc.guard.ceilings import gpu_identity
from kernelarc.problems.builtin_set import builtin_dir, builtin_names
from kernelarc.problems.files import Problem, load_problem
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_record
from kernelarc.sandboxes import make_sandbox
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalStatus,
    Language,
    Proposal,
    TimingConfig,
    Trace,
)
from kernelarc.tracking import make_tracker

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

Log = Callable[[str], None]


@dataclass
class BenchSettings:
    """What `scripts/bench_campaign.py` was asked to do."""

    device: str
    """Resolved device: `cpu` or `cuda`."""
    problems: list[str]
    """Built-in problem names or problem dirs (with definition.json), in run order."""
    workloads: str
    """Workload file of each problem dir."""
    out: Path
    """Directory for run dirs, bench.json and bench.md."""
    budget: int = 64
    """Candidates per campaign."""
    seed: int = 0
    """Campaign seed (one seed)."""
    max_workloads: int = 0
    """Keep only the last N workloads of the file (the largest in the built-ins); 0 = all."""
    correctness_rounds: int = 3
    """eval.correctness_rounds of every evaluation."""
    campaign_time_s: float = 0.0
    """Per-campaign wall-clock budget (`budget.time_s`: in-flight work finishes); 0 = none."""
    total_time_s: float = 0.0
    """No problem starts after this; campaigns get a fair share of what is left; 0 = none."""
    overrides: list[str] = field(default_factory=list)
    """Extra Hydra overrides (`key=value`), applied last."""
    json_path: Path | None = None
    """Where to write the JSON (default out/bench.json)."""
    markdown_path: Path | None = None
    """Where to write the markdown table (default out/bench.md)."""
    baselines: list[str] | None = None
    """torch.compile variants to measure after each campaign (None: `wanted_baselines`)."""
    baseline_rounds: int = 2
    """Evaluations of each measured baseline and of the fastest compile variant (campaign
    attempts and guard re-timings count), so their latencies get a confidence interval."""


def default_problems(workloads: str) -> list[str]:
    """Built-in problems that ship the workload file, sorted."""
    return [n for n in builtin_names() if (builtin_dir() / n / workloads).is_file()]


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


def is_problem_dir(path: Path) -> bool:
    """A directory holding a definition.json."""
    return (path / "definition.json").is_file()


def problem_label(spec: str) -> str:
    """A problem's name in rows and run dirs: the built-in name or the dir's name."""
    return Path(spec).name if is_problem_dir(Path(spec)) else spec


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


def _baseline_proposal(problem: Problem, tag: str) -> Proposal:
    variant = next(v for v in VARIANTS if v.tag == tag)
    return build_proposal(
        problem=problem.name,
        agent="bench",
        strategy="compiler",
        language=Language.PYTORCH,
        source=render_compiled_source(problem.definition, variant),
        tag=variant.tag,
        knobs=variant.knobs(),
        rationale=f"bench baseline: torch.compile({variant.call_args()}) of the reference",
    )


def wanted_baselines(device: str) -> tuple[str, ...]:
    """Variants every row needs: compile default and max-autotune (`MAX_AUTOTUNE`); on CUDA also
    max-autotune without CUDA graphs (graphs copy every fresh input address into static buffers,
    so either can be faster), a candidate for the best compile variant, never a stand-in for
    max-autotune."""
    if device == "cuda":
        return (BASELINE_DEFAULT, "compile-max-autotune-no-cudagraphs", MAX_AUTOTUNE["cuda"])
    return (BASELINE_DEFAULT, MAX_AUTOTUNE["cpu"])


def baseline_plan(runs: Sequence[BaselineRun], wanted: Sequence[str], rounds: int) -> list[str]:
    """The next variant to evaluate (as a one-item list; empty: done): a wanted variant with
    fewer than `rounds` PASSED evaluations, then the fastest PASSED compile variant likewise. A
    variant that failed is not evaluated again (it stays failed, with its status)."""
    merged = merge_runs(r for r in runs if r.variant.startswith(COMPILE_PREFIX))

    def short(tag: str) -> bool:
        run = merged.get(tag)
        if run is None:
            return True
        return run.status == EvalStatus.PASSED and 1 + len(run.rounds_ms) < rounds

    for tag in wanted:
        if short(tag):
            return [tag]
    fastest: tuple[float, str] | None = None
    for tag, run in merged.items():
        value = measured(run.latencies_ms, (), list(run.latencies_ms))
        passed = run.status == EvalStatus.PASSED and value is not None
        if passed and value is not None and (fastest is None or value.ms < fastest[0]):
            fastest = (value.ms, tag)
    if fastest is not None and short(fastest[1]):
        return [fastest[1]]
    return []


def measure_baselines(
    cfg: CampaignConfig,
    problem: Problem,
    device: str,
    attempts: Sequence[Attempt],
    log: Log,
    *,
    wanted: Sequence[str] | None = None,
    rounds: int = 2,
    deadline: float | None = None,
) -> list[BaselineRun]:
    """Evaluate the baseline variants the campaign did not, with the campaign's protocol, until
    each wanted variant and the fastest compile variant have `rounds` PASSED evaluations (or
    failed: never replaced by another variant), stopping at `deadline` (time.monotonic)."""
    wanted = list(wanted_baselines(device) if wanted is None else wanted)
    known = [tag for tag in wanted if tag in {v.tag for v in VARIANTS}]
    if len(known) != len(wanted):
        msg = f"unknown baseline variants {sorted(set(wanted) - set(known))}; known: " + ", ".join(
            v.tag for v in VARIANTS if v.compiled
        )
        raise ConfigError(msg)
    campaign_runs = baseline_runs_from_attempts(attempts)
    sandbox = make_sandbox(cfg.sandbox.kind, **cfg.sandbox.options())
    target = "cuda" if device == "cuda" else "cpu"
    warmup, iterations = cfg.eval.timing_for(device)
    runs: list[BaselineRun] = []

    def evaluate(tag: str) -> None:
        proposal = _baseline_proposal(problem, tag)
        request = EvalRequest(
            definition=problem.definition,
            workloads=list(problem.workloads),
            solution=proposal.solution,
            device=target,
            seed=cfg.eval.seed,
            correctness_rounds=cfg.eval.correctness_rounds,
            timing=TimingConfig(
                warmup=warmup, iterations=iterations, budget_s=cfg.eval.budget_for(device)
            ),
            problem_dir=str(problem.path.resolve()),
        )
        started = time.monotonic()
        try:
            result = sandbox.evaluate(request, timeout_s=cfg.eval.timeout_s)
        except SandboxError as exc:
            log(f"  baseline {tag}: INFRA_ERROR {exc}")
            runs.append(BaselineRun(tag, "INFRA_ERROR", {}, {}, "bench", error=str(exc)[:600]))
            return
        score = score_traces(result.traces)
        latency, reference = trace_latencies(result.traces)
        passed = score.status == EvalStatus.PASSED
        error = "" if passed else _first_failure(result.traces, result.stderr_tail)
        runs.append(
            BaselineRun(
                tag, str(score.status), latency if passed else {}, reference, "bench", error=error
            )
        )
        shown = f"{score.latency_ms:.4g} ms" if score.latency_ms else error[:200]
        log(f"  baseline {tag}: {score.status} {shown} ({time.monotonic() - started:.0f} s)")

    prepared = False
    try:
        while todo := baseline_plan([*campaign_runs, *runs], known, rounds):
            if deadline is not None and time.monotonic() >= deadline:
                log(f"  baselines: out of time before {todo[0]} (it stays as measured so far)")
                break
            if not prepared:
                sandbox.prepare(target, cfg.eval.timeout_s, str(problem.path.resolve()))
                prepared = True
            evaluate(todo[0])
    finally:
        sandbox.close()
    return runs


def _first_failure(traces: Sequence[Trace], stderr_tail: str) -> str:
    """The first failing workload's status and log (or the sandbox's stderr), cut short."""
    for trace in traces:
        evaluation = trace.evaluation
        if evaluation is not None and evaluation.status != EvalStatus.PASSED:
            return f"{trace.workload.uuid}: {evaluation.status}: {evaluation.log[-600:]}"
    return stderr_tail[-600:]


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


@dataclass
class ProblemResult:
    """One problem's outcome: its row and where its records are."""

    row: ProblemRow
    run_dir: str
    campaign_wall_s: float
    baseline_wall_s: float
    baselines: list[dict[str, Any]]
    ceiling: dict[str, Any] | None
    throughput: dict[str, Any] | None = None
    """The campaign's ThroughputReport (candidates/min, seconds per stage), as JSON."""


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
    tracker = make_tracker("none")
    started = time.monotonic()
    limit = f"{cfg.budget.time_s:.0f} s" if cfg.budget.time_s else "none"
    team = ", ".join(spec.kind for spec in cfg.agents.team)
    log(f"== {label}: budget {cfg.budget.candidates}, time limit {limit}, team {team}")
    summary = run_campaign(cfg, run_dir, tracker, _progress(label, started, log))
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


def machine_facts(device: str) -> dict[str, str]:
    """GPU, driver and library versions (no torch import: package metadata)."""
    facts = {"python": sys.version.split()[0]}
    for package in ("torch", "triton"):
        try:
            facts[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            facts[package] = "not installed"
    identity = gpu_identity(0) if device == "cuda" else None
    facts["gpu"], facts["driver"] = identity if identity else ("none", "")
    return facts


@dataclass
class BenchProgress:
    """What a bench run has so far (written after every problem)."""

    meta: dict[str, Any]
    """command, date, machine."""
    results: dict[str, ProblemResult] = field(default_factory=dict)
    """Finished problems by label."""
    failed: dict[str, str] = field(default_factory=dict)
    """Problems that raised: label -> `ErrorType: message`."""
    not_reached: dict[str, str] = field(default_factory=dict)
    """Problems not started before the total time ran out: label -> why."""
    sources: dict[str, str] = field(default_factory=dict)
    """Label -> the problem as given (built-in name or dir)."""


Writer = Callable[[BenchSettings, BenchProgress], tuple[Path, Path]]


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and a rename, so a run killed mid-write leaves the previous
    complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text, encoding="utf-8")
    staging.replace(path)


def write_outputs(settings: BenchSettings, progress: BenchProgress) -> tuple[Path, Path]:
    """bench.json and bench.md (rewritten after each problem)."""
    results, meta = progress.results, progress.meta
    skipped = {**progress.failed, **progress.not_reached}
    rows = [r.row for r in results.values()]
    summary = summarize(rows)
    json_path = settings.json_path or settings.out / "bench.json"
    md_path = settings.markdown_path or settings.out / "bench.md"
    data = {
        **meta,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "ci_method": CI_METHOD,
        "rows": [r.as_dict() for r in rows],
        "summary": asdict(summary),
        "problems": {
            name: {k: v for k, v in asdict(res).items() if k != "row"}
            for name, res in results.items()
        },
        "failed": progress.failed,
        "not_reached": progress.not_reached,
        "skipped": skipped,
    }
    write_text_atomic(json_path, json.dumps(data, indent=2, default=str) + "\n")
    header = (
        f"Offline team, budget {settings.budget}, seed {settings.seed}, {settings.device} "
        f"({meta['machine'].get('gpu', '')}), {meta['date']}\n\n"
    )
    skipped_lines = "".join(f"\nNot run: {k} ({v})." for k, v in skipped.items())
    write_text_atomic(md_path, header + markdown_table(rows) + skipped_lines)
    return json_path, md_path


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
