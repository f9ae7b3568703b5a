"""The traced operator graph of a reference: what `python -m kernelarc.tracing` writes.

Place in the flow: the tracer runs a definition's reference on fake tensors (one trace per
workload shape) and records the ATen operator graph in these models; the kernel generator
(`kernelarc.kernelgen`) reads them without importing torch.

Arguments are JSON values with tagged objects for what JSON lacks: `{"node": name}` (an edge,
`"index"` for one output of a multi-output node), `{"dtype": "float32"}`, `{"float": "inf"}`,
`{"device": "..."}`, `{"other": repr}` for anything else. Lists stay lists.
"""

from typing import Any, Literal

from pydantic import Field

from kernelarc.schema.base import RecordModel


class TensorMeta(RecordModel):
    """Shape, strides and dtype of one tensor value."""

    shape: list[int]
    """Sizes."""
    stride: list[int]
    """Strides in elements."""
    dtype: str
    """torch dtype name without the `torch.` prefix (`float32`, `bfloat16`, `int64`, `bool`)."""
    offset: int = 0
    """Storage offset in elements."""


class GraphNode(RecordModel):
    """One operator call."""

    name: str
    """Unique within the graph."""
    target: str
    """`aten.add.Tensor`, `prims.convert_element_type.default`, `getitem`, ..."""
    args: list[Any] = Field(default_factory=list)
    """Positional arguments (encoded, see the module docstring)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments (encoded)."""
    outputs: list[TensorMeta | None] = Field(default_factory=list)
    """One entry per output (None for a non-tensor output); one entry for a single tensor."""
    multi: bool = False
    """True when the op returns a tuple (its users are `getitem` nodes)."""


class GraphInput(RecordModel):
    """A positional input of the reference, in definition order."""

    name: str
    """The definition's input name."""
    node: str
    """The graph's name for it."""
    kind: Literal["tensor", "scalar", "constant"]
    """tensor: a tensor input; scalar: a Python scalar traced as a 0-d tensor (becomes a kernel
    argument); constant: a Python scalar whose value was baked into the graph (`value`)."""
    meta: TensorMeta | None = None
    """For tensor inputs (and the 0-d stand-in of a scalar)."""
    value: Any = None
    """The baked value of a `constant` input."""


class OpGraph(RecordModel):
    """The graph of one reference call at one input signature."""

    inputs: list[GraphInput]
    """Every reference input, in order."""
    nodes: list[GraphNode]
    """Operator calls in a valid execution order."""
    outputs: list[Any]
    """The returned values in output order (encoded arguments, usually node edges)."""


class TracedWorkload(RecordModel):
    """The graph of the reference at one workload's shapes."""

    uuid: str
    """The workload's uuid."""
    graph: OpGraph | None = None
    """None when tracing failed (see `error`)."""
    error: str | None = None
    """Why tracing failed."""


class TraceSet(RecordModel):
    """Every traced workload of a problem."""

    definition: str
    """The definition name."""
    reference_hash: str
    """sha256 of the reference source the graphs come from."""
    torch_version: str
    """torch that traced it (decompositions differ between versions)."""
    workloads: list[TracedWorkload]
    """In the order they were given."""
