"""The compiler agent: variant order, records, dedupe, and that its candidates are correct."""

import ast
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from agent_checks import case_for, check_entry, run_checker, smallest_workload

from kernelarc.agents import AgentContext, AnchoringAgent, CompilerAgent
from kernelarc.agents.strategy.compiler_agent import PINNED_OPTIONS, VARIANTS
from kernelarc.guard import blocking, scan_solution
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalStatus,
    Language,
    Proposal,
    TimingConfig,
    Verdict,
)
from kernelarc.schema.coordination import Conclusion, ConclusionScope, Evidence

NAMES = builtin_names()


def _all(agent: CompilerAgent, ctx: AgentContext) -> list:
    out = []
    while (proposal := agent.propose(ctx)) is not None:
        out.append(proposal)
    return out


def test_eager_first_on_the_cpu_compile_default_first_on_cuda() -> None:
    problem = resolve_problem("rmsnorm")
    cpu = _all(CompilerAgent(), AgentContext(problem=problem, device="cpu"))
    cuda = _all(CompilerAgent(), AgentContext(problem=problem, device="cuda"))
    assert [p.knobs["variant"] for p in cpu] == [v.tag for v in VARIANTS if not v.cuda_only]
    tags = [v.tag for v in VARIANTS]
    assert [p.knobs["variant"] for p in cuda] == ["compile-default", "eager", *tags[2:]]
    assert {"max-autotune", "reduce-overhead"} <= {p.knobs.get("mode") for p in cuda}
    assert cpu[0].solution.sources[0].content == problem.definition.reference
    assert cpu[0].knobs == {"variant": "eager", "compiled": False}
    assert len({p.id for p in cuda}) == len(cuda)


def test_the_eager_reference_and_compile_default_are_the_anchors() -> None:
    agent = CompilerAgent()
    assert isinstance(agent, AnchoringAgent)
    proposals = _all(agent, AgentContext(problem=resolve_problem("rmsnorm"), device="cuda"))
    assert [agent.is_anchor(p) for p in proposals] == [True, True] + [False] * (len(proposals) - 2)


def test_compile_default_found_failing_on_cuda_gives_way_to_eager() -> None:
    failing = Conclusion(
        id="c-1",
        agent="peer",
        strategy="compiler",
        claim="variant compile-default fails (RUNTIME_ERROR) on rmsnorm (attempt 2)",
        scope=ConclusionScope(problem="rmsnorm"),
        evidence=[Evidence(attempt_index=2, proposal_id="p-x", metric="status")],
        confidence=0.7,
        published_at="t",
    )
    ctx = AgentContext(problem=resolve_problem("rmsnorm"), device="cuda", conclusions=(failing,))
    tags = [p.knobs["variant"] for p in _all(CompilerAgent(), ctx)]
    assert tags[0] == "eager" and tags[-1] == "compile-default"


@pytest.mark.parametrize("name", NAMES)
def test_every_variant_is_a_valid_return_style_solution(name: str) -> None:
    problem = resolve_problem(name)
    for proposal in _all(CompilerAgent(), AgentContext(problem=problem, device="cuda")):
        solution = proposal.solution
        assert proposal.strategy == "compiler" and solution.author == "compiler"
        assert solution.spec.languages == [Language.PYTORCH]
        assert solution.spec.destination_passing_style is False
        assert solution.name == f"{name}-compiler-{proposal.knobs['variant']}"
        tree = ast.parse(solution.sources[0].content)
        runs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
        assert [a.arg for a in runs[-1].args.args] == list(problem.definition.inputs)


def test_seen_ids_and_own_attempts_are_skipped() -> None:
    problem = resolve_problem("softmax")
    ids = [p.id for p in _all(CompilerAgent(), AgentContext(problem=problem))]
    proposal = CompilerAgent().propose(AgentContext(problem=problem, seen_ids=frozenset(ids[:1])))
    assert proposal is not None and proposal.id == ids[1]
    assert CompilerAgent().propose(AgentContext(problem=problem, seen_ids=frozenset(ids))) is None


@pytest.mark.parametrize("name", NAMES)
def test_eager_variant_matches_the_reference(cpu_results: dict[str, dict], name: str) -> None:
    result = cpu_results[f"{name}/eager"]
    assert result["ok"], result["detail"]


def test_the_checker_rejects_a_wrong_candidate(cpu_results: dict[str, dict]) -> None:
    result = cpu_results["softmax/wrong"]
    assert not result["ok"] and "matched ratio" in result["detail"]


@pytest.mark.slow
def test_compile_variants_match_the_reference_on_cpu(tmp_path: Path) -> None:
    problem = resolve_problem("rmsnorm")
    cases = [case_for(problem, smallest_workload(problem))]
    proposals = _all(CompilerAgent(), AgentContext(problem=problem, device="cpu"))[1:]
    checks = [check_entry(p.knobs["variant"], problem, p, cases) for p in proposals]
    results = run_checker(checks, "cpu", tmp_path, interpret=False, timeout=600)
    failed = {label: r["detail"] for label, r in results.items() if not r["ok"]}
    assert not failed


def _judged(proposal: Proposal | None, index: int, speedup: float | None) -> Attempt:
    assert proposal is not None
    return Attempt(
        index=index,
        problem=proposal.solution.definition,
        proposal=proposal,
        status="PASSED",
        traces=[],
        speedup=speedup,
        verdict=Verdict.CORRECT,
        started_at="t",
        finished_at="t",
    )


def test_conclusions_move_failing_variants_last_and_compiled_runs_conclude() -> None:
    problem = resolve_problem("rmsnorm")
    failing = Conclusion(
        id="c-1",
        agent="peer",
        strategy="compiler",
        claim="variant compile-max-autotune-no-cudagraphs fails (COMPILE_ERROR) on rmsnorm "
        "(attempt 3)",
        scope=ConclusionScope(problem="rmsnorm"),
        evidence=[Evidence(attempt_index=3, proposal_id="p-x", metric="status")],
        confidence=0.7,
        published_at="t",
    )
    ctx = AgentContext(problem=problem, conclusions=(failing,))
    tags = [p.knobs["variant"] for p in _all(CompilerAgent(), ctx)]
    assert tags[0] == "eager" and tags[-1] == "compile-max-autotune-no-cudagraphs"
    agent = CompilerAgent()
    eager = _judged(agent.propose(AgentContext(problem=problem)), 0, 1.0)
    compiled = _judged(agent.propose(AgentContext(problem=problem)), 1, 1.5)
    history = AgentContext(problem=problem, attempts=(eager, compiled))
    (draft,) = agent.conclude(compiled, history)
    assert draft.claim == (
        f"variant {compiled.proposal.knobs['variant']} over eager: +50% on rmsnorm "
        "(attempts 1 vs 0)"
    )
    assert agent.conclude(eager, history) == [], "the eager baseline alone shows nothing"


def test_compile_default_judged_before_eager_is_compared_when_eager_comes() -> None:
    problem = resolve_problem("rmsnorm")
    agent = CompilerAgent()
    compiled = _judged(agent.propose(AgentContext(problem=problem, device="cuda")), 0, 1.5)
    eager = _judged(agent.propose(AgentContext(problem=problem, device="cuda")), 1, 1.0)
    assert compiled.proposal.knobs["variant"] == "compile-default"
    assert agent.conclude(compiled, AgentContext(problem=problem, attempts=(compiled,))) == []
    history = AgentContext(problem=problem, attempts=(compiled, eager))
    (draft,) = agent.conclude(eager, history)
    assert draft.claim == "variant compile-default over eager: +50% on rmsnorm (attempts 0 vs 1)"


def test_compiled_variants_pin_inductor_options_and_scan_clean() -> None:
    problem = resolve_problem("rmsnorm")
    proposals = _all(CompilerAgent(), AgentContext(problem=problem, device="cuda"))
    for proposal in [p for p in proposals if p.knobs["compiled"]]:
        source = proposal.solution.sources[0].content
        (call,) = [line for line in source.splitlines() if "_kernelarc_torch.compile(" in line]
        assert call.endswith("options=_compile_options)") and "mode=" not in call
        assert f"_compile_options.update({PINNED_OPTIONS!r})" in source
        assert not blocking(scan_solution(proposal.solution)), proposal.knobs["variant"]


#: Runs every CPU compiled variant of rmsnorm over its three workloads' shapes in one fresh
#: process with an empty Inductor cache, recording every Python thread started (argv[1]: a JSON
#: list of [tag, source]); prints a JSON map tag -> names of the threads started.
_THREAD_PROBE = """
import json, sys, threading, types
import torch
started = []
original = threading.Thread.start
def start(thread):
    started.append(thread.name)
    original(thread)
threading.Thread.start = start
found = {}
for tag, source in json.loads(sys.argv[1]):
    module = types.ModuleType(tag.replace("-", "_"))
    exec(compile(source, tag, "exec"), module.__dict__)
    before = len(started)
    for tokens, hidden in ((16, 256), (64, 1024), (200, 768)):
        x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
        weight = torch.randn(hidden, dtype=torch.bfloat16)
        for _ in range(3):
            module.run(x, weight)
    found[tag] = started[before:]
print(json.dumps(found))
"""


@pytest.mark.slow
def test_compiled_variants_compile_in_the_calling_thread(tmp_path: Path) -> None:
    """No compile pool: a cold compile of every shape starts no Python thread at all, so none
    can start after a first call either (with several compile threads Inductor starts a pool;
    on CUDA its idle timer thread starts whenever a job's answer arrives)."""
    problem = resolve_problem("rmsnorm")
    proposals = _all(CompilerAgent(), AgentContext(problem=problem, device="cpu"))[1:]
    variants = [[p.knobs["variant"], p.solution.sources[0].content] for p in proposals]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", _THREAD_PROBE, json.dumps(variants)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    started = json.loads(done.stdout.strip().splitlines()[-1])
    assert started == {tag: [] for tag, _ in variants}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["compile-max-autotune-no-cudagraphs", "compile-default"])
def test_compiled_variants_pass_every_workload_in_the_sandbox_every_time(variant: str) -> None:
    """A compiled variant (with a mode's options, and without) through LocalSandbox on every
    workload, twice: cold (it compiles every shape), then warm (the identity's cache). The
    runner's uid has no passwd entry here (as on the GPU host), and the thread checks see the
    whole compile: PASSED both times, never REWARD_HACK or a crash in getpass."""
    problem = resolve_problem("rmsnorm")
    proposal = next(
        p
        for p in _all(CompilerAgent(), AgentContext(problem=problem, device="cpu"))
        if p.knobs["variant"] == variant
    )
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=proposal.solution,
        device="cpu",
        seed=200,
        correctness_rounds=2,
        timing=TimingConfig(warmup=2, iterations=10),
        problem_dir=str(problem.path),
    )
    nameless = next(n for n in range(65533, 1000, -1) if not _has_account(n))
    identity = (nameless, nameless)
    with LocalSandbox(user=identity, spare_user=identity) as sandbox:
        results = [sandbox.evaluate(request, timeout_s=500) for _ in range(2)]
    for result in results:
        statuses = [t.evaluation.status for t in result.traces if t.evaluation is not None]
        logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
        assert statuses == [EvalStatus.PASSED] * len(problem.workloads), logs


def _has_account(number: int) -> bool:
    try:
        pwd.getpwuid(number)
    except KeyError:
        return False
    return True


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["compile-default", "compile-max-autotune-no-cudagraphs"])
def test_compiled_variants_pass_again_from_the_hosts_jit_cache_on_cuda(
    variant: str, tmp_path: Path
) -> None:
    """A compiled variant evaluated twice by a sandbox with the host's JIT cache: the second run
    starts from the first run's Inductor and Triton caches in a new runner dir and must PASS
    (it was a RUNTIME_ERROR: the restored graph named the first dir for its autotune cache)."""
    problem = resolve_problem("rmsnorm", "workload_gpu.jsonl")
    proposal = next(
        p
        for p in _all(CompilerAgent(), AgentContext(problem=problem, device="cuda"))
        if p.knobs["variant"] == variant
    )
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads)[:2],
        solution=proposal.solution,
        device="cuda",
        seed=7,
        correctness_rounds=2,
        timing=TimingConfig(warmup=2, iterations=10),
        problem_dir=str(problem.path),
    )
    with LocalSandbox(build_cache=tmp_path / "cache", warm_spare=False) as sandbox:
        results = [sandbox.evaluate(request, timeout_s=500) for _ in range(2)]
    assert [r.jit_cache_hit for r in results] == [False, True]
    for result in results:
        statuses = [t.evaluation.status for t in result.traces if t.evaluation is not None]
        logs = [t.evaluation.log[-1500:] for t in result.traces if t.evaluation is not None]
        assert statuses == [EvalStatus.PASSED] * len(request.workloads), logs
