"""The row templates' check against the traced graph: softmax, rmsnorm, add_layernorm.

Place in the flow: `template_graph.confirm_match` calls `check_rows` for a row family's match.
The graph must be exactly the family's computation, step by step (`ROW_RULES`), reduce whole
rows of `x` only, and return what the template returns.
"""

from math import isclose

from kernelarc.agents.triton.template_graph_ops import (
    LAYOUT,
    edge,
    node_edges,
    node_scalars,
    op_name,
    unscaled,
)
from kernelarc.agents.triton.template_matchers import TemplateMatch
from kernelarc.schema.op_graph import OpGraph

#: Each row template's computation as rules: (op, operand kinds, scalar tag) -> the kind of
#: value it computes. Operand kinds are the inputs' roles ("x", "residual", "weight", "bias";
#: `x` is "h" when there is no residual) or kinds computed before, in argument order (sorted for
#: the commutative `add` and `mul`); the scalar tag names the op's one scalar ("eps", "C" the row
#: length, "1/C", else the literal), "" for none. Layout ops keep their operand's kind. Anything
#: else (another op, constant, operand or wiring) computes something the template does not.
_Rule = tuple[str, tuple[str, ...], str]
_RSTD_RULES: dict[_Rule, str] = {  # from the variance (+ eps) "v" to the normalised "n"
    ("add", ("v",), "eps"): "ve",
    ("rsqrt", ("ve",), ""): "r",
    ("sqrt", ("ve",), ""): "s",
    ("pow", ("ve",), "0.5"): "s",
    ("pow", ("ve",), "-0.5"): "r",
    ("reciprocal", ("s",), ""): "r",
    ("mul", ("r",), "1"): "r",  # 1.0 / s traces to reciprocal(s) * 1.0
}
ROW_RULES: dict[str, dict[_Rule, str]] = {
    "softmax": {
        ("_softmax", ("x",), ""): "out",
        ("amax", ("x",), ""): "max",
        ("sub", ("x", "max"), ""): "shifted",
        ("exp", ("x",), ""): "e",
        ("sum", ("e",), ""): "z",
        ("div", ("e", "z"), ""): "out",
        ("exp", ("shifted",), ""): "es",
        ("sum", ("es",), ""): "zs",
        ("div", ("es", "zs"), ""): "out",
    },
    "rmsnorm": {
        ("add", ("residual", "x"), ""): "h",
        ("pow", ("h",), "2"): "sq",
        ("mul", ("h", "h"), ""): "sq",
        ("mean", ("sq",), ""): "v",
        ("sum", ("sq",), ""): "ss",
        ("div", ("ss",), "C"): "v",
        ("mul", ("ss",), "1/C"): "v",
        **_RSTD_RULES,
        ("mul", ("h", "r"), ""): "n",
        ("div", ("h", "s"), ""): "n",
        ("mul", ("n", "weight"), ""): "out",
        ("mul", ("r", "weight"), ""): "rw",
        ("mul", ("h", "rw"), ""): "out",
    },
    "add_layernorm": {
        ("add", ("residual", "x"), ""): "h",
        ("var_mean", ("h",), ""): "vm",
        ("getitem", ("vm",), "0"): "v",
        ("getitem", ("vm",), "1"): "mean",
        ("mean", ("h",), ""): "mean",
        ("var", ("h",), ""): "v",
        ("sub", ("h", "mean"), ""): "d",
        ("pow", ("d",), "2"): "d2",
        ("mul", ("d", "d"), ""): "d2",
        ("mean", ("d2",), ""): "v",
        **_RSTD_RULES,
        ("mul", ("d", "r"), ""): "n",
        ("div", ("d", "s"), ""): "n",
        ("mul", ("n", "weight"), ""): "nw",
        ("add", ("bias", "nw"), ""): "out",
    },
}
_COMMUTATIVE = frozenset({"add", "mul"})
#: Ops whose scalar arguments are operands (elsewhere they are dims and flags).
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "pow", "getitem"})
_REDUCTIONS = frozenset(
    {
        "amax",
        "amin",
        "sum",
        "mean",
        "var_mean",
        "var",
        "max",
        "min",
        "prod",
        "logsumexp",
        "_softmax",
    }
)


def _scalar_tag(value: float, eps: float | None, row: int) -> str:
    if eps is not None and isclose(value, eps, rel_tol=1e-6):
        return "eps"
    if value == row:
        return "C"
    if isclose(value, 1 / row, rel_tol=1e-6):
        return "1/C"
    return f"{value:g}"


def check_rows(match: TemplateMatch, graph: OpGraph) -> str | None:
    """The graph is the family's computation (`ROW_RULES`) and returns what the template
    returns; every reduction runs over whole rows of `x` (the last axis, at its length)."""
    rules = ROW_RULES[match.family]
    roles = dict(match.input_roles)
    eps_text = dict(match.constants).get("EPS")
    eps = float(eps_text) if eps_text is not None else None
    x_meta = next((i.meta for i in graph.inputs if i.name == roles["x"]), None)
    row = x_meta.shape[-1] if x_meta and x_meta.shape else 0
    names = {name: role for role, name in roles.items()}
    if match.family == "rmsnorm" and "residual" not in roles:
        names[roles["x"]] = "h"
    kinds = {i.node: names.get(i.name, "?") for i in graph.inputs}
    shapes = {i.node: i.meta.shape for i in graph.inputs if i.meta}
    for node in graph.nodes:
        op = op_name(node.target)
        edges = list(node_edges(node))
        operands = [kinds.get(e, "?") for e in edges]
        if op in _REDUCTIONS:
            shape = shapes.get(edges[0], []) if edges else []
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            dims = dims if isinstance(dims, list) else [dims]
            if dims == [None] or {int(d) % max(len(shape), 1) for d in dims} != {len(shape) - 1}:
                return (
                    f"reduces ({op}) over axes {dims} of a rank-{len(shape)} tensor, not the last"
                )
            if shape[-1] != row:
                return f"reduces ({op}) over rows of {shape[-1]}, not the whole rows of {row}"
        why = unscaled(node)
        if why:
            return why
        if op in LAYOUT and len(operands) == 1:
            kind = operands[0]
        else:
            scalars = list(node_scalars(node)) if op in _ARITHMETIC else []
            tag = _scalar_tag(scalars[0], eps, row) if len(scalars) == 1 else ""
            if len(scalars) > 1:
                tag = "?"
            key = tuple(sorted(operands)) if op in _COMMUTATIVE else tuple(operands)
            found = rules.get((op, key, tag))
            if found is None:
                with_scalar = f" with {tag}" if tag else ""
                return (
                    f"applies {op} to ({', '.join(operands)}){with_scalar}; the "
                    f"{match.family} template computes no such step"
                )
            kind = found
        kinds[node.name] = kind
        if node.outputs and node.outputs[0] is not None:
            shapes[node.name] = node.outputs[0].shape
    returned = [kinds.get(edge(o) or "", "?") for o in graph.outputs]
    expected = ["out" if index == 0 else "h" for index in match.output_order]
    if returned != expected:
        return f"returns ({', '.join(returned)}); the template returns ({', '.join(expected)})"
    return None
