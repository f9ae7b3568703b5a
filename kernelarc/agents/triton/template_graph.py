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
- gemm_epilogue: one `mm`/`addmm` (no alpha, beta); its first operand is input `a`, its second
  input `b`, each through layout ops only; `B_IS_NK` is set from the transposes on `b`'s path;
  the bias, if any, is `addmm`'s first operand or one `add` (no alpha) of the product itself and
  the bias, shaped [N] or [1, N]; the other ops are exactly one decomposition of the matched
  activation (op counts and constants), reading only the product.
- softmax, rmsnorm, add_layernorm: every op is a step of that computation (`ROW_RULES`: which
  op, of which values, with which constant: eps as matched, a biased variance, no alpha), every
  reduction over whole rows (the last axis, at `x`'s length), and the outputs are the
  template's (the normalised rows, and x + residual where it returns it).
- Other families (their matchers check shapes specific enough): accepted as matched.
"""

from collections import Counter
from dataclasses import replace

from kernelarc.agents.triton.template_graph_ops import (
    LAYOUT,
    node_edges,
    node_scalars,
    op_name,
    unscaled,
)
from kernelarc.agents.triton.template_graph_rows import ROW_RULES, check_rows
from kernelarc.agents.triton.template_matchers import TemplateMatch
from kernelarc.schema.op_graph import GraphNode, OpGraph, TraceSet

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
    if match.family in ROW_RULES:
        why = check_rows(match, graph)
        return why if why else match
    return match


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
        elif op not in LAYOUT:
            return None, flips, passed
        passed.append(name)
        edges = list(node_edges(node))
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
    operands = list(node_edges(product))
    expected = 3 if op_name(product.target) == "addmm" else 2
    if len(operands) != expected:
        return "calls its matrix product with operands the template does not read"
    why = unscaled(product)
    if why:
        return f"{why}; the template adds the bias to the plain product"
    used = {product.name}
    bias_name = roles.get("bias")
    if expected == 3:
        source, _, passed = _source(graph, operands[0], nodes)
        if bias_name is None or source != bias_name:
            return "adds something other than the bias input to its product"
        why = _bias_broadcast(graph, operands[0], product)
        if why:
            return why
        used.update(passed)
        operands = operands[1:]
    a_source, a_flips, a_passed = _source(graph, operands[0], nodes)
    b_source, b_flips, b_passed = _source(graph, operands[1], nodes)
    if a_source != roles["a"] or a_flips:
        return f"does not multiply {roles['a']!r} as it is from the left"
    if b_source != roles["b"]:
        return f"does not multiply by {roles['b']!r}"
    used.update(a_passed + b_passed)
    if bias_name is not None and expected == 2:  # the bias's own casts and views, before its add
        used |= {n.name for n in graph.nodes if _source(graph, n.name, nodes)[0] == bias_name}
    why = _check_epilogue(match, graph, product.name, bias_name if expected == 2 else None, used)
    if why:
        return why
    constants = tuple(
        (key, str(b_flips % 2 == 1)) if key == "B_IS_NK" else (key, value)
        for key, value in match.constants
    )
    return replace(match, constants=constants)


def _bias_broadcast(graph: OpGraph, bias: str, product: GraphNode) -> str | None:
    """Why the bias, as added, is not one value per output column, or None."""
    shapes = {i.node: i.meta.shape for i in graph.inputs if i.meta}
    shapes |= {n.name: n.outputs[0].shape for n in graph.nodes if n.outputs and n.outputs[0]}
    shape, out = shapes.get(bias), shapes.get(product.name)
    if shape is None or out is None:
        return None
    if shape[-1:] != out[-1:] or any(size != 1 for size in shape[:-1]):
        return f"adds its bias as shape {shape} to the {out} product, not one value per column"
    return None


def _origin(name: str, nodes: dict[str, GraphNode]) -> str:
    """The node a value comes from through layout ops only."""
    node = nodes.get(name)
    while node is not None and op_name(node.target) in LAYOUT:
        edges = list(node_edges(node))
        if len(edges) != 1:
            break
        name, node = edges[0], nodes.get(edges[0])
    return name


def _bias_add(
    graph: OpGraph, node: GraphNode, bias: str, product: GraphNode, nodes: dict[str, GraphNode]
) -> str | None:
    """Empty when `node` adds the bias to the product itself (before any activation op), None
    when it is no such add, else why the bias add is not the template's."""
    edges = list(node_edges(node))
    if op_name(node.target) != "add" or len(edges) != 2:
        return None
    sources = [_source(graph, e, nodes)[0] for e in edges]
    if bias not in sources or not any(_origin(e, nodes) == product.name for e in edges):
        return None
    return unscaled(node) or _bias_broadcast(graph, edges[sources.index(bias)], product) or ""


def _check_epilogue(
    match: TemplateMatch, graph: OpGraph, product: str, bias: str | None, used: set[str]
) -> str | None:
    """Every op after the product is the bias add (when `bias`, to the product itself) or the
    activation's."""
    nodes = {n.name: n for n in graph.nodes}
    act = dict(match.constants).get("ACTIVATION", "0")
    forms, constants = _ACTIVATION_FORMS.get(act, ((Counter(),), frozenset()))
    ops = {op for form in forms for op in form}
    applied: Counter[str] = Counter()
    derived = {product}
    bias_added = bias is None
    for node in graph.nodes:
        if node.name in used:
            continue
        edges = list(node_edges(node))
        op = op_name(node.target)
        if not bias_added:
            why = _bias_add(graph, node, bias or "", nodes[product], nodes)
            if why:
                return why
            if why == "":
                derived.add(node.name)
                bias_added = True
                continue
        if op in LAYOUT or op in ops:
            if not edges or any(e not in derived for e in edges):
                return f"applies {op} to something other than the product"
            odd = [c for c in node_scalars(node) if c not in constants]
            if op not in LAYOUT and odd:
                return f"applies {op} with {odd[0]:g}, which the template's epilogue does not"
            derived.add(node.name)
            if op not in LAYOUT:
                applied[op] += 1
            continue
        return f"computes {op} beside the product; the template fuses only bias and activation"
    if not bias_added:
        return "does not add its bias input"
    if applied not in forms:
        found = ", ".join(f"{op} x{n}" for op, n in sorted(applied.items())) or "nothing"
        return f"applies {found} after the product, not the one activation the template fuses"
    return None
