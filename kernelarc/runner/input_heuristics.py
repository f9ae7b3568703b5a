"""Name- and description-based input generators of the official evaluator (SOL-ExecBench).

Random inputs whose name says what they are (a norm weight, a mask, RoPE tables, a variance,
SSM decay rates, softmax probabilities, a projection matrix) get values of that kind instead of
plain `randn`, so references stay well-conditioned. The rules, their precedence (the order of
`RULES`), the value ranges and the generator calls (which decide the RNG stream) follow the
official evaluator exactly; names are matched case-sensitively.

The rules only apply to float tensors that are not fp8/fp4 (those always use the dtype
generator). A float64 input is generated only when a rule applies.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelarc.runner.dtypes import FP8_DTYPES, is_fp4_torch

_DIGITS = "0123456789"
Shape = tuple[int, ...]


def _base(name: str) -> str:
    """The name without trailing digits (`w_proj2` -> `w_proj`)."""
    return name.rstrip(_DIGITS)


def is_norm_weight(name: str) -> bool:
    """`<...>norm<digits>_weight`: `rms_norm_weight`, `input_layernorm_weight`, `norm1_weight`."""
    return name.endswith("_weight") and _base(name[: -len("_weight")]).endswith("norm")


def is_norm_bias(name: str) -> bool:
    """`<...>norm<digits>_bias`, e.g. `layer_norm_bias`."""
    return name.endswith("_bias") and _base(name[: -len("_bias")]).endswith("norm")


def is_causal_mask(name: str, shape: Shape, description: str | None) -> bool:
    """A square (last two dims) additive mask named so or described as a causal attention mask."""
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return False
    if name in ("attention_mask", "causal_mask"):
        return True
    text = (description or "").lower()
    return "attention mask" in text and "causal" in text


_BINARY_MASK_NAMES = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_BINARY_HINTS = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")


def is_binary_mask(name: str, description: str | None) -> bool:
    """A {0, 1} mask: a known mask name, or `*_mask` whose description says it is binary."""
    if name in _BINARY_MASK_NAMES:
        return True
    text = (description or "").lower()
    return name.endswith("_mask") and any(hint in text for hint in _BINARY_HINTS)


_COS_NAMES = ("cos", "cos_cached", "rope_cos")
_SIN_NAMES = ("sin", "sin_cached", "rope_sin")


def is_rope_table(name: str) -> bool:
    """RoPE cos/sin tables."""
    return name in _COS_NAMES or name in _SIN_NAMES


_POSITIVE_NAMES = ("rstd", "std", "variance", "var")


def is_positive(name: str) -> bool:
    """Statistics that must be positive: rstd / std / var / variance, as a name or a suffix.

    With trailing digits stripped, `_variance` is not among the accepted suffixes (as upstream).
    """
    if name in _POSITIVE_NAMES or name.endswith(("_rstd", "_std", "_variance", "_var")):
        return True
    base = _base(name)
    return base in _POSITIVE_NAMES or base.endswith(("_rstd", "_std", "_var"))


_SSM_RANGES = {"A": (-1.0, -0.001), "A_log": (-5.0, -1.0), "g": (-5.0, 0.0)}


def is_ssm_decay(name: str) -> bool:
    """State-space decay parameters."""
    return name in ("A", "A_log", "A_cumsum", "g")


def is_softmax_output(name: str, description: str | None) -> bool:
    """Attention/routing weights, or an input described as a softmax output."""
    if name in ("attn_weights", "attention_weights", "routing_weights"):
        return True
    text = (description or "").lower()
    return "softmax" in text and "output" in text


_WEIGHT_SUFFIXES = ("_weight", "_weights", "_proj", "_projs", "_weight_matrix")


def is_weight_matrix(name: str, shape: Shape) -> bool:
    """A >=2-d `weight` or `*_weight(s)` / `*_proj(s)` / `*_weight_matrix` (trailing digits ok)."""
    if len(shape) < 2:
        return False
    base = _base(name)
    return base == "weight" or base.endswith(_WEIGHT_SUFFIXES)


@dataclass(frozen=True)
class _Request:
    name: str
    shape: Shape
    dtype: torch.dtype
    device: torch.device
    description: str | None


def _ones(r: _Request) -> torch.Tensor:
    return torch.ones(r.shape, dtype=r.dtype, device=r.device)


def _zeros(r: _Request) -> torch.Tensor:
    return torch.zeros(r.shape, dtype=r.dtype, device=r.device)


def _causal(r: _Request) -> torch.Tensor:
    size = r.shape[-1]
    mask = torch.zeros(r.shape, dtype=r.dtype, device=r.device)
    upper = torch.triu(torch.ones(size, size, device=r.device), diagonal=1).bool()
    mask[..., upper] = torch.finfo(r.dtype).min
    return mask


def _binary(r: _Request) -> torch.Tensor:
    return torch.randint(0, 2, r.shape, device=r.device).to(r.dtype)


def _rope(r: _Request) -> torch.Tensor:
    angles = torch.randn(r.shape, dtype=torch.float32, device=r.device).clamp_(-math.pi, math.pi)
    table = torch.cos(angles) if r.name in _COS_NAMES else torch.sin(angles)
    return table.to(r.dtype)


def _positive(r: _Request) -> torch.Tensor:
    return torch.randn(r.shape, dtype=r.dtype, device=r.device).abs() + 0.1


def _ssm(r: _Request) -> torch.Tensor:
    empty = torch.empty(r.shape, dtype=r.dtype, device=r.device)
    if r.name == "A_cumsum":
        return empty.uniform_(-0.1, 0.0).cumsum(dim=-1)
    low, high = _SSM_RANGES[r.name]
    return empty.uniform_(low, high)


def _softmax(r: _Request) -> torch.Tensor:
    logits = torch.randn(r.shape, dtype=torch.float32, device=r.device)
    return torch.softmax(logits, dim=-1).to(r.dtype)


def _scaled_randn(r: _Request) -> torch.Tensor:
    return torch.randn(r.shape, dtype=r.dtype, device=r.device) / math.sqrt(r.shape[-1])


@dataclass(frozen=True)
class Rule:
    """One heuristic: when it applies and what it generates."""

    label: str
    applies: Callable[[_Request], bool]
    make: Callable[[_Request], torch.Tensor]


RULES: tuple[Rule, ...] = (
    Rule("norm_weight", lambda r: is_norm_weight(r.name), _ones),
    Rule("norm_bias", lambda r: is_norm_bias(r.name), _zeros),
    Rule("causal_mask", lambda r: is_causal_mask(r.name, r.shape, r.description), _causal),
    Rule("binary_mask", lambda r: is_binary_mask(r.name, r.description), _binary),
    Rule("rope", lambda r: is_rope_table(r.name), _rope),
    Rule("positive", lambda r: is_positive(r.name), _positive),
    Rule("ssm_decay", lambda r: is_ssm_decay(r.name), _ssm),
    Rule("softmax", lambda r: is_softmax_output(r.name, r.description), _softmax),
    Rule("weight_matrix", lambda r: is_weight_matrix(r.name, r.shape), _scaled_randn),
)
"""In precedence order: the first rule that applies wins."""


def _eligible(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and dtype not in FP8_DTYPES and not is_fp4_torch(dtype)


def matching_rule(
    name: str, shape: Shape, dtype: torch.dtype, description: str | None = None
) -> str | None:
    """The label of the rule that would generate this input, or None (plain dtype generator)."""
    if not _eligible(dtype):
        return None
    request = _Request(name, tuple(shape), dtype, torch.device("cpu"), description)
    for rule in RULES:
        if rule.applies(request):
            return rule.label
    return None


def heuristic_tensor(
    name: str,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device,
    description: str | None = None,
) -> torch.Tensor | None:
    """The tensor the first applicable rule generates, or None when no rule applies."""
    if not _eligible(dtype):
        return None
    request = _Request(name, tuple(shape), dtype, device, description)
    for rule in RULES:
        if rule.applies(request):
            return rule.make(request)
    return None
