"""The generator on problems written for these tests: correct on every workload (under Triton's
interpreter here, on CUDA in the gpu-marked test), the fusion it promises, static rules, and
the reference fallback for signatures nobody traced."""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, generate_problem
from reference_check import assert_match_reference

from kernelarc.guard.static_rules import blocking, scan_solution
from kernelarc.kernelgen import (
    GenerationError,
    default_knobs,
    generate,
    relevant_knobs,
)
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import Kind
from kernelarc.kernelgen.knobs import MAX_KERNEL_LOADS
from kernelarc.schema import BuildSpec, Language, Solution, SourceFile, TargetHardware

#: CPU settings that change the kernels' shape: looped reductions with small chunks, matmuls
#: as Triton GEMMs or as torch calls, convolutions channels-last.
CPU_VARIANTS: dict[str, dict[str, int]] = {
    "default": {},
    "looped": {
        "PERSISTENT_MAX": 16,
        "BLOCK_R": 16,
        "ROWS": 4,
        "FUSE_GEMM": 0,
        "LAYOUT_CONV": 1,
        # Attention in 16 x 16 tiles: programs whose rows have no key at all, and causal
        # programs that skip the key blocks above the diagonal.
        "FLASH_M": 16,
        "FLASH_N": 16,
    },
    "gemm-tf32": {"FUSE_GEMM": 1, "DOT_PRECISION": 1, "BLOCK_X": 64},
    # Attention that scaled_dot_product_attention computes exactly: that torch call.
    "sdpa": {"FUSE_SDPA": 1},
}


def test_every_family_matches_the_reference_under_the_interpreter(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    sources = {
        (name, variant): generate_problem(gen_problems, name, knobs).source
        for name in gen_problems
        for variant, knobs in CPU_VARIANTS.items()
    }
    assert_match_reference(gen_problems, run_checks, "cpu", sources)


@pytest.mark.gpu
def test_every_family_matches_the_reference_on_cuda(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    variants = {
        "default": {},
        "unfused-gemm": {"FUSE_GEMM": 0},
        "tf32x3": {"DOT_PRECISION": 2},
        "looped": {
            "PERSISTENT_MAX": 1024,
            "BLOCK_R": 64,
            "FLASH_M": 16,
            "FLASH_N": 16,
            "FUSE_SDPA": 0,
        },
        "flash-kernel": {"FUSE_SDPA": 0},  # the default calls scaled_dot_product_attention
    }
    sources = {
        (name, variant): generate_problem(gen_problems, name, knobs, "cuda").source
        for name in gen_problems
        for variant, knobs in variants.items()
    }
    assert_match_reference(gen_problems, run_checks, "cuda", sources, every_workload_planned=False)


def test_what_is_fused(gen_problems: Traced) -> None:
    one = generate_problem(gen_problems, "bias_gelu_scale", {})
    assert (one.kernels, one.kinds, one.externs) == (1, frozenset({"pointwise"}), ())
    assert "s0" in one.source  # the scalar input is a kernel argument, not a baked constant
    norm = generate_problem(gen_problems, "add_layernorm_logsoftmax", {})
    # h, y and log_softmax(y): one kernel stores all three (h is sunk into the row kernel).
    assert (norm.kernels, norm.kinds) == (1, frozenset({"reduction"}))
    # Looped rows: the log-softmax's max and its sum of exp(y - max) share one loop (online
    # rescaling), and so do the LayerNorm's mean and variance (Welford), so the kernel has
    # loops for mean+variance, max+sum and the stores.
    looped = generate_problem(gen_problems, "add_layernorm_logsoftmax", CPU_VARIANTS["looped"])
    kernels = looped.source.count("@triton.jit\ndef _kg_k")  # one per workload signature
    assert kernels >= 1
    assert looped.source.count("for roff in range") == 3 * kernels, looped.source
    fused = generate_problem(gen_problems, "linear_silu", {"FUSE_GEMM": 1})
    assert (fused.kernels, fused.kinds, fused.externs) == (1, frozenset({"gemm"}), ())
    unfused = generate_problem(gen_problems, "linear_silu", {"FUSE_GEMM": 0})
    assert unfused.externs == ("aten.addmm.default",)
    assert unfused.kinds == frozenset({"pointwise"})
    conv = generate_problem(gen_problems, "conv_relu_scale", {})
    assert "aten.convolution.default" in conv.externs
    assert conv.kinds == frozenset({"pointwise"})
    # Pooling is taps over the window in the kernels, not a torch call (its indices too).
    pool = generate_problem(gen_problems, "pooling", {})
    assert (pool.externs, pool.kinds) == ((), frozenset({"pointwise"}))
    # Constants made on the input's device: embedded (the 0-d one) or made once on the device
    # (the vector), not copied per call.
    consts = generate_problem(gen_problems, "device_constants", {})
    assert (consts.kernels, consts.externs) == (1, ("kernelarc.constant",))
    # A 16-bit GEMM whose operand is a fused prologue: on CUDA every dot is a 16-bit one (no
    # float32 operands, so no input precision), as the reference's float16 matmuls are.
    # Pooling of an overlapping pooling: the inner one is stored (two kernels, neither with
    # more than MAX_KERNEL_LOADS loads), not recomputed under every outer tap.
    nested = generate_problem(gen_problems, "pool_of_pool", {})
    assert nested.kernels == 2
    for kernel in nested.source.split("@triton.jit")[1:]:
        assert kernel.count("tl.load(") <= MAX_KERNEL_LOADS
    # Embedding lookups, x[idx], index_select and gather are loads at a loaded index.
    gathers = generate_problem(gen_problems, "gathers", {})
    assert gathers.externs == () and gathers.kernels >= 2
    assert ".to(tl.int64) * " in gathers.source  # gather offsets in 64 bits
    # Scans over the last dim are row kernels; over the first dim a torch call.
    scans = generate_problem(gen_problems, "scans", {})
    assert scans.externs == ("aten.cumsum.default",) and "reduction" in scans.kinds
    # flip(cumsum(flip(x))) is one scan from the row's end; cat([0, cumsum(x[:, :-1])]) and
    # cat([1, cumprod(..)]) one scan of the shifted row; cat([2, ...]) is not an exclusive scan.
    assert "reverse=True" in scans.source
    op_graph = gen_problems["scans"][1].workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    shifted = [
        n.reduce_op
        for n in graph.nodes.values()
        if n.kind == Kind.SCAN and graph.node(n.args[0]).target == "aten.cat.default"
    ]
    assert sorted(shifted) == ["cumprod", "cumsum"]
    # Depthwise convolutions are taps in the kernels, with their SiLU and ReLU.
    depthwise = generate_problem(gen_problems, "depthwise", {})
    assert (depthwise.externs, depthwise.kinds) == ((), frozenset({"pointwise"}))
    # Attention: one online-softmax kernel, the scores never stored (FLASH); off, or when the
    # probabilities are an output, the scores, their row statistics and the P @ V GEMM.
    for name in ("attention_causal", "sdpa_masked"):
        flash = generate_problem(gen_problems, name, {})
        assert (flash.kernels, flash.kinds, flash.externs) == (1, frozenset({"attention"}), ())
        assert "FLASH_N" in relevant_knobs(flash)
        assert "m_new" in flash.source and flash.source.count("tl.dot(") >= 2
        # 16-bit dots, as GPU attention (the generated kernel, not the SDPA call)
        cuda = generate_problem(gen_problems, name, {"FUSE_SDPA": 0}, "cuda")
        assert "input_precision" not in cuda.source
        assert generate_problem(gen_problems, name, {"FLASH": 0}).kernels == 3
        # Both masks depend on positions only: each program visits the key blocks they keep,
        # those it keeps whole without the mask.
        assert "for k0 in range(k_lo, f_lo, KBLOCK)" in flash.source
        assert "for k0 in range(f_lo, f_hi, KBLOCK)" in flash.source
    # FUSE_SDPA: the causal attention written out is one scaled_dot_product_attention call
    # (is_causal, its 1/sqrt(D) as the scale), returned through views without a copy kernel;
    # a mask that keeps padding keys out too is no causal mask: the attention kernel stays.
    sdpa = generate_problem(gen_problems, "attention_causal", {"FUSE_SDPA": 1})
    assert (sdpa.kernels, sdpa.externs) == (0, ("aten.scaled_dot_product_attention.default",))
    assert sdpa.source.count(", None, 0.0, True, scale=0.17677669529663") == 2
    assert "FUSE_SDPA" in relevant_knobs(sdpa)
    assert "FUSE_SDPA" in relevant_knobs(generate_problem(gen_problems, "attention_causal", {}))
    padded = generate_problem(gen_problems, "sdpa_masked", {"FUSE_SDPA": 1})
    assert "attention" in padded.kinds and "FUSE_SDPA" not in relevant_knobs(padded)
    for name in ("attention_window", "attention_decode"):
        bounded = generate_problem(gen_problems, name, {})
        assert "attention" in bounded.kinds
        assert "for k0 in range(k_lo, " in bounded.source
    stored = generate_problem(gen_problems, "attention_probs_out", {})
    assert "attention" not in stored.kinds and stored.kernels >= 2
    mlp = generate_problem(gen_problems, "swiglu_f16", {}, "cuda")
    assert mlp.kernels == 3 and mlp.source.count("tl.dot(") >= 3
    assert "input_precision" not in mlp.source


def test_a_scalar_the_reference_needs_as_a_number_is_baked(gen_problems: Traced) -> None:
    _, traces = gen_problems["channel_rmsnorm"]
    graph = traces.workloads[0].graph
    assert graph is not None
    kinds = {i.name: i.kind for i in graph.inputs}
    assert kinds == {"x": "tensor", "eps": "constant"}
    generated = generate_problem(gen_problems, "channel_rmsnorm", {})
    assert "_KG_BAKED = (1,)" in generated.source


@pytest.mark.parametrize("variant", sorted(CPU_VARIANTS))
def test_generated_sources_pass_the_static_rules(gen_problems: Traced, variant: str) -> None:
    for name in gen_problems:
        source = generate_problem(gen_problems, name, CPU_VARIANTS[variant]).source
        solution = Solution(
            name=name,
            definition=name,
            author="test",
            spec=BuildSpec(
                languages=[Language.TRITON],
                target_hardware=[TargetHardware.LOCAL],
                entry_point="kernel.py::run",
                destination_passing_style=False,
            ),
            sources=[SourceFile(path="kernel.py", content=source)],
        )
        assert blocking(scan_solution(solution)) == [], name


def test_an_untraced_signature_runs_the_reference(
    gen_problems: Traced,
    run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    tmp_path: Any,
) -> None:
    from gen_problems import PROBLEMS, write_problem

    definition, workloads = PROBLEMS["bias_gelu_scale"]
    source = generate_problem(gen_problems, "bias_gelu_scale", {}).source
    other = write_problem(tmp_path, "bias_gelu_scale")
    wider = [{**workloads[0], "uuid": "b5-h7", "axes": {"B": 5, "H": 7}}]
    (other / "workload.jsonl").write_text("\n".join(__import__("json").dumps(w) for w in wider))
    result = run_checks([{"label": "other", "problem": str(other), "source": source}], "cpu")
    assert result["other"] == {"ok": True, "detail": "", "planned": 0}
    del definition


def test_nothing_traced_is_an_error_with_the_reason(gen_problems: Traced) -> None:
    problem, traces = gen_problems["reductions"]
    broken = traces.model_copy(
        update={
            "workloads": [
                w.model_copy(update={"graph": None, "error": "boom"}) for w in traces.workloads
            ]
        }
    )
    with pytest.raises(GenerationError, match="boom"):
        generate(problem.definition, broken, default_knobs("cpu"), "cpu", "x")
