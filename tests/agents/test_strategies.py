"""The offline strategy agents: which problems they serve, which knobs they move, how conclusions
and drafts steer them, and what they conclude."""

import json
from pathlib import Path

import pytest
from agent_checks import (
    FAMILY,
    case_for,
    check_entry,
    edited_problem,
    run_checker,
    smallest_workload,
)

from kernelarc.agents import AgentContext, DraftOrder, make_team
from kernelarc.agents.strategy.kinds import (
    FusionAgent,
    LibraryAgent,
    MemoryAgent,
    PipeliningAgent,
    PrecisionAgent,
    TilingAgent,
)
from kernelarc.agents.triton.gemm_template_knobs import GEMM_SMEM_LIMIT_BYTES, gemm_smem_bytes
from kernelarc.agents.triton.template_knobs import TRITON_STRATEGIES, knob_owner, triton_space
from kernelarc.agents.triton.template_library import (
    TEMPLATES,
    KernelTemplate,
    match_template,
    render_source,
)
from kernelarc.coordination import ConclusionBoard
from kernelarc.guard import blocking, scan_solution
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.problems.files import Problem, load_problem
from kernelarc.schema import Attempt, Proposal, Verdict, utc_now
from kernelarc.schema.coordination import Conclusion, ConclusionScope, Evidence

RMSNORM = resolve_problem("rmsnorm")
GEMM = resolve_problem("gemm_bias_gelu")
SETTING_KEYS = ("space", "template")


def _judged(
    proposal: Proposal, index: int, speedup: float | None, status: str = "PASSED"
) -> Attempt:
    return Attempt(
        index=index,
        problem=proposal.solution.definition,
        proposal=proposal,
        status=status,
        traces=[],
        speedup=speedup,
        latency_ms=1.0 / speedup if speedup else None,
        verdict=Verdict.CORRECT if speedup else Verdict.FAILED,
        started_at="t",
        finished_at="t",
    )


def _cuda(**fields: object) -> AgentContext:
    """A CUDA context on rmsnorm (the GPU knob grids; nothing runs here)."""
    return AgentContext(problem=RMSNORM, device="cuda", **fields)  # type: ignore[arg-type]


def _setting(proposal: Proposal) -> dict[str, object]:
    return {k: v for k, v in proposal.knobs.items() if k not in SETTING_KEYS}


def _conclusion(cid: str, claim: str) -> Conclusion:
    return Conclusion(
        id=cid,
        agent="peer",
        strategy="peer",
        claim=claim,
        scope=ConclusionScope(problem="rmsnorm"),
        evidence=[Evidence(attempt_index=0, proposal_id="p-0", metric="status")],
        confidence=0.5,
        published_at=utc_now(),
    )


@pytest.mark.parametrize(
    ("problem", "device", "serving"),
    [
        (RMSNORM, "cpu", {"tiling", "memory", "fusion", "pipelining", "compiler"}),
        (GEMM, "cpu", {"tiling", "fusion", "precision", "library", "compiler"}),
        (GEMM, "cuda", {"tiling", "fusion", "pipelining", "precision", "library", "compiler"}),
    ],
)
def test_which_strategies_serve_a_problem(problem: Problem, device: str, serving: set[str]) -> None:
    # Each agent alone (no dedupe against teammates): does it have anything to propose?
    found = set()
    for agent in make_team(
        ["tiling", "memory", "fusion", "pipelining", "precision", "library", "compiler"], seed=0
    ):
        proposal = agent.propose(AgentContext(problem=problem, device=device))
        if proposal is not None:
            found.add(agent.strategy)
            assert not blocking(scan_solution(proposal.solution)), proposal.id
    # Pipelining on the CPU grid has one warps value; memory on gemm has one GROUP_M value: the
    # default setting is still proposed when the agent is alone.
    assert serving <= found
    assert ("precision" in found) == ("library" in found) == (problem is GEMM)


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_problem_is_served_by_the_triton_strategies(name: str) -> None:
    problem = resolve_problem(name)
    ctx = AgentContext(problem=problem, device="cuda")
    for cls in (TilingAgent, MemoryAgent, PipeliningAgent, FusionAgent):
        proposal = cls(seed=0).propose(ctx)
        assert proposal is not None, (cls.strategy, name)
        # Fusion works on the kernels generated from the traced reference (one fused kernel per
        # group of ops); the other Triton strategies tune the hand-written template.
        expected = "triton/gen" if cls is FusionAgent else f"triton/{FAMILY[name]}"
        assert proposal.knobs["space"] == expected, (cls.strategy, name)
        assert not blocking(scan_solution(proposal.solution)), proposal.id
    # Library and precision variants rewrite a matmul; every other problem is not theirs.
    matmul = name == "gemm_bias_gelu"
    for torch_cls in (LibraryAgent, PrecisionAgent):
        assert (torch_cls(seed=0).propose(ctx) is not None) == matmul, (torch_cls.strategy, name)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.family)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_template_knob_has_an_owner_and_every_kind_is_owned(
    template: KernelTemplate, device: str
) -> None:
    # Each knob of the library belongs to one Triton strategy; each kind of knob the template
    # has (by the library's own group and the memory-access names) is owned by its strategy,
    # and the strategy has a choice among its knobs wherever the device's grid offers one.
    space = template.knob_space(device)
    owners = {d.name: knob_owner(d.name, d.group) for d in template.dims}
    assert set(owners.values()) <= set(TRITON_STRATEGIES), owners
    kinds = {
        "tiling": {d.name for d in template.dims if d.group == "tile"}
        - {"VEC", "BLOCK_H", "BLOCK_D"},
        "pipelining": {d.name for d in template.dims if d.group == "launch"},
        "memory": set(owners) & {"VEC", "GROUP_M", "BLOCK_H", "BLOCK_D"},
        "fusion": set(owners) & {"PERSISTENT"},
    }
    for strategy, names in kinds.items():
        owned = {n for n in owners if owners[n] == strategy}
        assert names <= owned, (strategy, names, owned)
        if any(len(space[n]) > 1 for n in names):
            assert any(len(space[n]) > 1 for n in owned), (strategy, space)


@pytest.mark.parametrize("name", builtin_names())
def test_triton_space_starts_from_the_library_default(name: str) -> None:
    problem = resolve_problem(name)
    found = match_template(problem)
    assert not isinstance(found, list), found
    template, _ = found
    for device in ("cpu", "cuda"):
        space = triton_space(problem, device)
        assert not isinstance(space, str), space
        knob_space, _ = space
        assert dict(knob_space.default) == template.default_knobs(device)
        assert set(knob_space.owners) == set(template.knob_names)
        assert all(knob_space.owners.values()), knob_space.owners
        if device == "cuda":  # the GPU grid has a choice in every strategy's knobs
            for strategy in ("tiling", "memory", "pipelining", "fusion"):
                assert knob_space.owned_by(strategy), (strategy, name)


def test_knob_ownership_by_name() -> None:
    owners = {
        name: knob_owner(name)
        for name in (
            "ROWS",
            "BLOCK_M",
            "BLOCK_K",
            "BLOCK_HEADS",
            "BLOCK_H",
            "BLOCK_D",
            "VEC",
            "GROUP_M",
            "NUM_WARPS",
            "NUM_STAGES",
            "PERSISTENT",
            "FUSE_RESIDUAL",
            "ACC_DTYPE",
            "FLASH",
            "FLASH_N",
            "FLASH_DOT16",
        )
    }
    assert owners == {
        "FLASH": "fusion",
        "FLASH_N": "tiling",
        "FLASH_DOT16": "precision",
        "ROWS": "tiling",
        "BLOCK_M": "tiling",
        "BLOCK_K": "tiling",
        "BLOCK_HEADS": "tiling",
        "BLOCK_H": "memory",
        "BLOCK_D": "memory",
        "VEC": "memory",
        "GROUP_M": "memory",
        "NUM_WARPS": "pipelining",
        "NUM_STAGES": "pipelining",
        "PERSISTENT": "fusion",
        "FUSE_RESIDUAL": "fusion",
        "ACC_DTYPE": "precision",
    }
    # A name no rule knows falls back to the library's knob group, and is unowned without one.
    assert knob_owner("SPLIT_K") == "fusion"
    assert knob_owner("WAVES", "launch") == "pipelining"
    assert knob_owner("WAVES", "tile") == "tiling"
    assert knob_owner("WAVES") == ""


@pytest.mark.parametrize(
    ("cls", "owned"),
    [
        (TilingAgent, {"ROWS"}),
        (MemoryAgent, {"BLOCK_H", "VEC"}),
        (PipeliningAgent, {"NUM_WARPS", "NUM_STAGES"}),
        # Fusion tunes the generated kernels: for a norm, whole rows in registers or a loop.
        (FusionAgent, {"PERSISTENT", "PERSISTENT_MAX"}),
    ],
)
def test_a_strategy_moves_only_its_knobs_around_its_incumbent(cls: type, owned: set[str]) -> None:
    agent = cls(seed=3)
    first = agent.propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert first is not None and first.parent_id is None and first.strategy == agent.strategy
    history = (_judged(first, 0, 1.5),)
    seen = {first.id}
    for index in range(1, 3):  # every owned subset has at least two one-knob moves
        ctx = AgentContext(
            problem=RMSNORM, device="cuda", attempts=history, seen_ids=frozenset(seen)
        )
        proposal = agent.propose(ctx)
        assert proposal is not None
        assert proposal.parent_id == first.id, "coordinate moves around the incumbent"
        changed = {k for k, v in _setting(proposal).items() if _setting(first)[k] != v}
        assert len(changed) == 1 and changed <= owned, changed
        seen.add(proposal.id)
        history = (*history, _judged(proposal, index, 1.0))


def test_same_setting_from_two_strategies_is_one_proposal() -> None:
    ctx = AgentContext(problem=RMSNORM, device="cpu")
    tiling, memory = TilingAgent(seed=0).propose(ctx), MemoryAgent(seed=5).propose(ctx)
    assert tiling is not None and memory is not None
    assert tiling.id == memory.id and tiling.agent != memory.agent


def test_conclusions_steer_the_start_and_the_order_of_moves() -> None:
    # Without advice an agent starts from the library's first prior (BLOCK_H 16384, 8 warps).
    default = match_template(RMSNORM)
    assert not isinstance(default, list)
    prior = default[0].default_knobs("cuda")
    plain = MemoryAgent(seed=0).propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert plain is not None and _setting(plain) == prior
    advice = (
        _conclusion("c-1", "BLOCK_H 4096 over 16384: +30% on rmsnorm (attempts 4 vs 2)"),
        _conclusion("c-2", "NUM_WARPS 4 fails (COMPILE_ERROR) on rmsnorm (attempt 6)"),
    )
    steered = MemoryAgent(seed=0).propose(
        AgentContext(problem=RMSNORM, device="cuda", conclusions=advice)
    )
    assert steered is not None and steered.knobs["BLOCK_H"] == 4096
    # Pipelining: the failing value is tried last (after NUM_WARPS 16 and NUM_STAGES 2).
    agent = PipeliningAgent(seed=0)
    start = agent.propose(AgentContext(problem=RMSNORM, device="cuda", conclusions=advice))
    assert start is not None and start.knobs["NUM_WARPS"] != 4
    history = (_judged(start, 0, 1.0),)
    order = []
    for _ in range(3):
        ctx = AgentContext(
            problem=RMSNORM,
            device="cuda",
            attempts=history,
            conclusions=advice,
            seen_ids=frozenset(a.proposal.id for a in history),
        )
        move = agent.propose(ctx)
        assert move is not None
        order.append(move.knobs["NUM_WARPS"])
        history = (*history, _judged(move, len(history), 0.5))
    assert order[-1] == 4, order


def test_a_draft_starts_from_the_global_best_setting() -> None:
    tiling = TilingAgent(seed=9)
    default = tiling.propose(_cuda())
    assert default is not None
    moved = tiling.propose(_cuda(seen_ids=frozenset({default.id})))
    assert moved is not None and moved.knobs["ROWS"] != default.knobs["ROWS"]
    best = _judged(moved, 7, 2.0)  # a peer's attempt away from the default is the global best
    agent = PipeliningAgent(seed=0)
    own = _judged(agent.propose(_cuda()) or default, 0, 1.0)
    seen = frozenset({own.proposal.id, best.proposal.id})
    draft = DraftOrder(source="global_best", base=best, reason="flat")
    proposal = agent.propose(_cuda(attempts=(own,), draft=draft, seen_ids=seen))
    assert proposal is not None and proposal.parent_id == best.proposal.id
    changed = {k for k, v in _setting(proposal).items() if _setting(moved)[k] != v}
    assert len(changed) == 1 and changed <= {"NUM_WARPS", "NUM_STAGES"}, (
        "one owned knob away from the global best"
    )
    fresh = DraftOrder(source="reference", base=None, reason="flat")
    line = agent.propose(_cuda(attempts=(own,), draft=fresh, seen_ids=seen))
    assert line is not None and line.parent_id is None, "a fresh line from the reference"


def test_conclude_publishes_findings_the_board_accepts(tmp_path: Path) -> None:
    agent = TilingAgent(seed=1)
    first = agent.propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert first is not None
    parent = _judged(first, 0, 1.0)
    board = ConclusionBoard("rmsnorm", "rmsnorm", tmp_path / "c.jsonl")
    board.observe(parent)
    results = []
    for index, (speedup, status) in enumerate(
        [(1.3, "PASSED"), (1.01, "PASSED"), (None, "COMPILE_ERROR")], start=1
    ):
        ctx = AgentContext(
            problem=RMSNORM,
            device="cuda",
            attempts=(parent,),
            seen_ids=frozenset([*results, first.id]),
        )
        proposal = agent.propose(ctx)
        assert proposal is not None
        results.append(proposal.id)
        attempt = _judged(proposal, index, speedup, status)
        board.observe(attempt)
        drafts = agent.conclude(attempt, ctx)
        published = [board.publish(agent.name, agent.strategy, d) for d in drafts]
        if index == 1:
            (conclusion,) = published
            assert conclusion.claim.startswith("ROWS ") and "over" in conclusion.claim
            assert "+30% on rmsnorm (attempts 1 vs 0)" in conclusion.claim
        elif index == 2:
            assert published == [], "a 1% change is noise: no conclusion"
        else:
            (conclusion,) = published
            assert "fails (COMPILE_ERROR) on rmsnorm (attempt 3)" in conclusion.claim


def test_library_and_precision_variants_are_correct_on_cpu(tmp_path: Path) -> None:
    checks = []
    relu_ref = (
        "import torch\n\n\ndef run(a, weight, bias):\n"
        "    y = torch.nn.functional.linear(a.float(), weight.float(), bias.float())\n"
        "    return torch.relu(y).to(torch.bfloat16)\n"
    )
    edit = {"name": "gemm_bias_relu", "reference": relu_ref}
    relu = edited_problem(tmp_path / "relu", "gemm_bias_gelu", edit)
    for problem in (GEMM, relu):
        cases = [case_for(problem, smallest_workload(problem))]
        for cls in (LibraryAgent, PrecisionAgent):
            agent, seen = cls(seed=0), set()
            while (
                proposal := agent.propose(
                    AgentContext(problem=problem, device="cpu", seen_ids=frozenset(seen))
                )
            ) is not None:
                seen.add(proposal.id)
                label = f"{problem.name}/{cls.strategy}/{proposal.rationale}"
                checks.append(check_entry(label, problem, proposal, cases))
    labels = [c["label"] for c in checks]
    sources = {c["label"]: c["source"] for c in checks}
    for problem, use_gelu in ((GEMM, True), (relu, False)):
        fused = [
            sources[label]
            for label in labels
            if label.startswith(f"{problem.name}/") and "addmm_activation" in label
        ]
        assert fused and all(f"use_gelu={use_gelu}" in source for source in fused), labels
    assert any("compute_dtype=bfloat16" in label for label in labels)
    results = run_checker(checks, "cpu", tmp_path, interpret=False)
    assert all(r["ok"] for r in results.values()), results


def test_float32_gemm_operands_give_the_precision_agent_the_dot_precision(tmp_path: Path) -> None:
    # The template's float32 products were IEEE only (5.1 ms where cuBLAS took 0.35 on an H100);
    # DOT_PRECISION (TF32x3 first, then TF32, IEEE) is the precision agent's, and moot for bf16.
    inputs = {
        "a": {"shape": ["M", "K"], "dtype": "float32"},
        "weight": {"shape": ["N", "K"], "dtype": "float32"},
        "bias": {"shape": ["N"], "dtype": "float32"},
    }
    fp32 = edited_problem(tmp_path, "gemm_bias_gelu", {"inputs": inputs})
    spaces = {}
    for problem in (fp32, GEMM):
        found = triton_space(problem, "cuda")
        assert not isinstance(found, str), found
        spaces[problem.definition.inputs["a"].dtype.value] = found
    space, match = spaces["float32"]
    assert space.options["DOT_PRECISION"] == (0, 1, 2) and space.default["DOT_PRECISION"] == 2
    assert space.owners["DOT_PRECISION"] == "precision"
    assert "DOT_PRECISION" in space.owned_by("precision")
    bf16_space, _ = spaces["bfloat16"]
    assert bf16_space.options["DOT_PRECISION"] == (2,)
    source = render_source(match, {**space.default, "DOT_PRECISION": 1}, "fp32")
    assert "DOT_PRECISION = 1\n" in source
    # float32 tiles take twice the shared memory: a setting that fits 16-bit operands (288 KiB
    # asked of Triton on an H100, suite run 15) is out for float32 ones, and the default moves.
    big = {**bf16_space.default, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 4}
    assert bf16_space.allowed(big) and not space.allowed({**big, "DOT_PRECISION": 2})
    assert gemm_smem_bytes(space.default, 4) <= GEMM_SMEM_LIMIT_BYTES


def test_the_library_agent_leaves_a_convolution_alone(tmp_path: Path) -> None:
    # cuDNN runs it whatever the BLAS settings; bf16 autocast (precision) still changes it.
    conv = {
        "name": "conv_only",
        "op_type": "conv",
        "axes": {"N": {"type": "var"}},
        "inputs": {
            "x": {"shape": ["N", 4, 8, 8], "dtype": "float32"},
            "weight": {"shape": [4, 4, 3, 3], "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["N", 4, 6, 6], "dtype": "float32"}},
        "reference": "import torch.nn.functional as F\n\ndef run(x, weight):\n"
        "    return F.conv2d(x, weight)\n",
    }
    target = tmp_path / "conv_only"
    target.mkdir()
    (target / "definition.json").write_text(json.dumps(conv))
    workload = {"uuid": "n2", "axes": {"N": 2}, "inputs": {}}
    (target / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    problem = load_problem(target)
    library = LibraryAgent(seed=0).space_for(problem, "cuda")
    assert isinstance(library, str) and "no matrix product" in library
    assert not isinstance(PrecisionAgent(seed=0).space_for(problem, "cuda"), str)
    assert not isinstance(LibraryAgent(seed=0).space_for(GEMM, "cuda"), str)
