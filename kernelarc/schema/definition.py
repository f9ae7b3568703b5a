"""The SOL-ExecBench `definition.json` model: axes, tensor specs and the reference program."""

import ast
import math
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kernelarc.python_ast import parse_module
from kernelarc.schema.axes import AxisExpressionError, evaluate_expression, expression_names
from kernelarc.schema.base import WireModel


class DType(StrEnum):
    """Tensor dtypes of the SOL-ExecBench format (there is no uint8)."""

    FLOAT64 = "float64"
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    FLOAT4_E2M1FN_X2 = "float4_e2m1fn_x2"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"


#: Bytes per element; the fp4 formats count half a byte (the packed size; a lower bound for
#: either packing).
DTYPE_BYTES: dict[DType, float] = {
    DType.FLOAT64: 8,
    DType.FLOAT32: 4,
    DType.FLOAT16: 2,
    DType.BFLOAT16: 2,
    DType.FLOAT8_E4M3FN: 1,
    DType.FLOAT8_E5M2: 1,
    DType.FLOAT4_E2M1: 0.5,
    DType.FLOAT4_E2M1FN_X2: 0.5,
    DType.INT64: 8,
    DType.INT32: 4,
    DType.INT16: 2,
    DType.INT8: 1,
    DType.BOOL: 1,
}


class AxisConst(WireModel):
    """An axis with a fixed size."""

    type: Literal["const"]
    """Discriminator."""
    value: int = Field(ge=0)
    """The axis size."""
    description: str | None = None
    """Free text."""


class AxisVar(WireModel):
    """An axis whose size each workload binds."""

    type: Literal["var"]
    """Discriminator."""
    description: str | None = None
    """Free text."""


class AxisExpr(WireModel):
    """An axis computed from other axes by an arithmetic expression."""

    type: Literal["expr"]
    """Discriminator."""
    expression: str = Field(min_length=1)
    """Arithmetic over other axis names: + - * / // % ** and unary signs."""
    description: str | None = None
    """Free text."""


Axis = Annotated[AxisConst | AxisVar | AxisExpr, Field(discriminator="type")]


class TensorSpec(WireModel):
    """One input or output: a tensor (shape list), a 0-d tensor ([]) or a Python scalar (null)."""

    shape: list[str | int] | None
    """Axis names (or digit strings / ints for fixed sizes); `[]` is 0-d; null is a scalar."""
    dtype: DType
    """Element type."""
    description: str | None = None
    """Free text; the official input generator reads some hints from it."""


class Definition(WireModel):
    """A kernel problem: named axes, inputs, outputs and a PyTorch reference `run`."""

    name: str = Field(min_length=1)
    """Problem name; solutions refer to it."""
    op_type: str | None = None
    """Operator family (e.g. `rmsnorm`, `gemm`); optional in the format."""
    axes: dict[str, Axis]
    """Axis name to const, var or expr axis."""
    inputs: dict[str, TensorSpec]
    """Inputs in the order of the reference's positional parameters."""
    outputs: dict[str, TensorSpec]
    """Outputs in the order the reference returns them."""
    reference: str = Field(min_length=1)
    """Python source defining a top-level `run(*inputs)` that returns the outputs."""
    custom_inputs_entrypoint: str | None = None
    """Name of a top-level function in `reference` that builds inputs for `custom` workloads."""
    description: str | None = None
    """Free text."""
    hf_id: str | None = None
    """Hugging Face id of the model the problem comes from."""

    @field_validator("outputs")
    @classmethod
    def _outputs_not_empty(cls, value: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        if not value:
            msg = "a definition needs at least one output"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _check_names_and_reference(self) -> "Definition":
        overlap = set(self.inputs) & set(self.outputs)
        if overlap:
            msg = f"names used as both input and output: {sorted(overlap)}; rename one side"
            raise ValueError(msg)
        clash = set(self.inputs) & set(self.axes)
        if clash:
            msg = f"input names equal axis names: {sorted(clash)}; rename the inputs or the axes"
            raise ValueError(msg)
        self._check_axes()
        self._check_shapes()
        self._check_reference()
        return self

    def _check_axes(self) -> None:
        for name, axis in self.axes.items():
            if not isinstance(axis, AxisExpr):
                continue
            try:
                used = expression_names(axis.expression)
            except AxisExpressionError as exc:
                msg = f"axes.{name}.expression: {exc}"
                raise ValueError(msg) from exc
            unknown = used - set(self.axes)
            if unknown:
                msg = (
                    f"axes.{name}.expression {axis.expression!r} uses undefined axes "
                    f"{sorted(unknown)}; known axes: {sorted(self.axes)}"
                )
                raise ValueError(msg)
            if name in used:
                msg = f"axes.{name}.expression refers to itself"
                raise ValueError(msg)

    def _check_shapes(self) -> None:
        for group, specs in (("inputs", self.inputs), ("outputs", self.outputs)):
            for tname, spec in specs.items():
                for dim in spec.shape or []:
                    if isinstance(dim, int) or dim.isdigit() or dim in self.axes:
                        continue
                    msg = (
                        f"{group}.{tname}.shape uses {dim!r}, which is not an axis; "
                        f"declare it under `axes` (known: {sorted(self.axes)})"
                    )
                    raise ValueError(msg)

    def _check_reference(self) -> None:
        try:
            tree = parse_module(self.reference)
        except SyntaxError as exc:
            msg = f"reference does not parse: line {exc.lineno}: {exc.msg}"
            raise ValueError(msg) from exc
        functions = {
            node.name: node
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        run = functions.get("run")
        if run is None:
            msg = "reference must define a top-level function `run`"
            raise ValueError(msg)
        params = [a.arg for a in run.args.posonlyargs + run.args.args]
        if params != list(self.inputs):
            msg = (
                f"reference run() parameters {params} must equal the input names in order "
                f"{list(self.inputs)}"
            )
            raise ValueError(msg)
        entry = self.custom_inputs_entrypoint
        if entry is not None and entry not in functions:
            msg = f"custom_inputs_entrypoint {entry!r} is not a top-level function of reference"
            raise ValueError(msg)

    def resolve_axes(self, bound: dict[str, int]) -> dict[str, int]:
        """Return every axis size given the workload's var-axis values.

        Raises:
            ValueError: a var axis is unbound or an expression does not evaluate.
        """
        values: dict[str, int] = {}
        for name, axis in self.axes.items():
            if isinstance(axis, AxisConst):
                values[name] = axis.value
            elif isinstance(axis, AxisVar):
                if name not in bound:
                    msg = f"workload does not bind var axis {name!r}"
                    raise ValueError(msg)
                values[name] = int(bound[name])
        pending = {n: a for n, a in self.axes.items() if isinstance(a, AxisExpr)}
        while pending:
            progressed = False
            for name, axis in list(pending.items()):
                if expression_names(axis.expression) <= set(values):
                    values[name] = evaluate_expression(axis.expression, values)
                    del pending[name]
                    progressed = True
            if not progressed:
                msg = f"axis expressions form a cycle: {sorted(pending)}"
                raise ValueError(msg)
        return values

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        """Concrete shape of a tensor spec under resolved axes (None for a scalar)."""
        if spec.shape is None:
            return None
        return tuple(
            d if isinstance(d, int) else int(d) if d.isdigit() else axes[d] for d in spec.shape
        )

    def tensor_bytes(self, bound: dict[str, int]) -> tuple[int, int]:
        """(input bytes, output bytes) of the tensors under a workload's var-axis values
        (scalars count 0).

        Raises:
            ValueError: `bound` does not bind the definition's var axes.
        """
        axes = self.resolve_axes(bound)

        def total(specs: list[TensorSpec]) -> int:
            found = 0.0
            for spec in specs:
                shape = self.shape_of(spec, axes)
                if shape is not None:
                    found += math.prod(shape) * DTYPE_BYTES[spec.dtype]
            return math.ceil(found)

        return total(list(self.inputs.values())), total(list(self.outputs.values()))
