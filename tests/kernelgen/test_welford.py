"""Variances in one pass: a variance's mean and M2 (the sum of squared deviations) are one
Welford pair, computed in one loop over looped rows, in registers on whole-row tiles, and split
in two stages that merge partial statistics; VAR_ONEPASS=0 keeps the two-sum lowering.
Checked against the reference under Triton's interpreter (and on CUDA with every problem of
gen_problems.py in test_generate.py's gpu-marked test)."""

from collections.abc import Callable
from typing import Any

from gen_problems import Traced, generate_problem
from reference_check import assert_match_reference

from kernelarc.kernelgen import relevant_knobs

LOOPED = {"PERSISTENT_MAX": 16, "BLOCK_R": 16, "ROWS": 4}
SPLIT = {"SPLIT_R": 8}


def test_variances_match_the_reference_in_one_pass_split_and_two_passes(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    # Default and looped one-pass settings are checked with every family (test_generate.py).
    variants = {
        "split": SPLIT,
        "split-looped": {**SPLIT, **LOOPED},
        "two-pass-looped": {**LOOPED, "VAR_ONEPASS": 0},
    }
    sources: dict[tuple[str, str], str] = {}
    for name in ("variances", "batch_stats"):
        for variant, knobs in variants.items():
            generated = generate_problem(gen_problems, name, knobs)
            if "SPLIT_R" in knobs:
                assert "welford_m2" in generated.split, f"{name}/{variant}"
            sources[name, variant] = generated.source
    assert_match_reference(gen_problems, run_checks, "cpu", sources)


def test_a_looped_norm_reads_its_rows_twice_not_three_times(gen_problems: Traced) -> None:
    one = generate_problem(gen_problems, "add_layernorm_logsoftmax", LOOPED)
    two = generate_problem(gen_problems, "add_layernorm_logsoftmax", {**LOOPED, "VAR_ONEPASS": 0})
    # LayerNorm statistics + normalised stores, log-softmax's max+sum and its stores: the
    # statistics' pass and the stores' pass of each row kernel; two-pass adds the variance's.
    assert (one.passes, two.passes) == (3, 4)
    group = generate_problem(gen_problems, "variances", LOOPED)
    assert group.passes == 2
    # Two sums per variance (the mean's, the squared deviations'), then the stores.
    assert generate_problem(gen_problems, "variances", {**LOOPED, "VAR_ONEPASS": 0}).passes >= 3
    # Whole rows in one tile: one read either way.
    assert generate_problem(gen_problems, "variances", {}).passes == 1
    assert "VAR_ONEPASS" in relevant_knobs(group)
    assert "VAR_ONEPASS" not in relevant_knobs(generate_problem(gen_problems, "reductions", {}))


def test_a_split_variance_merges_partial_statistics(gen_problems: Traced) -> None:
    # BatchNorm split: one stage-1 kernel computes each chunk's mean and M2, one stage-2
    # kernel merges them, then the normalisation; two sums take two kernels each.
    one = generate_problem(gen_problems, "batch_stats", SPLIT)
    assert (sorted(one.split), one.kernels) == (["welford_m2", "welford_mean"], 3)
    two = generate_problem(gen_problems, "batch_stats", {**SPLIT, "VAR_ONEPASS": 0})
    assert (two.split, two.kernels) == (("sum", "sum"), 5)
