"""Pulling values into a kernel: the shared core of the emitters.

Place in the flow: `emit.KernelEmitter` (pointwise and reduction kernels) and
`gemm_emit.GemmEmitter` (matmuls with fused epilogues) subclass `ValueEmitter`. A value is
*pulled* at an index: a pointwise node pulls its operands at the broadcast index, a view
re-indexes its source (`views.py`), a cat or padding pulls the piece its index falls in with
that piece's bounds added to every load mask (`piecewise.py`), a buffer becomes a masked load
at the address of the index. Each (node, index, predicate) is computed once; a value goes into
the current loop's body only when it depends on a variable the loop changes, otherwise it is
computed once before the loop. Subclasses supply the values of reductions and matmuls.
"""

from dataclasses import dataclass, field
from typing import Any

from kernelarc.kernelgen.gathers import GatherError, GatherPlan, gather_plan
from kernelarc.kernelgen.graph_ir import (
    CONSTANT_TARGET,
    DTypeArg,
    Graph,
    Kind,
    Node,
    OtherArg,
    Ref,
)
from kernelarc.kernelgen.index_expr import IndexExprError, Lin
from kernelarc.kernelgen.kernel_types import Buffer, NeedMaterialize, buffer_key
from kernelarc.kernelgen.piecewise import Piece, pieces
from kernelarc.kernelgen.pointwise_ops import (
    POINTWISE,
    TL_DTYPE,
    Operand,
    UnsupportedOp,
    compute_dtype,
    literal,
)
from kernelarc.kernelgen.views import ViewError, broadcast_index, source_index

Index = tuple[Lin, ...]
INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Val:
    """A value in the kernel: a name or literal, its compute dtype, the variables it uses."""

    code: str
    dtype: str
    vars: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Predicate:
    """Where the values being pulled are needed (inside a cat piece or a padding's interior)."""

    code: str
    vars: frozenset[str]


_MemoKey = tuple[str, int, Index, str]


@dataclass
class Scope:
    """Statements of the kernel body or of one loop body, and what they computed."""

    lines: list[str] = field(default_factory=list)
    memo: dict[_MemoKey, Val] = field(default_factory=dict)


class ValueEmitter:
    """Pull-based value emission over one kernel's variables (see the module docstring)."""

    def __init__(
        self,
        graph: Graph,
        buffers: dict[str, Buffer],
        computed_here: set[str],
        names: dict[str, str],
        masks: dict[str, str],
    ) -> None:
        self.graph = graph
        self.buffers = buffers
        self.computed_here = computed_here
        self.names = names
        """Index variable -> its name in the kernel source."""
        self.masks = masks
        """Index variable -> the mask of its valid values."""
        self.kernel = Scope()
        self.loop: Scope | None = None
        self.loop_vars: frozenset[str] = frozenset()
        self.pointers: dict[str, str] = {}
        self.scalars: dict[str, str] = {}
        self.max_address = 1
        self._temps = 0
        self._predicate: Predicate | None = None
        self.loads = 0
        """Loads written into the kernel so far."""
        self.indices: dict[str, set[Index]] = {}
        """Pointwise node -> the indices it was computed at (more than one: recomputed)."""

    # -- what subclasses provide -------------------------------------------------------------
    def special_value(self, node: Node, index: Index) -> Val:
        """The value of a reduction or matmul node (NeedMaterialize when not computable)."""
        raise NeedMaterialize(node.name, f"{node.kind} {node.target} is not fused here")

    # -- structure ---------------------------------------------------------------------------
    def is_buffer(self, ref: Ref) -> bool:
        """Read through a pointer (not computed by this kernel)."""
        return buffer_key(ref) in self.buffers and ref.node not in self.computed_here

    def operand_indices(self, node: Node, index: Index) -> list[tuple[Ref, Index]]:
        """The (edge, index) pairs a pointwise, view or piecewise node reads at `index`."""
        shape = tuple(node.meta.shape)
        try:
            if node.kind == Kind.VIEW:
                src: Ref = node.args[0]
                src_shape = tuple(self.graph.meta(src).shape)
                return [(src, source_index(node.target, index, shape, src_shape, node.args[1:]))]
            if node.kind == Kind.PIECEWISE:
                found = pieces(self.graph, node, index)
                return [(p.source, p.index) for p in found if p.source is not None and p.index]
            if node.kind == Kind.POINTWISE:
                return [
                    (ref, broadcast_index(index, shape, tuple(self.graph.meta(ref).shape)))
                    for ref in node.args
                    if isinstance(ref, Ref)
                ]
            if node.kind == Kind.GATHER:
                plan = self._gather_plan(node, index)
                return [(plan.index, plan.index_at)]
        except (IndexExprError, ViewError) as exc:
            raise NeedMaterialize(node.name, str(exc)) from exc
        raise NeedMaterialize(node.name, f"{node.kind} node {node.target} cannot be fused")

    # -- values ------------------------------------------------------------------------------
    def value(self, ref: Ref, index: Index) -> Val:
        """The value of an edge at an index (computed once per kernel or loop)."""
        predicate = self._predicate.code if self._predicate else ""
        key = (ref.node, ref.index or 0, index, predicate)
        for scope in (self.loop, self.kernel):
            if scope is not None and key in scope.memo:
                return scope.memo[key]
        try:
            val = self._compute(ref, index)
        except (IndexExprError, ViewError) as exc:
            raise NeedMaterialize(ref.node, str(exc)) from exc
        self._scope_for(val.vars).memo[key] = val
        return val

    def assign(self, expr: str, dtype: str, variables: frozenset[str]) -> Val:
        """A new temporary holding `expr`, in the scope its variables call for."""
        self._temps += 1
        name = f"t{self._temps}"
        self._scope_for(variables).lines.append(f"{name} = {expr}")
        return Val(name, dtype, variables)

    def load(
        self, ref: Ref, index: Index, *, upcast: bool = True, offset: Val | None = None
    ) -> Val:
        """A masked load of a buffer at `index` (16-bit floats widened unless `upcast` is off),
        plus `offset` elements (a gather's loaded index times its stride, whose largest value
        is the buffer's extent along that dim)."""
        buffer = self.buffers[buffer_key(ref)]
        meta = buffer.meta
        address = Lin()
        for i, stride in zip(index, meta.stride, strict=True):
            address = address + i * stride
        top = address.max_value() + 1
        if offset is not None:
            top += max((s - 1) * st for s, st in zip(meta.shape, meta.stride, strict=True))
        self.max_address = max(self.max_address, top)
        variables = address.variables() | (offset.vars if offset is not None else frozenset())
        mask = self.mask(variables)
        if self._predicate is not None:
            variables = variables | self._predicate.vars
            mask = f"{mask} & {self._predicate.code}" if mask else self._predicate.code
        self.loads += 1
        pointer = self.pointers.setdefault(buffer.name, f"p{len(self.pointers)}")
        where = address.code(self.names) + (f" + {offset.code}" if offset is not None else "")
        args = f"{pointer} + ({where})" + (f", {mask}, other=0" if mask else "")
        expr = f"tl.load({args})"
        dtype = compute_dtype(meta.dtype) if upcast else meta.dtype
        if dtype != meta.dtype and meta.dtype != "bool":
            expr = f"{expr}.to({TL_DTYPE[dtype]})"
        return self.assign(expr, dtype if meta.dtype != "bool" else "bool", frozenset(variables))

    def mask(self, variables: frozenset[str] | set[str]) -> str:
        """The conjunction of the masks of `variables` ('' when none has one)."""
        return " & ".join(self.masks[v] for v in sorted(variables) if v in self.masks)

    def _scope_for(self, variables: frozenset[str]) -> Scope:
        if self.loop is not None and variables & self.loop_vars:
            return self.loop
        return self.kernel

    def _compute(self, ref: Ref, index: Index) -> Val:
        node = self.graph.node(ref)
        if self.is_buffer(ref):
            return self.load(ref, index)
        if node.kind == Kind.SCALAR:
            name = self.scalars.setdefault(node.name, f"s{len(self.scalars)}")
            return Val(name, compute_dtype(node.meta.dtype))
        if node.kind in (Kind.REDUCTION, Kind.MATMUL, Kind.SCAN):
            return self.special_value(node, index)
        if node.kind == Kind.VIEW:
            [(src, mapped)] = self.operand_indices(node, index)
            return self.value(src, mapped)
        if node.kind == Kind.PIECEWISE:
            return self._piecewise(node, index)
        if node.kind == Kind.FACTORY:
            return self._factory(node, index)
        if node.kind == Kind.POINTWISE:
            self.indices.setdefault(node.name, set()).add(index)
            return self._pointwise(node, index)
        if node.kind == Kind.GATHER:
            return self._gather(node, index)
        raise NeedMaterialize(node.name, f"{node.target} is not fusable")

    def _gather(self, node: Node, index: Index) -> Val:
        """The source loaded at the index the index tensor holds (`gathers.py`)."""
        plan = self._gather_plan(node, index)
        position = self.value(plan.index, plan.index_at)
        size = self.graph.meta(plan.source).shape[plan.dim]
        stride = self.buffers[buffer_key(plan.source)].meta.stride[plan.dim]
        wrapped = f"tl.where({position.code} < 0, {position.code} + {size}, {position.code})"
        # In 64 bits: an int32 index times a row's stride overflows past 2**31 elements.
        offset = self.assign(f"({wrapped}).to(tl.int64) * {stride}", "int64", position.vars)
        return self.load(plan.source, plan.source_index, offset=offset)

    def _gather_plan(self, node: Node, index: Index) -> GatherPlan:
        try:
            plan = gather_plan(self.graph, node, index)
        except GatherError as exc:
            raise NeedMaterialize(node.name, str(exc)) from exc
        if not self.is_buffer(plan.source):
            raise NeedMaterialize(plan.source.node, "gathered from: stored once")
        return plan

    def check_recomputation(self, limit: int) -> None:
        """Past `limit` loads, store the value computed at the most indices instead of
        recomputing it at each (a pooling of a pooling: every outer tap recomputes the inner
        window); the latest in graph order of those tied, the top of the recomputed chain.

        Raises:
            NeedMaterialize: for that node, when the kernel has over `limit` loads and some
                value is computed at more than one index.
        """
        if self.loads <= limit:
            return
        order = {name: i for i, name in enumerate(self.graph.nodes)}
        recomputed = [
            (len(at), order[name], name)
            for name, at in self.indices.items()
            if len(at) > 1 and name not in self.computed_here  # a root is stored already
        ]
        if not recomputed:
            return
        count, _, name = max(recomputed)
        msg = f"computed at {count} indices in a kernel of {self.loads} loads: stored once instead"
        raise NeedMaterialize(name, msg)

    def _pointwise(self, node: Node, index: Index) -> Val:
        shape = tuple(node.meta.shape)
        operands: list[Operand] = []
        variables: frozenset[str] = frozenset()
        for arg in node.args:
            if isinstance(arg, Ref):
                arg_index = broadcast_index(index, shape, tuple(self.graph.meta(arg).shape))
                val = self.value(arg, arg_index)
                variables |= val.vars
                operands.append(Operand(val.code, val.dtype))
            elif isinstance(arg, DTypeArg | OtherArg) or arg is None:
                operands.append(literal(None))
            elif isinstance(arg, bool | int | float):
                operands.append(literal(arg))
            else:
                raise NeedMaterialize(node.name, f"argument {arg!r} of {node.target}")
        out_dtype = node.meta.dtype
        try:
            expr = POINTWISE[node.target](operands, node.kwargs, out_dtype)
        except (UnsupportedOp, KeyError, IndexError, ValueError) as exc:
            raise NeedMaterialize(node.name, f"{node.target}: {exc}") from exc
        return self.assign(expr, compute_dtype(out_dtype), variables)

    def _piecewise(self, node: Node, index: Index) -> Val:
        dtype = compute_dtype(node.meta.dtype)
        chosen: list[tuple[Predicate | None, Val]] = []
        for piece in pieces(self.graph, node, index):
            predicate = self._piece_predicate(piece)
            outer = self._predicate
            self._predicate = _and(outer, predicate)
            try:
                if piece.source is not None and piece.index is not None:
                    val = self.value(piece.source, piece.index)
                else:
                    val = Val(literal(piece.constant).code, dtype)
            finally:
                self._predicate = outer
            chosen.append((predicate, val))
        variables: frozenset[str] = frozenset()
        for predicate, val in chosen:
            variables |= val.vars | (predicate.vars if predicate else frozenset())
        code = as_dtype(chosen[-1][1], dtype)
        for predicate, val in reversed(chosen[:-1]):
            condition = predicate.code if predicate is not None else "True"
            code = f"tl.where({condition}, {as_dtype(val, dtype)}, {code})"
        return self.assign(code, dtype, variables)

    def _piece_predicate(self, piece: Piece) -> Predicate | None:
        if not piece.bounds:
            return None
        parts = []
        variables: set[str] = set()
        for bound in piece.bounds:
            symbol = ">=" if bound.lower else "<"
            parts.append(f"({bound.expr.code(self.names)} {symbol} {bound.value})")
            variables |= bound.expr.variables()
        return Predicate(" & ".join(parts), frozenset(variables))

    def _factory(self, node: Node, index: Index) -> Val:
        dtype = node.meta.dtype
        constant = node.target in (
            "aten.full.default",
            "aten.scalar_tensor.default",
            CONSTANT_TARGET,
        )
        if constant:
            value = node.args[1] if node.target == "aten.full.default" else node.args[0]
            if node.target == CONSTANT_TARGET:
                value = value[0]
            if dtype == "bool":
                return Val("True" if value else "False", "bool")
            floating = dtype in ("float16", "bfloat16", "float32", "float64")
            return Val(literal(float(value) if floating else value).code, compute_dtype(dtype))
        start, step = _arange_bounds(node)
        position = index[0] if index else Lin()
        expr = f"({start} + {step} * ({position.code(self.names)}))"
        if not position.variables():  # one element (a query row of one): a typed constant
            value = start + step * position.const
            return Val(f"tl.full([], {value!r}, {TL_DTYPE[dtype]})", compute_dtype(dtype))
        return self.assign(
            f"({expr}).to({TL_DTYPE[dtype]})", compute_dtype(dtype), position.variables()
        )


def as_dtype(val: Val, dtype: str) -> str:
    """`val` converted to `dtype` (as source)."""
    if val.dtype == dtype:
        return val.code
    if _is_literal(val.code):  # a Python number has no `.to`: a typed 0-d tensor instead
        return f"tl.full([], {val.code}, {TL_DTYPE[dtype]})"
    return f"({val.code}).to({TL_DTYPE[dtype]})"


def _is_literal(code: str) -> bool:
    """A Python number literal (`0`, `-1.5`, `float("inf")`)."""
    if code.startswith('float("') and code.endswith('")'):
        return True
    try:
        float(code)
    except ValueError:
        return False
    return True


def _and(a: Predicate | None, b: Predicate | None) -> Predicate | None:
    if a is None:
        return b
    if b is None:
        return a
    return Predicate(f"{a.code} & {b.code}", a.vars | b.vars)


def _arange_bounds(node: Node) -> tuple[Any, Any]:
    if node.target == "prims.iota.default":
        return node.kwargs.get("start", 0), node.kwargs.get("step", 1)
    if node.target == "aten.arange.default":
        return 0, 1
    start = node.args[0]
    step = node.args[2] if len(node.args) > 2 else node.kwargs.get("step", 1)
    return start, step
