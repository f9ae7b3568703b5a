"""The official correctness rule: output collection, type checks and numerical comparison.

Per output and round: cast both to float32; any non-finite value fails (both-`-inf` positions
are excluded first when the tolerance allows them); an all-zeros solution against a non-zero
reference fails; otherwise an element matches when |x-y| <= atol + rtol*|y| and the round needs
`required_matched_ratio` of elements to match and max|x-y| within `max_error_cap` when set.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelarc.runner.dtypes import torch_dtype
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


def compare(out: torch.Tensor, ref: torch.Tensor, tol: ToleranceSpec, name: str) -> OutputCheck:
    """Apply the official rule to one output (shapes already checked equal)."""
    x = out.detach().to(torch.float32).reshape(-1)
    y = ref.detach().to(torch.float32).reshape(-1)
    if tol.allow_negative_inf:
        both = (x == float("-inf")) & (y == float("-inf"))
        x, y = x[~both], y[~both]
    if x.numel() == 0:
        return OutputCheck(ok=True)
    has_nan = bool(torch.isnan(x).any() or torch.isnan(y).any())
    has_inf = bool(torch.isinf(x).any() or torch.isinf(y).any())
    if has_nan or has_inf:
        kind = "NaN" if has_nan else "Inf"
        return OutputCheck(
            ok=False, has_nan=has_nan, has_inf=has_inf, reason=f"output {name!r} contains {kind}"
        )
    ref_norm = float(torch.linalg.vector_norm(y))
    if ref_norm != 0.0 and not bool(x.any()):
        return OutputCheck(
            ok=False,
            max_abs=ref_norm,
            max_rel=ref_norm,
            reason=f"output {name!r} is all zeros but the reference is not",
        )
    diff = (x - y).abs()
    exceeds = diff > tol.max_atol + tol.max_rtol * y.abs()
    matched = 1.0 - float(exceeds.sum()) / x.numel()
    max_abs = float(diff.max())
    # A tiny floor keeps the ratio finite when atol is 0 and the reference is 0.
    denom = y.abs().clamp(min=max(tol.max_atol, torch.finfo(torch.float32).tiny))
    max_rel = float((diff / denom).max())
    if matched < tol.required_matched_ratio:
        return OutputCheck(
            ok=False,
            max_abs=max_abs,
            max_rel=max_rel,
            reason=(
                f"output {name!r}: {matched:.4%} of elements within atol={tol.max_atol} "
                f"rtol={tol.max_rtol}, need {tol.required_matched_ratio:.4%}; "
                f"max abs error {max_abs:.6g}"
            ),
        )
    if tol.max_error_cap is not None and max_abs > tol.max_error_cap:
        return OutputCheck(
            ok=False,
            max_abs=max_abs,
            max_rel=max_rel,
            reason=f"output {name!r}: max abs error {max_abs:.6g} > cap {tol.max_error_cap}",
        )
    return OutputCheck(ok=True, max_abs=max_abs, max_rel=max_rel)


class WorstErrors:
    """The worst errors over all outputs and rounds of one workload."""

    def __init__(self) -> None:
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.has_nan = False
        self.has_inf = False

    def add(self, check: OutputCheck) -> None:
        """Fold one output's comparison in."""
        self.max_abs = max(self.max_abs, check.max_abs)
        self.max_rel = max(self.max_rel, check.max_rel)
        self.has_nan = self.has_nan or check.has_nan
        self.has_inf = self.has_inf or check.has_inf

    def result(self) -> Correctness:
        """As the schema's Correctness."""
        return Correctness(
            max_relative_error=self.max_rel,
            max_absolute_error=self.max_abs,
            has_nan=self.has_nan,
            has_inf=self.has_inf,
        )
