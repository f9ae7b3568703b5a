"""The traced graph as the template checks read it: op names, edges, scalar arguments.

Place in the flow: `template_graph.py` (the GEMM check) and `template_graph_rows.py` (the row
templates' check) read `schema.op_graph` graphs through these; pure, no torch.
"""

from collections.abc import Iterator
from typing import Any

from kernelarc.schema.op_graph import GraphNode

#: Ops that move or re-type data without computing: transparent on an operand's path.
LAYOUT = frozenset(
    {
        "view",
        "reshape",
        "_unsafe_view",
        "expand",
        "clone",
        "contiguous",
        "alias",
        "detach",
        "lift_fresh_copy",
        "_to_copy",
        "convert_element_type",
        "unsqueeze",
        "squeeze",
    }
)


def op_name(target: str) -> str:
    """`aten.mm.default` -> `mm`; `prims.convert_element_type.default` -> the same stem."""
    parts = target.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in {"aten", "prims"} else target


def edge(value: Any) -> str | None:
    """The node an encoded argument names, or None."""
    return value["node"] if isinstance(value, dict) and "node" in value else None


def node_edges(node: GraphNode) -> Iterator[str]:
    """The nodes an op reads, in argument order (lists flattened)."""
    for value in [*node.args, *node.kwargs.values()]:
        for item in value if isinstance(value, list) else [value]:
            name = edge(item)
            if name is not None:
                yield name


def node_scalars(node: GraphNode) -> Iterator[float]:
    """The numeric arguments after the first (booleans left out)."""
    for value in node.args[1:]:
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            yield float(value)


def unscaled(node: GraphNode) -> str | None:
    """Why an op's keyword arguments change what it computes (`alpha`, `beta`, a variance's
    `correction`), or None."""
    op = op_name(node.target)
    for key in ("alpha", "beta"):
        if node.kwargs.get(key, 1) != 1:
            return f"calls {op} with {key}={node.kwargs[key]}"
    if op in {"var", "var_mean"}:
        correction = node.kwargs.get("correction", 1)
        if node.kwargs.get("unbiased") is False:
            correction = 0
        if correction != 0:
            return f"takes an unbiased {op} (correction {correction}); the template's is biased"
    return None
