"""The official correctness rule and output collection, in process (no sandbox)."""

import pytest
import torch

from kernelarc.runner.correctness import (
    OutputFormatError,
    WorstErrors,
    collect_outputs,
    compare,
    find_lazy_output,
    type_mismatch,
)
from kernelarc.schema import Definition, ToleranceSpec

TOL = ToleranceSpec()


def two_output_definition() -> Definition:
    return Definition.model_validate(
        {
            "name": "pair",
            "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
            "outputs": {
                "a": {"shape": ["N"], "dtype": "float32"},
                "s": {"shape": None, "dtype": "float32"},
            },
            "reference": "def run(x):\n    return x, 1.0\n",
        }
    )


def test_identical_outputs_pass_with_zero_error() -> None:
    x = torch.randn(100)
    check = compare(x, x.clone(), TOL, "out")
    assert check.ok and check.max_abs == 0.0 and check.max_rel == 0.0


def test_matched_ratio_threshold_is_inclusive_and_counts_elements() -> None:
    ref = torch.zeros(100) + 1.0
    out = ref.clone()
    out[0] = 5.0  # one element off: 99% matched, exactly the default requirement
    assert compare(out, ref, TOL, "out").ok
    out[1] = 5.0
    check = compare(out, ref, TOL, "out")
    assert not check.ok and "98.0000%" in check.reason
    assert check.max_abs == pytest.approx(4.0)
    assert check.max_rel == pytest.approx(4.0)


def test_tolerance_is_atol_plus_rtol_times_reference() -> None:
    ref = torch.full((10,), 100.0)
    strict = ToleranceSpec(max_atol=0.0, max_rtol=0.01, required_matched_ratio=1.0)
    assert compare(ref + 0.9, ref, strict, "out").ok
    assert not compare(ref + 1.1, ref, strict, "out").ok


def test_error_cap_fails_even_when_ratio_holds() -> None:
    ref = torch.ones(1000)
    out = ref.clone()
    out[0] = 3.0
    capped = ToleranceSpec(max_error_cap=1.0)
    assert compare(out, ref, TOL, "out").ok
    assert not compare(out, ref, capped, "out").ok


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_fail_in_either_tensor(bad: float) -> None:
    ref = torch.ones(8)
    out = ref.clone()
    out[3] = bad
    for a, b in ((out, ref), (ref, out)):
        check = compare(a, b, TOL, "out")
        assert not check.ok
        assert check.max_abs == 0.0
        assert check.has_nan == (bad != bad) and check.has_inf == (bad == float("inf"))


def test_negative_inf_positions_can_be_excluded() -> None:
    ref = torch.tensor([float("-inf"), 1.0, 2.0])
    out = ref.clone()
    assert not compare(out, ref, TOL, "out").ok
    assert compare(out, ref, ToleranceSpec(allow_negative_inf=True), "out").ok


def test_all_zeros_against_nonzero_reference_fails() -> None:
    ref = torch.full((4,), 1e-4)  # within atol everywhere, yet all-zeros must still fail
    check = compare(torch.zeros(4), ref, TOL, "out")
    assert not check.ok and "all zeros" in check.reason
    assert compare(torch.zeros(4), torch.zeros(4), TOL, "out").ok


def test_half_precision_outputs_are_compared_in_float32() -> None:
    ref = torch.randn(64)
    assert compare(ref.to(torch.bfloat16), ref.to(torch.bfloat16), TOL, "out").ok


def test_worst_errors_fold_over_rounds() -> None:
    worst = WorstErrors()
    ref = torch.ones(10)
    worst.add(compare(ref + 0.001, ref, TOL, "a"))
    worst.add(compare(ref + 0.002, ref, TOL, "a"))
    result = worst.result()
    assert result.max_absolute_error == pytest.approx(0.002, rel=1e-3)
    assert not result.has_nan


def test_collect_outputs_accepts_every_reference_style() -> None:
    definition = two_output_definition()
    x = torch.ones(3)
    for returned in ((x, 2.0), [x, 2.0], {"s": 2.0, "a": x}):
        a, s = collect_outputs(returned, definition, "cpu")
        assert a is x
        assert s.dtype == torch.float32 and s.shape == () and float(s) == 2.0


@pytest.mark.parametrize("returned", [(torch.ones(3),), {"a": torch.ones(3)}, torch.ones(3), None])
def test_collect_outputs_rejects_wrong_arity(returned: object) -> None:
    with pytest.raises(OutputFormatError):
        collect_outputs(returned, two_output_definition(), "cpu")


def test_lazy_subclass_and_type_mismatches_are_named() -> None:
    class Fake(torch.Tensor):
        pass

    plain = torch.ones(2)
    assert find_lazy_output([plain], ["a"]) is None
    assert "Fake" in (find_lazy_output([plain.as_subclass(Fake)], ["a"]) or "")
    assert type_mismatch(plain, torch.ones(3), "a") is not None
    kind, _ = type_mismatch(plain.double(), plain, "a") or ("", "")
    assert kind == "dtype"
    assert type_mismatch(plain, plain, "a") is None


# -- every branch of the rule, table-driven -----------------------------------------------------

INF, NAN = float("inf"), float("nan")
NEG_INF = float("-inf")

# (id, out, ref, tolerance kwargs, ok, max_abs, max_rel, has_nan, has_inf)
BRANCHES = [
    ("exact", [1.0, 2.0], [1.0, 2.0], {}, True, 0.0, 0.0, False, False),
    ("nan_in_solution", [NAN, 1.0], [1.0, 1.0], {}, False, 0.0, 0.0, True, False),
    ("nan_in_reference", [1.0, 1.0], [1.0, NAN], {}, False, 0.0, 0.0, True, False),
    ("nan_wins_over_inf", [NAN, INF], [1.0, 1.0], {}, False, 0.0, 0.0, True, False),
    ("matching_inf_still_fails", [INF, 1.0], [INF, 1.0], {}, False, 0.0, 0.0, False, True),
    (
        "both_neg_inf_excluded",
        [NEG_INF, 1.0],
        [NEG_INF, 1.0],
        {"allow_negative_inf": True},
        True,
        0.0,
        0.0,
        False,
        False,
    ),
    (
        "one_sided_neg_inf",
        [NEG_INF, 1.0],
        [0.0, 1.0],
        {"allow_negative_inf": True},
        False,
        0.0,
        0.0,
        False,
        True,
    ),
    (
        "pos_inf_not_excused",
        [INF, 1.0],
        [INF, 1.0],
        {"allow_negative_inf": True},
        False,
        0.0,
        0.0,
        False,
        True,
    ),
    # The all-zeros test sees the -inf positions too (norm inf), so it does not fire here and
    # the remaining element is judged by tolerance alone.
    (
        "neg_inf_then_small_ref",
        [NEG_INF, 0.0],
        [NEG_INF, 0.001],
        {"allow_negative_inf": True},
        True,
        0.001,
        0.1,
        False,
        False,
    ),
    ("all_zeros", [0.0, 0.0], [3.0, 4.0], {}, False, 5.0, 5.0, False, False),
    ("all_zeros_within_atol", [0.0, 0.0], [1e-4, 0.0], {}, False, 1e-4, 1e-4, False, False),
    ("zeros_vs_zeros", [0.0, 0.0], [0.0, 0.0], {}, True, 0.0, 0.0, False, False),
    (
        "rel_uses_atol_floor",
        [0.5, 1.0],
        [0.0, 1.0],
        {"required_matched_ratio": 0.5},
        True,
        0.5,
        50.0,
        False,
        False,
    ),
    ("ratio_fails", [0.5, 1.0], [0.0, 1.0], {}, False, 0.5, 50.0, False, False),
    (
        "cap_fails",
        [1.0, 2.0, 9.0],
        [1.0, 2.0, 3.0],
        {"required_matched_ratio": 0.6, "max_error_cap": 5.0},
        False,
        6.0,
        2.0,
        False,
        False,
    ),
    (
        "cap_holds",
        [1.0, 2.0, 7.0],
        [1.0, 2.0, 3.0],
        {"required_matched_ratio": 0.6, "max_error_cap": 5.0},
        True,
        4.0,
        4.0 / 3.0,
        False,
        False,
    ),
    ("atol_zero_zero_ref", [1.0, 0.0], [1.0, 0.0], {"max_atol": 0.0}, True, 0.0, 0.0, False, False),
    ("empty", [], [], {}, True, 0.0, 0.0, False, False),
]


@pytest.mark.parametrize(
    ("out", "ref", "tol", "ok", "max_abs", "max_rel", "has_nan", "has_inf"),
    [case[1:] for case in BRANCHES],
    ids=[case[0] for case in BRANCHES],
)
def test_rule_branches(
    out: list[float],
    ref: list[float],
    tol: dict[str, object],
    ok: bool,
    max_abs: float,
    max_rel: float,
    has_nan: bool,
    has_inf: bool,
) -> None:
    check = compare(torch.tensor(out), torch.tensor(ref), ToleranceSpec.model_validate(tol), "o")
    assert check.ok is ok, check.reason
    assert check.max_abs == pytest.approx(max_abs, rel=1e-5)
    assert check.max_rel == pytest.approx(max_rel, rel=1e-5)
    assert (check.has_nan, check.has_inf) == (has_nan, has_inf)


def test_non_finite_summaries_stay_finite() -> None:
    zero_atol = ToleranceSpec(max_atol=0.0)
    check = compare(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0]), zero_atol, "o")
    assert not check.ok and check.max_rel == torch.finfo(torch.float32).max
    huge = torch.finfo(torch.float32).max
    check = compare(torch.tensor([huge, 1.0]), torch.tensor([-huge, 1.0]), TOL, "o")
    assert not check.ok and check.max_abs == huge


def test_packed_fp4_outputs_are_compared_by_value() -> None:
    from kernelarc.runner.dtypes import quantize_fp4x2

    a = quantize_fp4x2(torch.tensor([0.5, 1.0, -2.0, 6.0]))
    b = quantize_fp4x2(torch.tensor([0.5, 1.0, -2.0, 4.0]))
    assert compare(a, a.clone(), TOL, "o").ok
    check = compare(a, b, ToleranceSpec(required_matched_ratio=1.0), "o")
    assert not check.ok and check.max_abs == 2.0


def test_worst_errors_keep_the_record_with_the_largest_absolute_error() -> None:
    worst = WorstErrors()
    ref = torch.ones(4)
    worst.add(compare(ref + 0.004, ref, TOL, "a"))  # abs 0.004, rel 0.004
    small_ref = torch.full((4,), 0.01)
    worst.add(compare(small_ref + 0.003, small_ref, TOL, "b"))  # abs 0.003, rel 0.3
    result = worst.result()
    assert result.max_absolute_error == pytest.approx(0.004, rel=1e-3)
    assert result.max_relative_error == pytest.approx(0.004, rel=1e-3)  # not 0.3
    worst.add(compare(torch.tensor([INF]), torch.tensor([1.0]), TOL, "c"))
    assert worst.result().has_inf and worst.result().max_absolute_error == 0.0
    worst.add(compare(torch.tensor([NAN]), torch.tensor([1.0]), TOL, "d"))
    assert worst.result().has_nan and not worst.result().has_inf
    worst.add(compare(torch.tensor([INF]), torch.tensor([1.0]), TOL, "e"))
    assert worst.result().has_nan  # an Inf does not displace a NaN
