"""Triton expressions for the elementwise ATen operators the kernel generator fuses.

Place in the flow: `emit.KernelEmitter` pulls a pointwise node's arguments (as `Operand`s: code
text plus dtype) and asks `POINTWISE[target]` for the expression of its result. Only `tl`
builtins are used (no libdevice), so every generated kernel also runs under Triton's interpreter
on the CPU; tanh, pow and friends are spelled with exp/log where Triton has no builtin (the
`_kg_*` helpers the expressions call are in `triton_helpers.py`).

Numerics: 16-bit floats are computed in float32 (upcast at load, rounded at store or at an
explicit cast), as Inductor does; NaN propagates through max/min/clamp/relu like it does in
PyTorch.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})

#: torch dtype name -> Triton dtype spelled in source.
TL_DTYPE: Mapping[str, str] = {
    "float16": "tl.float16",
    "bfloat16": "tl.bfloat16",
    "float32": "tl.float32",
    "float64": "tl.float64",
    "int8": "tl.int8",
    "int16": "tl.int16",
    "int32": "tl.int32",
    "int64": "tl.int64",
    "uint8": "tl.uint8",
    "bool": "tl.int1",
}


class UnsupportedOp(Exception):
    """An operator (or operand combination) the generator does not emit."""


def compute_dtype(dtype: str) -> str:
    """The dtype values of `dtype` are computed in (16-bit floats widen to float32)."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


@dataclass(frozen=True)
class Operand:
    """One argument of a pointwise op: source text and its (compute) dtype; literals too."""

    code: str
    dtype: str
    literal: bool = False
    """A Python scalar folded into the source (no tensor)."""


def literal(value: Any) -> Operand:
    """An Operand for a Python scalar argument (None for an omitted optional bound)."""
    if value is None:
        return Operand("None", "none", literal=True)
    if isinstance(value, bool):
        return Operand("True" if value else "False", "bool", literal=True)
    if isinstance(value, int):
        return Operand(str(value), "int64", literal=True)
    if isinstance(value, float):
        if math.isnan(value):
            return Operand('float("nan")', "float32", literal=True)
        if math.isinf(value):
            return Operand(f'float("{"inf" if value > 0 else "-inf"}")', "float32", literal=True)
        return Operand(repr(value), "float32", literal=True)
    msg = f"unsupported scalar argument {value!r}"
    raise UnsupportedOp(msg)


def cast(op: Operand, dtype: str) -> str:
    """`op` converted to the compute dtype of `dtype` (as source)."""
    target = compute_dtype(dtype)
    if op.dtype == target:
        return op.code
    if op.literal:
        if op.dtype == "bool":  # rendered True/False: a bool in Triton, not an int32
            number = int(op.code == "True")
            return repr(float(number)) if target in FLOAT_DTYPES else str(number)
        if target in FLOAT_DTYPES and op.dtype == "int64":
            return repr(float(int(op.code)))
        return op.code
    if target == "bool":
        return f"({op.code} != 0)"
    return f"({op.code}).to({TL_DTYPE[target]})"


def to_storage(code: str, value_dtype: str, dtype: str) -> str:
    """A computed value rounded to a buffer's dtype for a store."""
    if value_dtype == dtype:
        return code
    return f"({code}).to({TL_DTYPE[dtype]})"


Handler = Callable[[list[Operand], Mapping[str, Any], str], str]
"""(operands, keyword arguments, result dtype) -> expression."""


def _binary(symbol: str) -> Handler:
    def emit(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
        x, y = cast(a[0], out), cast(a[1], out)
        alpha = kw.get("alpha")
        if alpha is not None and alpha != 1:
            y = f"({y}) * {literal(alpha).code}"
        return f"({x} {symbol} {y})"

    return emit


def _compare(symbol: str) -> Handler:
    def emit(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
        common = _promote(a)
        return f"({cast(a[0], common)} {symbol} {cast(a[1], common)})"

    return emit


def _unary(template: str) -> Handler:
    def emit(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
        return template.format(x=cast(a[0], out))

    return emit


def _promote(a: list[Operand]) -> str:
    """The dtype two operands are compared in (float beats int beats bool; tensors first)."""
    tensors = [op.dtype for op in a if not op.literal] or [op.dtype for op in a]
    kinds = [op.dtype for op in a]
    for family in (("float64",), ("float32",)):
        if any(k in family for k in tensors):
            return family[0]
    if any(k in FLOAT_DTYPES for k in kinds):
        return "float32"
    if any(k in INT_DTYPES for k in kinds):
        return "int64" if "int64" in tensors else next(k for k in kinds if k in INT_DTYPES)
    return "bool"


def _div(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    mode = kw.get("rounding_mode")
    if mode is None:
        return f"({cast(a[0], out)} / {cast(a[1], out)})"
    if out in FLOAT_DTYPES:
        q = f"({cast(a[0], out)} / {cast(a[1], out)})"
        return f"tl.floor({q})" if mode == "floor" else f"_kg_trunc({q})"
    x, y = cast(a[0], out), cast(a[1], out)
    return f"_kg_floordiv_int({x}, {y})" if mode == "floor" else f"({x} // {y})"


def _pow(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    base, exp = a
    if exp.literal and exp.dtype != "bool":
        value = float(exp.code) if not exp.code.startswith("float") else math.nan
        x = cast(base, out)
        if value == int(value) and 0 <= value <= 4:
            return "(" + " * ".join([x] * int(value)) + ")" if value else "1.0"
        if value == 0.5:
            return f"tl.sqrt({x})"
        if value == -0.5:
            return f"tl.rsqrt({x})"
        if value == -1.0:
            return f"(1.0 / {x})"
        if value == -2.0:
            return f"(1.0 / ({x} * {x}))"
        return f"_kg_pow({x}, {exp.code})"
    return f"_kg_pow({cast(base, out)}, {cast(exp, out)})"


def _rpow(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    """pow.Scalar: a Python base, a tensor exponent."""
    return f"tl.exp2({cast(a[1], out)} * {math.log2(float(a[0].code))!r})"


def _where(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    return f"tl.where({a[0].code}, {cast(a[1], out)}, {cast(a[2], out)})"


def _clamp(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x = cast(a[0], out)
    lo = a[1] if len(a) > 1 else None
    hi = a[2] if len(a) > 2 else None
    if lo is not None and lo.code != "None":
        x = f"_kg_max({x}, {cast(lo, out)})"
    if hi is not None and hi.code != "None":
        x = f"_kg_min({x}, {cast(hi, out)})"
    return x


def _leaky_relu(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x = cast(a[0], out)
    slope = a[1].code if len(a) > 1 else "0.01"
    return f"tl.where({x} > 0, {x}, {x} * {slope})"


def _hardtanh(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    lo = a[1].code if len(a) > 1 else "-1.0"
    hi = a[2].code if len(a) > 2 else "1.0"
    return f"_kg_min(_kg_max({cast(a[0], out)}, {lo}), {hi})"


def _gelu(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x = cast(a[0], out)
    if kw.get("approximate", "none") == "tanh":
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return f"(0.5 * {x} * (1.0 + _kg_tanh({inner})))"
    return f"(0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476)))"


def _softplus(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x = cast(a[0], out)
    beta = a[1].code if len(a) > 1 else "1.0"
    threshold = a[2].code if len(a) > 2 else "20.0"
    soft = f"(tl.log(1.0 + tl.exp({x} * {beta})) / {beta})"
    return f"tl.where({x} * {beta} > {threshold}, {x}, {soft})"


def _elu(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x = cast(a[0], out)
    alpha = a[1].code if len(a) > 1 else "1.0"
    scale = a[2].code if len(a) > 2 else "1.0"
    in_scale = a[3].code if len(a) > 3 else "1.0"
    neg = f"{alpha} * (tl.exp({x} * {in_scale}) - 1.0)"
    return f"({scale} * tl.where({x} > 0, {x}, {neg}))"


def _convert(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    code = cast(a[0], out)
    if out in ("float16", "bfloat16"):
        # An explicit cast to a 16-bit float rounds, as eager does; computing goes on in float32.
        return f"(({code}).to({TL_DTYPE[out]})).to(tl.float32)"
    return code


def _lerp(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x, y, w = (cast(op, out) for op in a)
    return f"({x} + {w} * ({y} - {x}))"


def _addcmul(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x, y, z = (cast(op, out) for op in a[:3])
    value = literal(kw.get("value", 1)).code
    return f"({x} + {value} * {y} * {z})"


def _remainder(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    x, y = cast(a[0], out), cast(a[1], out)
    if out in FLOAT_DTYPES:
        return f"({x} - tl.floor({x} / {y}) * {y})"
    return f"_kg_remainder_int({x}, {y})"


def _identity(a: list[Operand], kw: Mapping[str, Any], out: str) -> str:
    return cast(a[0], out)


_UNARY: dict[str, str] = {
    "abs": "tl.abs({x})",
    "neg": "(-{x})",
    "exp": "tl.exp({x})",
    "exp2": "tl.exp2({x})",
    "expm1": "(tl.exp({x}) - 1.0)",
    "log": "tl.log({x})",
    "log2": "tl.log2({x})",
    "log10": "(tl.log2({x}) * 0.3010299956639812)",
    "log1p": "tl.log(1.0 + {x})",
    "sqrt": "tl.sqrt({x})",
    "rsqrt": "tl.rsqrt({x})",
    "reciprocal": "(1.0 / {x})",
    "sin": "tl.sin({x})",
    "cos": "tl.cos({x})",
    "tan": "(tl.sin({x}) / tl.cos({x}))",
    "tanh": "_kg_tanh({x})",
    "sigmoid": "tl.sigmoid({x})",
    "erf": "tl.erf({x})",
    "erfc": "(1.0 - tl.erf({x}))",
    "floor": "tl.floor({x})",
    "ceil": "tl.ceil({x})",
    "trunc": "_kg_trunc({x})",
    "round": "_kg_round({x})",
    "frac": "({x} - _kg_trunc({x}))",
    "sign": "_kg_sign({x})",
    "sgn": "_kg_sign({x})",
    "relu": "_kg_max({x}, 0.0)",
    "silu": "({x} * tl.sigmoid({x}))",
    "mish": "({x} * _kg_tanh(tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))))",
    "hardsigmoid": "(_kg_min(_kg_max({x} + 3.0, 0.0), 6.0) / 6.0)",
    "hardswish": "({x} * _kg_min(_kg_max({x} + 3.0, 0.0), 6.0) / 6.0)",
    "logical_not": "({x} == 0)",
    "bitwise_not": "(~{x})",
    "isnan": "({x} != {x})",
    "isinf": '(tl.abs({x}) == float("inf"))',
    "atan": "_kg_atan({x})",
    "sinh": "((tl.exp({x}) - tl.exp(-{x})) * 0.5)",
    "cosh": "((tl.exp({x}) + tl.exp(-{x})) * 0.5)",
}

_BINARY: dict[str, str] = {"add": "+", "sub": "-", "mul": "*"}
_COMPARE: dict[str, str] = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGICAL: dict[str, str] = {
    "logical_and": "&",
    "logical_or": "|",
    "logical_xor": "^",
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
}


def _build() -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for name, template in _UNARY.items():
        table[f"aten.{name}.default"] = _unary(template)
    for name, symbol in _BINARY.items():
        for overload in ("Tensor", "Scalar"):
            table[f"aten.{name}.{overload}"] = _binary(symbol)
    for name, symbol in _COMPARE.items():
        for overload in ("Tensor", "Scalar"):
            table[f"aten.{name}.{overload}"] = _compare(symbol)
    for name, symbol in _LOGICAL.items():
        table[f"aten.{name}.default"] = _compare(symbol)
        table[f"aten.{name}.Tensor"] = _compare(symbol)
    table.update(
        {
            "aten.div.Tensor": _div,
            "aten.div.Scalar": _div,
            "aten.div.Tensor_mode": _div,
            "aten.true_divide.Tensor": _div,
            "aten.pow.Tensor_Scalar": _pow,
            "aten.pow.Tensor_Tensor": _pow,
            "aten.pow.Scalar": _rpow,
            "aten.where.self": _where,
            "aten.clamp.default": _clamp,
            "aten.clamp.Tensor": _clamp,
            "aten.clamp_min.default": lambda a, kw, out: _clamp([a[0], a[1]], kw, out),
            "aten.clamp_max.default": lambda a, kw, out: (
                f"_kg_min({cast(a[0], out)}, {cast(a[1], out)})"
            ),
            "aten.maximum.default": lambda a, kw, out: (
                f"_kg_max({cast(a[0], out)}, {cast(a[1], out)})"
            ),
            "aten.minimum.default": lambda a, kw, out: (
                f"_kg_min({cast(a[0], out)}, {cast(a[1], out)})"
            ),
            "aten.leaky_relu.default": _leaky_relu,
            "aten.hardtanh.default": _hardtanh,
            "aten.gelu.default": _gelu,
            "aten.softplus.default": _softplus,
            "aten.elu.default": _elu,
            "aten.lerp.Scalar": _lerp,
            "aten.lerp.Tensor": _lerp,
            "aten.addcmul.default": _addcmul,
            "aten.remainder.Tensor": _remainder,
            "aten.remainder.Scalar": _remainder,
            "aten.fmod.Tensor": _binary("%"),
            "aten.fmod.Scalar": _binary("%"),
            "prims.convert_element_type.default": _convert,
            "aten._to_copy.default": _convert,
            "aten.clone.default": _identity,
            "aten.lift_fresh_copy.default": _identity,
            "aten.detach.default": _identity,
            "aten.alias.default": _identity,
        }
    )
    return table


POINTWISE: Mapping[str, Handler] = _build()
"""ATen target -> expression builder."""


def result_dtype(target: str, meta_dtype: str) -> str:
    """The dtype a pointwise node's value is computed in."""
    del target
    return compute_dtype(meta_dtype)


def supported(target: str) -> bool:
    """Whether `target` is a pointwise op the generator emits."""
    return target in POINTWISE
