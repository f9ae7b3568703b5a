"""Confirms a hand-written template's match against the reference's traced operator graph.

Place in the flow: `template_library.match_template` binds a template from the definition's
text and shapes (`template_matchers`); when the problem's traced graph is at hand
(`kernelgen.traces`) it asks `confirm_match` whether the reference computes what the template
computes. The text matchers cannot tell `torch.tril(a @ b)` from `a @ b`, nor, for square
matrices, `a @ b` from `a @ b.T`: on KernelBench's square and triangular matmuls every
template candidate came back INCORRECT_NUMERICAL (H100 suite run 15, seven of twelve
candidates of kb_l1_15). The graph settles both: which ops run, over which axes, and whether
the GEMM's second operand is transposed.

Rules (any traced workload that breaks one rejects the template, with the reason):
- gemm_epilogue: one `mm`/`addmm`; its first operand is input `a`, its second input `b`, each
  through layout ops only; `B_IS_NK` is set from the transposes on `b`'s path; the bias, if
  any, is `addmm`'s first operand or one `add` of the product and the bias; the other ops are
  exactly one decomposition of the matched activation (op counts and constants), reading only
  the product.
- softmax, rmsnorm, add_layernorm: only the ops of that computation, and every reduction over
  the last axis.
- Other families (their matchers check shapes specific enough): accepted as matched.
"""

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from kernelarc.agents.triton.template_matchers import TemplateMatch
from kernelarc.schema.op_graph import GraphNode, OpGraph, TraceSet

#: Ops that move or re-type data without computing: transparent on an operand's path.
_LAYOUT = frozenset(
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
_TRANSPOSES = frozenset({"t", "permute", "transpose"})
_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear"})

#: Per GEMM activation code (`template_matchers.find_activation`): the op counts of the
#: decompositions it traces to (as ATen decomposes F.gelu, F.silu, torch.relu, or as written
#: out by hand), and the scalar constants they use.
_ACTIVATION_FORMS: dict[str, tuple[tuple[Counter[str], ...], frozenset[float]]] = {
    "0": ((Counter(),), frozenset()),
    "1": (
        (Counter(gelu=1), Counter(mul=3, erf=1, add=1)),
        frozenset({0.5, 0.7071067811865476, 1.0}),
    ),
    "2": (
        (Counter(gelu=1), Counter(mul=6, add=2, tanh=1), Counter(mul=5, pow=1, add=2, tanh=1)),
        frozenset({0.5, 0.044715, 0.7978845608028654, 1.0, 3.0}),
    ),
    "3": (
        (
            Counter(silu=1),
            Counter(neg=1, exp=1, add=1, div=1),
            Counter(sigmoid=1, mul=1),
        ),
        frozenset({1.0}),
    ),
    "4": ((Counter(relu=1), Counter(clamp_min=1), Counter(threshold=1)), frozenset({0.0})),
}

#: The ops each row template's computation traces to (beside `_LAYOUT`).
_ROW_OPS: dict[str, frozenset[str]] = {
    "softmax": frozenset({"amax", "sub", "exp", "sum", "div", "_softmax"}),
    "rmsnorm": frozenset(
        {"pow", "mean", "add", "rsqrt", "mul", "sqrt", "div", "reciprocal", "sum", "square"}
    ),
    "add_layernorm": frozenset(
        {"add", "var_mean", "getitem", "rsqrt", "sub", "mul", "mean", "var", "pow", "sqrt", "div"}
    ),
}
_REDUCTIONS = frozenset(
    {"amax", "amin", "sum", "mean", "var_mean", "var", "max", "min", "prod", "logsumexp"}
)


def op_name(target: str) -> str:
    """`aten.mm.default` -> `mm`; `prims.convert_element_type.default` -> the same stem."""
    parts = target.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in {"aten", "prims"} else target


def confirm_match(match: TemplateMatch, traces: TraceSet) -> TemplateMatch | str:
    """The match, its layout constants set from the graph, or why the reference computes
    something else than the template (one line, naming the workload)."""
    confirmed = match
    for traced in traces.workloads:
        if traced.graph is None:
            continue
        result = _confirm_one(confirmed, traced.graph)
        if isinstance(result, str):
            return f"the traced reference ({traced.uuid}) {result}"
        confirmed = result
    return confirmed


def _confirm_one(match: TemplateMatch, graph: OpGraph) -> TemplateMatch | str:
    if match.family == "gemm_epilogue":
        return _confirm_gemm(match, graph)
    if match.family in _ROW_OPS:
        why = _check_rows(match.family, graph)
        return why if why else match
    return match


def _edge(value: Any) -> str | None:
    return value["node"] if isinstance(value, dict) and "node" in value else None


def _edges(node: GraphNode) -> Iterator[str]:
    for value in [*node.args, *node.kwargs.values()]:
        for item in value if isinstance(value, list) else [value]:
            name = _edge(item)
            if name is not None:
                yield name


def _scalars(node: GraphNode) -> Iterator[float]:
    for value in node.args[1:]:
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            yield float(value)


def _is_transpose(node: GraphNode) -> bool:
    op = op_name(node.target)
    if op == "t":
        return True
    if op == "permute":
        return node.args[1:2] == [[1, 0]]
    if op == "transpose":
        return sorted(int(d) % 2 for d in node.args[1:3]) == [0, 1]
    return False


def _source(
    graph: OpGraph, name: str, nodes: dict[str, GraphNode]
) -> tuple[str | None, int, list[str]]:
    """Where an operand comes from through layout ops and transposes: (input name or None,
    transposes on the way, the nodes passed)."""
    inputs = {i.node: i.name for i in graph.inputs}
    flips = 0
    passed: list[str] = []
    while name not in inputs:
        node = nodes.get(name)
        if node is None:
            return None, flips, passed
        op = op_name(node.target)
        if op in _TRANSPOSES:
            if not _is_transpose(node):
                return None, flips, passed
            flips += 1
        elif op not in _LAYOUT:
            return None, flips, passed
        passed.append(name)
        edges = list(_edges(node))
        if len(edges) != 1:
            return None, flips, passed
        name = edges[0]
    return inputs[name], flips, passed


def _confirm_gemm(match: TemplateMatch, graph: OpGraph) -> TemplateMatch | str:
    nodes = {n.name: n for n in graph.nodes}
    roles = dict(match.input_roles)
    products = [n for n in graph.nodes if op_name(n.target) in _PRODUCTS]
    if len(products) != 1 or op_name(products[0].target) not in {"mm", "addmm"}:
        found = ", ".join(op_name(n.target) for n in products) or "none"
        return f"has matrix products {found}; the template computes one 2-D product"
    product = products[0]
    operands = list(_edges(product))
    expected = 3 if op_name(product.target) == "addmm" else 2
    if len(operands) != expected:
        return "calls its matrix product with operands the template does not read"
    used = {product.name}
    bias_name = roles.get("bias")
    if expected == 3:
        source, _, passed = _source(graph, operands[0], nodes)
        if bias_name is None or source != bias_name:
            return "adds something other than the bias input to its product"
        used.update(passed)
        operands = operands[1:]
    a_source, a_flips, a_passed = _source(graph, operands[0], nodes)
    b_source, b_flips, b_passed = _source(graph, operands[1], nodes)
    if a_source != roles["a"] or a_flips:
        return f"does not multiply {roles['a']!r} as it is from the left"
    if b_source != roles["b"]:
        return f"does not multiply by {roles['b']!r}"
    used.update(a_passed + b_passed)
    why = _check_epilogue(match, graph, product.name, bias_name if expected == 2 else None, used)
    if why:
        return why
    constants = tuple(
        (key, str(b_flips % 2 == 1)) if key == "B_IS_NK" else (key, value)
        for key, value in match.constants
    )
    return replace(match, constants=constants)


def _check_epilogue(
    match: TemplateMatch, graph: OpGraph, product: str, bias: str | None, used: set[str]
) -> str | None:
    """Every op after the product is the bias add (when `bias`) or the activation's."""
    nodes = {n.name: n for n in graph.nodes}
    act = dict(match.constants).get("ACTIVATION", "0")
    forms, constants = _ACTIVATION_FORMS.get(act, ((Counter(),), frozenset()))
    ops = {op for form in forms for op in form}
    applied: Counter[str] = Counter()
    derived = {product}
    bias_added = bias is None
    if bias is not None:  # the bias's own casts and views, before it is added
        used = used | {n.name for n in graph.nodes if _source(graph, n.name, nodes)[0] == bias}
    for node in graph.nodes:
        if node.name in used:
            continue
        edges = list(_edges(node))
        op = op_name(node.target)
        if not bias_added and op == "add" and len(edges) == 2:
            sources = [_source(graph, e, nodes)[0] for e in edges]
            if bias in sources and any(e in derived for e in edges):
                derived.add(node.name)
                bias_added = True
                continue
        if op in _LAYOUT or op in ops:
            if not edges or any(e not in derived for e in edges):
                return f"applies {op} to something other than the product"
            odd = [c for c in _scalars(node) if c not in constants]
            if op not in _LAYOUT and odd:
                return f"applies {op} with {odd[0]:g}, which the template's epilogue does not"
            derived.add(node.name)
            if op not in _LAYOUT:
                applied[op] += 1
            continue
        return f"computes {op} beside the product; the template fuses only bias and activation"
    if not bias_added:
        return "does not add its bias input"
    if applied not in forms:
        found = ", ".join(f"{op} x{n}" for op, n in sorted(applied.items())) or "nothing"
        return f"applies {found} after the product, not the one activation the template fuses"
    return None


def _check_rows(family: str, graph: OpGraph) -> str | None:
    """Only the family's ops, every reduction over the last axis."""
    allowed = _ROW_OPS[family] | _LAYOUT
    ranks: dict[str, int] = {i.node: len(i.meta.shape) for i in graph.inputs if i.meta}
    for node in graph.nodes:
        meta = node.outputs[0] if node.outputs else None
        if meta is not None:
            ranks[node.name] = len(meta.shape)
        op = op_name(node.target)
        if op not in allowed:
            return f"applies {op}; the {family} template computes no such op"
        if op in _REDUCTIONS:
            source = next(_edges(node), None)
            rank = ranks.get(source or "", 0)
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            dims = dims if isinstance(dims, list) else [dims]
            if rank and (dims == [None] or {int(d) % rank for d in dims} != {rank - 1}):
                return f"reduces ({op}) over axes {dims} of a rank-{rank} tensor, not the last"
    return None
