"""Split reductions: a reduction with few outputs and long rows runs in two stages. The CPU
shapes here are small, so a setting with SPLIT_R forces the split (it is off by default on the
CPU); the results are checked against the reference under Triton's interpreter."""

import re
from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, generate_problem
from reference_check import assert_match_reference

from kernelarc.kernelgen import relevant_knobs
from kernelarc.kernelgen.knobs import SPLIT_MIN_CHUNK
from kernelarc.kernelgen.split_reductions import split_factor

SPLIT = {"SPLIT_R": 8}
VARIANTS = {
    "split": SPLIT,
    "split-looped": {**SPLIT, "PERSISTENT_MAX": 16, "BLOCK_R": 16, "ROWS": 4},
}


def _check(
    traced: Traced,
    run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    device: str,
    variants: dict[str, dict[str, int]],
) -> None:
    sources: dict[tuple[str, str], str] = {}
    for name in ("batch_stats", "scalar_losses", "reductions"):
        for variant, knobs in variants.items():
            generated = generate_problem(traced, name, knobs, device)
            assert generated.split, f"{name}/{variant}: nothing was split"
            sources[name, variant] = generated.source
    assert_match_reference(traced, run_checks, device, sources)


def test_split_reductions_match_the_reference(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    _check(gen_problems, run_checks, "cpu", VARIANTS)


@pytest.mark.gpu
def test_split_reductions_match_the_reference_on_cuda(
    gen_problems: Traced,
    run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # These rows are shorter than two CUDA chunks (SPLIT_MIN_CHUNK): lowered so they split.
    monkeypatch.setitem(SPLIT_MIN_CHUNK, "cuda", 16)
    variants = {"split": SPLIT, "split-looped": {**SPLIT, "PERSISTENT_MAX": 16, "BLOCK_R": 16}}
    _check(gen_problems, run_checks, "cuda", variants)


def test_a_split_reduction_runs_in_two_stages(gen_problems: Traced) -> None:
    # BatchNorm: one kernel (4 rows per program) unsplit; split, the mean and M2 (one Welford
    # pair) take a stage-1 and a stage-2 kernel, then the normalisation.
    plain = generate_problem(gen_problems, "batch_stats", {})
    assert (plain.split, plain.kernels) == ((), 1)
    bn = generate_problem(gen_problems, "batch_stats", SPLIT)
    assert (bn.split, bn.kernels) == (("welford_mean", "welford_m2"), 3)
    assert bn.kinds == frozenset({"pointwise", "reduction"})
    assert "2 reduction(s) split in two stages" in bn.summary()
    # Six scalar reductions of the same rows share one stage-1 kernel (with the losses'
    # arithmetic fused into it: no pointwise kernel) and one stage-2 kernel; the argmax keeps
    # its own, unsplit.
    losses = generate_problem(gen_problems, "scalar_losses", SPLIT)
    assert sorted(losses.split) == ["any", "max", "sum", "sum", "sum", "sum"]
    assert (losses.kernels, losses.kinds) == (3, frozenset({"reduction"}))
    # Partials in float32 for the bf16 sum and max, int64 for the count, bool for any()
    # (per workload).
    partials = re.findall(r"torch\.empty\(\(1, \d+, 1\), dtype=torch\.(\w+)", losses.source)
    assert sorted(partials) == ["bool"] * 2 + ["float32"] * 8 + ["int64"] * 2


def test_an_arg_reduction_is_never_split(gen_problems: Traced) -> None:
    # x.argmax(dim=-1) over (A, 6, 40): long enough rows and few enough outputs to split...
    assert split_factor(3 * 6, (40,), SPLIT["SPLIT_R"], "cpu") > 1
    generated = generate_problem(gen_problems, "reductions", SPLIT)
    # ...but only the sum, the max and the mean's sum are.
    assert sorted(generated.split) == ["max", "sum", "sum"]
    losses = generate_problem(gen_problems, "scalar_losses", SPLIT)
    assert "argmax" not in losses.split


def test_split_r_is_a_knob_only_where_some_reduction_qualifies(gen_problems: Traced) -> None:
    # Off by default on the CPU, but the statistics of these shapes would split there.
    bn = generate_problem(gen_problems, "batch_stats", {})
    assert bn.split == () and "SPLIT_R" in relevant_knobs(bn)
    # On CUDA rows of 100 to 300 elements are too short to split; no reduction, no knob.
    norm = generate_problem(gen_problems, "add_layernorm_logsoftmax", {}, "cuda")
    assert "reduction" in norm.kinds and "SPLIT_R" not in relevant_knobs(norm)
    assert "SPLIT_R" not in relevant_knobs(generate_problem(gen_problems, "bias_gelu_scale", {}))


def test_split_factor_rules() -> None:
    # KernelBench BatchNorm on an H200: 64 channels of 16.7M elements each.
    assert split_factor(64, (64, 512, 512), 1024, "cuda") == 1024
    assert split_factor(64, (64, 512, 512), 0, "cuda") == 1  # the knob is off
    # 264 outputs fill 132 SMs at one or two per program (the ROWS knob's business).
    assert split_factor(263, (64, 512, 512), 1024, "cuda") > 1
    assert split_factor(264, (64, 512, 512), 1024, "cuda") == 1
    # Each partial reduces at least SPLIT_MIN_CHUNK elements (2048 on CUDA).
    assert split_factor(1, (1 << 14,), 1024, "cuda") == 8
    assert split_factor(1, (1 << 11,), 1024, "cuda") == 1
    # No divisor near the target: no split (10007 is prime).
    assert split_factor(1, (10007,), 8, "cpu") == 1
    # A cut on the dims' boundaries wins over the nearest divisor: 192 = 3 x 64 elements in
    # 6 chunks of 32 (8 chunks of 24 would straddle the rows of 64).
    assert split_factor(1, (3, 64), 8, "cpu") == 6
