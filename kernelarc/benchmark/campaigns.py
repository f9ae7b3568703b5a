"""The campaign benchmark's runs: one offline campaign per problem, then missing baselines.

Place in the flow: `scripts/bench_campaign.py` parses its options into `BenchSettings` and calls
`run_bench`. Per problem: compose the campaign config exactly as `kernelarc campaign` does (Hydra,
conf/, the offline team) with the bench's overrides, run the campaign with the time left until the
problem's deadline as its wall-clock budget (`budget.time_s`: no proposal after it, no candidate
that is not expected to finish before it), then evaluate the torch.compile variants the campaign did
not (compile default and max-autotune), through the same sandbox and timing protocol. Rows
(report.py) and the JSON/markdown outputs are rewritten after every problem, so a run cut short
still leaves its finished problems.
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

from kernelarc.agents.compiler_agent import VARIANTS, render_compiled_source
from kernelarc.agents.proposals import build_proposal
from kernelarc.benchmark.report import (
    BASELINE_DEFAULT,
    BASELINE_PREFIX,
    BaselineRun,
    ProblemRow,
    baseline_runs_from_attempts,
    build_row,
    markdown_table,
    summarize,
    trace_latencies,
)
from kernelarc.campaign import CampaignState, run_campaign
from kernelarc.campaign.run_record import read_campaign_record
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError, SandboxError
from kernelarc.execution import make_sandbox
from kernelarc.guard import score_traces
from kernelarc.guard.ceilings import gpu_identity
from kernelarc.problems.builtin_set import builtin_dir, builtin_names
from kernelarc.problems.files import Problem, load_problem
from kernelarc.schema import Attempt, EvalRequest, EvalStatus, Language, Proposal, TimingConfig
from kernelarc.tracking import make_tracker
from kernelarc.tracking.attempts_log import read_attempts

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
    """Built-in problem names, in run order."""
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

    import kernelarc.campaign_cli  # noqa: F401  (registers the campaign schema)

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
    """The `problem=` value: the built-in name, or a trimmed copy under out/problems/."""
    if settings.max_workloads <= 0:
        return name
    source = builtin_dir() / name
    target = settings.out / "problems" / name
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "definition.json", target / "definition.json")
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
        f"name=bench-{name}",
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
    """Variants every row needs: compile default and max-autotune (on CUDA with and without CUDA
    graphs: graphs copy every fresh input address into static buffers, so either can be faster;
    T_b is the faster)."""
    if device == "cuda":
        return (BASELINE_DEFAULT, "compile-max-autotune-no-cudagraphs", "compile-max-autotune")
    return (BASELINE_DEFAULT, "compile-max-autotune-no-cudagraphs")


def measure_baselines(
    cfg: CampaignConfig, problem: Problem, device: str, attempts: Sequence[Attempt], log: Log
) -> list[BaselineRun]:
    """Evaluate the baseline variants the campaign did not, with the campaign's protocol.

    If no max-autotune variant passes, the one without CUDA graphs is tried as well.
    """
    have = {run.variant for run in baseline_runs_from_attempts(attempts)}
    todo = [v for v in wanted_baselines(device) if v not in have]
    sandbox = make_sandbox(cfg.sandbox.kind, **cfg.sandbox.options())
    if todo:  # the first baseline's runner imports torch while the rest is set up
        sandbox.prepare(
            "cuda" if device == "cuda" else "cpu", cfg.eval.timeout_s, str(problem.path.resolve())
        )
    warmup, iterations = cfg.eval.timing_for(device)
    runs: list[BaselineRun] = []

    def evaluate(tag: str) -> None:
        proposal = _baseline_proposal(problem, tag)
        request = EvalRequest(
            definition=problem.definition,
            workloads=list(problem.workloads),
            solution=proposal.solution,
            device="cuda" if device == "cuda" else "cpu",
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
            runs.append(BaselineRun(tag, "INFRA_ERROR", {}, {}, "bench"))
            return
        score = score_traces(result.traces)
        latency, reference = trace_latencies(result.traces)
        passed = score.status == EvalStatus.PASSED
        runs.append(
            BaselineRun(tag, str(score.status), latency if passed else {}, reference, "bench")
        )
        shown = f"{score.latency_ms:.4g} ms" if score.latency_ms else ""
        log(f"  baseline {tag}: {score.status} {shown} ({time.monotonic() - started:.0f} s)")

    try:
        for tag in todo:
            evaluate(tag)
        all_runs = [*baseline_runs_from_attempts(attempts), *runs]
        passing = [
            r for r in all_runs if r.variant.startswith(BASELINE_PREFIX) and r.status == "PASSED"
        ]
        fallback = "compile-max-autotune-no-cudagraphs"
        if not passing and fallback not in {r.variant for r in all_runs}:
            evaluate(fallback)
    finally:
        sandbox.close()
    return runs


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


def run_problem(
    name: str, settings: BenchSettings, deadline: float | None, log: Log
) -> ProblemResult:
    """One campaign (its time budget ends at `deadline`, time.monotonic), then its missing
    baselines, then its row."""
    time_s = deadline - time.monotonic() if deadline is not None else None
    cfg = compose_config(campaign_overrides(name, settings, time_s))
    run_dir = settings.out / "runs" / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    tracker = make_tracker("none")
    started = time.monotonic()
    limit = f"{cfg.budget.time_s:.0f} s" if cfg.budget.time_s else "none"
    log(f"== {name}: budget {cfg.budget.candidates}, time limit {limit}, team {cfg.agents.team}")
    summary = run_campaign(cfg, run_dir, tracker, _progress(name, started, log))
    campaign_wall = time.monotonic() - started
    attempts = read_attempts(run_dir / "attempts.jsonl")
    record = read_campaign_record(run_dir)
    problem = load_problem(Path(record.problem_dir))
    log(
        f"  campaign {summary.status} ({summary.stop_reason}): {summary.attempts} attempts, "
        f"{summary.passed} passed, {summary.guard_evaluations} guard evaluations, "
        f"{campaign_wall:.0f} s"
    )
    b_started = time.monotonic()
    runs = measure_baselines(cfg, problem, summary.device, attempts, log)
    row = build_row(name, attempts, record, runs)
    return ProblemResult(
        row=row,
        run_dir=str(run_dir),
        campaign_wall_s=round(campaign_wall, 1),
        baseline_wall_s=round(time.monotonic() - b_started, 1),
        baselines=[asdict(r) for r in runs],
        ceiling=record.roofline.ceiling.model_dump() if record.roofline else None,
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


def write_outputs(
    settings: BenchSettings,
    results: dict[str, ProblemResult],
    skipped: dict[str, str],
    meta: dict[str, Any],
) -> tuple[Path, Path]:
    """bench.json and bench.md (rewritten after each problem)."""
    rows = [r.row for r in results.values()]
    summary = summarize(rows)
    json_path = settings.json_path or settings.out / "bench.json"
    md_path = settings.markdown_path or settings.out / "bench.md"
    data = {
        **meta,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "rows": [r.as_dict() for r in rows],
        "summary": asdict(summary),
        "problems": {
            name: {k: v for k, v in asdict(res).items() if k != "row"}
            for name, res in results.items()
        },
        "skipped": skipped,
    }
    for path in (json_path, md_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    header = (
        f"Offline team, budget {settings.budget}, seed {settings.seed}, {settings.device} "
        f"({meta['machine'].get('gpu', '')}), {meta['date']}\n\n"
    )
    skipped_lines = "".join(f"\nNot run: {k} ({v})." for k, v in skipped.items())
    md_path.write_text(header + markdown_table(rows) + skipped_lines, encoding="utf-8")
    return json_path, md_path


def run_bench(
    settings: BenchSettings, command: Sequence[str], log: Log = print
) -> list[ProblemRow]:
    """Every problem in order, within the time limits; returns the rows."""
    settings.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(command),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_facts(settings.device),
    }
    log(f"machine: {meta['machine']}")
    start = time.monotonic()
    results: dict[str, ProblemResult] = {}
    skipped: dict[str, str] = {}
    for i, name in enumerate(settings.problems):
        now = time.monotonic()
        deadline: float | None = None
        if settings.total_time_s > 0:
            left = start + settings.total_time_s - now
            if left <= 0:
                skipped[name] = f"total time {settings.total_time_s:g} s used up"
                log(f"== {name}: skipped ({skipped[name]})")
                continue
            deadline = now + CAMPAIGN_SHARE * left / (len(settings.problems) - i)
        if settings.campaign_time_s > 0:
            own = now + settings.campaign_time_s
            deadline = own if deadline is None else min(deadline, own)
        try:
            results[name] = run_problem(name, settings, deadline, log)
        except ConfigError as exc:
            skipped[name] = f"error: {exc}"
            log(f"== {name}: {skipped[name]}")
        write_outputs(settings, results, skipped, meta)
    json_path, md_path = write_outputs(settings, results, skipped, meta)
    rows = [r.row for r in results.values()]
    log("")
    log(markdown_table(rows))
    log(f"total {time.monotonic() - start:.0f} s; wrote {json_path} and {md_path}")
    return rows
