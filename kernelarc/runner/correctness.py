"""The official correctness rule: output collection, type checks and numerical comparison.

Per output and round, in this order (SOL-ExecBench `compute_error_stats`):
1. both tensors are cast to float32 (packed fp4 is decoded first);
2. any NaN/Inf in either tensor fails with zero errors, `has_nan` when a NaN is present and
   otherwise `has_inf`; with `allow_negative_inf`, positions where both are -inf are exempt;
3. a solution whose norm is zero against a reference with a non-zero norm fails, with the
   absolute and relative error both set to the reference norm;
4. both--inf positions are dropped (when allowed); an empty remainder passes;
5. an element exceeds when |x-y| > atol + rtol*|y| (or |x-y| is not finite); the round fails
   when 1 - exceeding/numel < `required_matched_ratio`, or max|x-y| > `max_error_cap` if set;
6. max relative error = max(|x-y| / max(|y|, atol)).
Where upstream would produce a non-finite summary (atol = 0 with a zero reference, or an
overflowing difference; its trace writer then crashes) we report a finite value instead:
NaN -> 0 and +Inf -> the float32 maximum. Verdicts are unaffected.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelarc.runner.dtypes import fp4x2_to_float, is_fp4_torch, torch_dtype
from kernelarc.schema import Correctness, Definition, TensorSpec, ToleranceSpec


class OutputFormatError(Exception):
    """A function returned something that cannot be read as the definition's outputs."""


def collect_outputs(returned: Any, definition: Definition, device: str) -> list[Any]:
    """Outputs in definition order from a return value: tensor, tuple/list, dict or scalar.

    Tensors are passed through untouched (so subclass checks still see them); Python scalars
    become 0-d tensors of the output's declared dtype.
    """
    specs = list(definition.outputs.items())
    if isinstance(returned, dict):
        missing = [name for name, _ in specs if name not in returned]
        if missing:
            msg = f"returned dict lacks outputs {missing} (keys: {sorted(map(str, returned))})"
            raise OutputFormatError(msg)
        items = [returned[name] for name, _ in specs]
    elif isinstance(returned, tuple | list):
        if len(returned) != len(specs):
            msg = f"returned {len(returned)} values, the definition has {len(specs)} outputs"
            raise OutputFormatError(msg)
        items = list(returned)
    elif len(specs) == 1:
        items = [returned]
    else:
        msg = f"returned one {type(returned).__name__}, the definition has {len(specs)} outputs"
        raise OutputFormatError(msg)
    return [
        _as_output(item, name, spec, device)
        for item, (name, spec) in zip(items, specs, strict=True)
    ]


def _as_output(item: Any, name: str, spec: TensorSpec, device: str) -> Any:
    if isinstance(item, torch.Tensor):
        return item
    if isinstance(item, bool | int | float):
        return torch.tensor(item, dtype=torch_dtype(spec.dtype), device=device)
    msg = f"output {name!r} is a {type(item).__name__}, expected a torch.Tensor"
    raise OutputFormatError(msg)


def find_lazy_output(outputs: Sequence[Any], names: Sequence[str]) -> str | None:
    """Name the first output that is a Tensor subclass rather than a plain torch.Tensor."""
    for name, value in zip(names, outputs, strict=True):
        if type(value) is not torch.Tensor:
            return f"output {name!r} is a {type(value).__name__}, not a plain torch.Tensor"
    return None


def type_mismatch(out: torch.Tensor, ref: torch.Tensor, name: str) -> tuple[str, str] | None:
    """("shape"|"dtype", message) when the solution's output differs from the reference's."""
    if tuple(out.shape) != tuple(ref.shape):
        return "shape", f"output {name!r}: shape {tuple(out.shape)}, reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return "dtype", f"output {name!r}: dtype {out.dtype}, reference {ref.dtype}"
    return None


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one output in one round."""

    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    has_nan: bool = False
    has_inf: bool = False
    reason: str = ""


_F32_MAX = float(torch.finfo(torch.float32).max)


def _finite(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(value, _F32_MAX)


def _as_float32(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if is_fp4_torch(t.dtype):
        return fp4x2_to_float(t)
    return t.to(torch.float32)


#: Elements compared at a time: the temporaries of one chunk (a few times 16 MiB) are reused
#: from the allocator's cache instead of being mapped and zeroed afresh at the output's size
#: (the whole-tensor form took 3 s for a 64 MiB output on a 2-core host, most of it page faults).
COMPARE_CHUNK = 1 << 22


def _error_stats(x: torch.Tensor, y: torch.Tensor, tol: ToleranceSpec) -> tuple[int, float, float]:
    """(exceeding elements, max |x-y|, max |x-y| / max(|y|, atol)) of two equal-shape float32
    tensors, chunk by chunk; the same numbers as the whole-tensor expressions of steps 5-6
    (a NaN relative error anywhere makes the maximum NaN, as torch.max does)."""
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    exceeding, max_abs, max_rel = 0, 0.0, 0.0
    for start in range(0, flat_x.numel(), COMPARE_CHUNK):
        a = flat_x[start : start + COMPARE_CHUNK]
        b = flat_y[start : start + COMPARE_CHUNK]
        diff = torch.sub(a, b).abs_()
        largest = float(diff.max())
        magnitude = b.abs()
        exceeds = diff > magnitude.mul(tol.max_rtol).add_(tol.max_atol)
        if not math.isfinite(largest):  # an overflowing difference exceeds, whatever the bound
            exceeds.logical_or_(~torch.isfinite(diff))
        exceeding += int(torch.count_nonzero(exceeds))
        max_abs = max(max_abs, largest)
        relative = float(diff.div_(magnitude.clamp_(min=tol.max_atol)).max())
        max_rel = (
            relative if math.isnan(relative) or math.isnan(max_rel) else max(max_rel, relative)
        )
    return exceeding, max_abs, max_rel


def _all_finite(t: torch.Tensor) -> bool:
    """No NaN and no Inf (min and max propagate NaN and reach any infinity)."""
    if t.numel() == 0:
        return True
    low, high = torch.aminmax(t)
    return math.isfinite(float(low)) and math.isfinite(float(high))


def _non_finite(
    x: torch.Tensor, y: torch.Tensor, tol: ToleranceSpec, name: str
) -> OutputCheck | None:
    if _all_finite(x) and _all_finite(y):
        return None  # the common case, in two reductions and no temporaries
    bad_x, bad_y = ~torch.isfinite(x), ~torch.isfinite(y)
    if tol.allow_negative_inf:
        both = (x == float("-inf")) & (y == float("-inf"))
        bad_x, bad_y = bad_x & ~both, bad_y & ~both
    if not bool(bad_x.any() or bad_y.any()):
        return None
    has_nan = bool(torch.isnan(x).any() or torch.isnan(y).any())
    kind = "NaN" if has_nan else "Inf"
    side = "solution" if bool(bad_x.any()) else "reference"
    return OutputCheck(
        ok=False,
        has_nan=has_nan,
        has_inf=not has_nan,
        reason=f"output {name!r}: the {side} contains {kind} (non-finite values never match)",
    )


def compare(out: torch.Tensor, ref: torch.Tensor, tol: ToleranceSpec, name: str) -> OutputCheck:
    """Apply the official rule to one output (shapes already checked equal)."""
    x, y = _as_float32(out), _as_float32(ref)
    non_finite = _non_finite(x, y, tol, name)
    if non_finite is not None:
        return non_finite
    ref_norm = float(torch.linalg.vector_norm(y))
    if ref_norm > 0 and float(torch.linalg.vector_norm(x)) == 0:
        err = _finite(ref_norm)
        return OutputCheck(
            ok=False,
            max_abs=err,
            max_rel=err,
            reason=f"output {name!r} is all zeros but the reference is not (norm {ref_norm:.6g})",
        )
    if tol.allow_negative_inf:
        keep = ~((x == float("-inf")) & (y == float("-inf")))
        x, y = x[keep], y[keep]
    if x.numel() == 0:
        return OutputCheck(ok=True)
    exceeding, max_abs, max_rel = _error_stats(x, y, tol)
    matched = min(1.0, max(0.0, 1.0 - exceeding / x.numel()))
    abs_out, rel_out = _finite(max_abs), _finite(max_rel)
    if matched < tol.required_matched_ratio:
        reason = (
            f"output {name!r}: {matched:.4%} of elements within atol={tol.max_atol} "
            f"rtol={tol.max_rtol}, need {tol.required_matched_ratio:.4%}; "
            f"max abs error {max_abs:.6g}"
        )
        return OutputCheck(ok=False, max_abs=abs_out, max_rel=rel_out, reason=reason)
    if tol.max_error_cap is not None and max_abs > tol.max_error_cap:
        reason = f"output {name!r}: max abs error {max_abs:.6g} > cap {tol.max_error_cap}"
        return OutputCheck(ok=False, max_abs=abs_out, max_rel=rel_out, reason=reason)
    return OutputCheck(ok=True, max_abs=abs_out, max_rel=rel_out)


class WorstErrors:
    """The correctness a workload reports, folded over its outputs and rounds as upstream does.

    Upstream keeps one whole record rather than per-field maxima: a check replaces the kept one
    when its max absolute error is strictly larger, when it has NaN, or when it has Inf and the
    kept one has no NaN. The reported relative error is therefore that of the output with the
    largest absolute error, not the largest relative error seen.
    """

    def __init__(self) -> None:
        self._kept = OutputCheck(ok=True)

    @property
    def max_abs(self) -> float:
        """Max absolute error of the kept record."""
        return self._kept.max_abs

    @property
    def max_rel(self) -> float:
        """Max relative error of the kept record."""
        return self._kept.max_rel

    @property
    def has_nan(self) -> bool:
        """Whether the kept record saw a NaN."""
        return self._kept.has_nan

    @property
    def has_inf(self) -> bool:
        """Whether the kept record saw an Inf (and no NaN)."""
        return self._kept.has_inf

    def add(self, check: OutputCheck) -> None:
        """Fold one output's comparison in."""
        bigger = check.max_abs > self._kept.max_abs
        non_finite = check.has_nan or (check.has_inf and not self._kept.has_nan)
        if bigger or non_finite:
            self._kept = check

    def result(self) -> Correctness:
        """As the schema's Correctness."""
        return Correctness(
            max_relative_error=self.max_rel,
            max_absolute_error=self.max_abs,
            has_nan=self.has_nan,
            has_inf=self.has_inf,
        )
