"""The torch.compile baselines of a benchmark row: which variants every row needs, the next one
to evaluate until each has the rounds a confidence interval takes, and measuring them with the
campaign's protocol (same sandbox, timing and correctness rounds) after its campaign.

Place in the flow: `campaigns.run_problem` calls `measure_baselines` once the problem's campaign
has stopped, with the attempts it recorded (compile variants the campaign evaluated count) and
the end of the problem's time slice as its deadline; a variant not measured in time stays as
measured so far (NOT_RUN in the row, report.py).
"""

import time
from collections.abc import Sequence

from kernelarc.agents.proposals import build_proposal
from kernelarc.agents.strategy.compiler_agent import VARIANTS, render_compiled_source
from kernelarc.benchmark.report import (
    BASELINE_DEFAULT,
    COMPILE_PREFIX,
    MAX_AUTOTUNE,
    BaselineRun,
    baseline_runs_from_attempts,
    measured,
    merge_runs,
    trace_latencies,
)
from kernelarc.benchmark.settings import Log
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError, SandboxError
from kernelarc.guard import score_traces
from kernelarc.problems.files import Problem
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
