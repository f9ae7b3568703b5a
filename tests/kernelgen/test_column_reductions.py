"""Reductions over a dim that is not the last run the column plan: each program owns a tile of
contiguous inner positions and loops over the strided reduced axis; with few programs it is
split in two stages that are column reductions again. Checked against the reference under
Triton's interpreter (and on CUDA in the gpu-marked test)."""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, generate_problem
from reference_check import assert_match_reference

from kernelarc.kernelgen import relevant_knobs
from kernelarc.kernelgen.knobs import SPLIT_MIN_ROWS
from kernelarc.kernelgen.split_reductions import column_split_factor

COLUMN_PROBLEMS = ("column_reductions", "feature_stats")

#: Narrow tiles (several per row of 20 columns, the last one ragged) and a loop of 4 rows.
LOOPED = {"COL_X": 8, "COL_R": 4}
SPLIT = {"SPLIT_COL": 8}
VARIANTS = {"looped": LOOPED, "split": SPLIT, "split-looped": {**SPLIT, **LOOPED}}


def _check(
    traced: Traced,
    run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    device: str,
    variants: dict[str, dict[str, int]],
) -> None:
    sources: dict[tuple[str, str], str] = {}
    for name in COLUMN_PROBLEMS:
        for variant, knobs in variants.items():
            generated = generate_problem(traced, name, knobs, device)
            if "SPLIT_COL" in knobs:
                assert generated.split, f"{name}/{variant}: nothing was split"
            sources[name, variant] = generated.source
    assert_match_reference(traced, run_checks, device, sources)


@pytest.mark.slow
def test_column_reductions_match_the_reference_looped_and_split(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    # The default setting of these problems is checked with every family (test_generate.py).
    _check(gen_problems, run_checks, "cpu", VARIANTS)


@pytest.mark.gpu
def test_column_reductions_match_the_reference_on_cuda(
    gen_problems: Traced,
    run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 24 to 64 rows are fewer than two CUDA partials' worth (SPLIT_MIN_ROWS): lowered to split.
    monkeypatch.setitem(SPLIT_MIN_ROWS, "cuda", 4)
    variants = {"default": {}, **VARIANTS, "wide": {"COL_X": 512, "COL_R": 64}}
    _check(gen_problems, run_checks, "cuda", variants)


def test_a_reduction_over_a_middle_or_leading_dim_runs_the_column_plan(
    gen_problems: Traced,
) -> None:
    # Sum, max with indices, argmin over dim 1 (one kernel: same space) and var over dim 0.
    cols = generate_problem(gen_problems, "column_reductions", {})
    assert (cols.kernels, cols.kinds) == (2, frozenset({"column"}))
    knobs = relevant_knobs(cols)
    assert {"COL_X", "COL_R", "NUM_WARPS_RED", "SPLIT_COL"} <= set(knobs)
    assert not {"ROWS", "BLOCK_R", "PERSISTENT_MAX", "SPLIT_R"} & set(knobs)
    # BatchNorm1d's statistics over dim 0 of (N, D) and the normalisation: one column kernel
    # that also stores the normalised output.
    stats = generate_problem(gen_problems, "feature_stats", {})
    assert (stats.kernels, stats.kinds) == (1, frozenset({"column"}))
    # Reductions over the last dim keep the row plan and its knobs.
    rows = generate_problem(gen_problems, "add_layernorm_logsoftmax", {})
    assert rows.kinds == frozenset({"reduction"})
    assert "ROWS" in relevant_knobs(rows) and "COL_X" not in relevant_knobs(rows)
    # BatchNorm2d reduces (N, H, W), the last dims included: rows, split with SPLIT_R.
    assert "column" not in generate_problem(gen_problems, "batch_stats", {}).kinds


def test_a_split_column_reduction_stays_in_column_kernels(gen_problems: Traced) -> None:
    split = generate_problem(gen_problems, "feature_stats", SPLIT)
    # The BatchNorm's Welford pair (x.mean(0) shares its mean) in two stages; the stage-2
    # kernels read the partials as (1, S, 1, D), again a column reduction.
    assert sorted(split.split) == ["welford_m2", "welford_mean"]
    assert split.kinds == frozenset({"column", "pointwise"})
    assert "SPLIT_COL" in relevant_knobs(split)


def test_column_split_factor_rules() -> None:
    # BatchNorm1d statistics of (65536, 256) on an H200 at COL_X 128: 2 programs unsplit.
    assert column_split_factor(2, 65536, 32, "cuda") == 32
    assert column_split_factor(2, 65536, 0, "cuda") == 1  # the knob is off
    # Enough programs to fill 132 SMs twice: no split.
    assert column_split_factor(263, 65536, 32, "cuda") == 32
    assert column_split_factor(264, 65536, 32, "cuda") == 1
    # Each partial reduces at least SPLIT_MIN_ROWS rows (64 on CUDA): 256 rows, 4 partials.
    assert column_split_factor(2, 256, 32, "cuda") == 4
    assert column_split_factor(2, 100, 32, "cuda") == 1
    # The factor divides the rows (the split is a reshape): 24 rows, at most 6 partials of 4;
    # a prime count of rows cannot split.
    assert column_split_factor(1, 24, 8, "cpu") == 6
    assert column_split_factor(1, 4099, 32, "cuda") == 1
