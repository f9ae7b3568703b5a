"""The GEMM kernel emitter: a tiled matmul whose epilogue (bias, activation, scaling, casts,
residuals: anything pointwise on its output) runs on the accumulator before the one store.

Place in the flow: the scheduler anchors a `GemmSpace` on an mm / addmm / bmm node when the
fused-GEMM knob is on and a root's region reaches the matmul only through pointwise and view
nodes. Each program owns a BLOCK_M x BLOCK_N tile (`xindex` rows, `rindex` columns, `zindex`
the batch), walks K in BLOCK_K steps with `tl.dot` into a float32 accumulator, then pulls the
roots at the tile's index: the matmul's value there is the accumulator.

Operands are pulled like any value (a transposed weight is a view, a cast is pointwise), with
two exceptions: a float32 operand that is a widened 16-bit buffer is loaded in 16 bits and fed
to the tensor cores as such, which is exact (every 16-bit product is exact in float32); and an
operand computed in the loop whose dtype in the reference is 16 bits is rounded to it, as the
reference's matmul receives it. Float32 operands use the `precision` of the launch (`ieee`,
`tf32`, `tf32x3`). A 16-bit matmul's accumulator is rounded to its dtype before the epilogue
reads it, as the reference's epilogue reads the matmul's 16-bit output.
"""

import math
from dataclasses import replace

from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref
from kernelarc.kernelgen.index_expr import IndexExprError, Lin, Var, flat_index
from kernelarc.kernelgen.kernel_types import (
    Buffer,
    KernelSource,
    Launch,
    NeedMaterialize,
    buffer_key,
)
from kernelarc.kernelgen.knobs import fit_stages
from kernelarc.kernelgen.pointwise_ops import TL_DTYPE, to_storage
from kernelarc.kernelgen.space import (
    CODE_NAMES,
    KA_NAME,
    KB_NAME,
    R_NAME,
    X_NAME,
    Z_NAME,
    GemmSpace,
)
from kernelarc.kernelgen.values import INT32_LIMIT, Index, Scope, Val, ValueEmitter, as_dtype
from kernelarc.kernelgen.views import ViewError, broadcast_index, view_index

_WIDENING = "prims.convert_element_type.default"
_HALF = ("float16", "bfloat16")


class GemmEmitter(ValueEmitter):
    """Writes one GEMM kernel with its epilogue; see the module docstring."""

    def __init__(
        self,
        graph: Graph,
        space: GemmSpace,
        buffers: dict[str, Buffer],
        computed_here: set[str],
        launch: Launch,
        name: str,
    ) -> None:
        masks = {X_NAME: "xmask", R_NAME: "rmask", KA_NAME: "kamask", KB_NAME: "kbmask"}
        super().__init__(graph, buffers, computed_here, dict(CODE_NAMES), masks)
        self.space = space
        self.launch = launch
        self.name = name
        self._acc: Val | None = None

    def emit(self, roots: list[Ref]) -> KernelSource:
        """The kernel storing every root (each at its place in the output tile)."""
        targets = []
        for ref in roots:
            index = self._root_index(ref) or self.space.store_index(
                tuple(self.graph.meta(ref).shape)
            )
            if index is None:
                raise NeedMaterialize(ref.node, "does not match the matmul's output")
            targets.append((ref, index))
        self._acc = self._accumulate(self.graph.nodes[self.space.anchor])
        for ref, index in targets:
            self._store(ref, index)
        return self._assemble([ref for ref, _ in targets])

    def _root_index(self, ref: Ref) -> Index | None:
        """The root's index at the tile's element, when the root is the matmul's output
        through one-to-one views and same-shape pointwise ops (a transposed or reshaped
        epilogue); None otherwise (then `store_index`: the same elements in row-major order)."""
        node = self.graph.node(ref)
        if node.name == self.space.anchor:
            return self.space.output_index()
        if ref.node in self.buffers and ref.node not in self.computed_here:
            return None
        shape = tuple(node.meta.shape)
        if node.kind == Kind.VIEW and isinstance(node.args[0], Ref):
            below = self._root_index(node.args[0])
            if below is None:
                return None
            src_shape = tuple(self.graph.meta(node.args[0]).shape)
            try:
                return view_index(node.target, below, shape, src_shape, node.args[1:])
            except (ViewError, IndexExprError):
                return None
        if node.kind == Kind.POINTWISE:
            for arg in node.args:
                if isinstance(arg, Ref) and tuple(self.graph.meta(arg).shape) == shape:
                    found = self._root_index(arg)
                    if found is not None:
                        return found
        return None

    def special_value(self, node: Node, index: Index) -> Val:
        """The accumulator, for the anchor read at the tile's own index."""
        if node.name == self.space.anchor and index == self.space.output_index():
            assert self._acc is not None
            return self._acc
        raise NeedMaterialize(node.name, f"{node.target} is not this GEMM's tile")

    # -- the K loop --------------------------------------------------------------------------
    def _accumulate(self, node: Node) -> Val:
        space = self.space
        tile = frozenset({X_NAME, R_NAME} | ({Z_NAME} if space.batch else set()))
        self.kernel.lines.append("acc = tl.zeros([XBLOCK, RBLOCK], dtype=tl.float32)")
        a_ref, b_ref, bias = operands(node)
        z = (Lin.of(Var(Z_NAME, space.batch)),) if space.batch else ()
        rows = Lin.of(Var(X_NAME, space.m))
        cols = Lin.of(Var(R_NAME, space.n))
        self.loop = Scope()
        self.loop_vars = frozenset({KA_NAME, KB_NAME})
        a = self._dot_operand(a_ref, (*z, rows, Lin.of(Var(KA_NAME, space.k))))
        b = self._dot_operand(b_ref, (*z, Lin.of(Var(KB_NAME, space.k)), cols))
        self.launch = fit_stages(self.launch, a.dtype, b.dtype)  # the tiles' dtypes are known now
        # A dim of extent 1 drops out of the index (it is always 0): widen to the full tile.
        a = replace(a, code=f"tl.broadcast_to({a.code}, (XBLOCK, KBLOCK))")
        b = replace(b, code=f"tl.broadcast_to({b.code}, (KBLOCK, RBLOCK))")
        self.loop.lines.append(f"acc = {self._dot(a, b)}")
        self._close_loop()
        acc = Val("acc", "float32", tile)
        if bias is not None:
            beta = node.kwargs.get("beta", 1)
            alpha = node.kwargs.get("alpha", 1)
            bias_index = broadcast_index(
                space.output_index(), space.shape, tuple(self.graph.meta(bias).shape)
            )
            bias_val = self.value(bias, bias_index)
            scaled_bias = as_dtype(bias_val, "float32") + (
                "" if beta == 1 else f" * {float(beta)!r}"
            )
            scaled_acc = "acc" if alpha == 1 else f"acc * {float(alpha)!r}"
            acc = self.assign(f"({scaled_bias} + {scaled_acc})", "float32", tile)
        if node.meta.dtype in _HALF:
            # The reference's matmul returns 16-bit values: its epilogue starts from those.
            rounded = f"(({acc.code}).to({TL_DTYPE[node.meta.dtype]})).to(tl.float32)"
            acc = self.assign(rounded, "float32", tile)
        return acc

    def _dot(self, a: Val, b: Val) -> str:
        if a.dtype == b.dtype and a.dtype in _HALF and self.launch.half_dot:
            return f"tl.dot({a.code}, {b.code}, acc)"
        a_code, b_code = as_dtype(a, "float32"), as_dtype(b, "float32")
        return f'tl.dot({a_code}, {b_code}, acc, input_precision="{self.launch.precision}")'

    def _dot_operand(self, ref: Ref, index: Index) -> Val:
        """The operand tile; a 16-bit buffer behind views and widening casts is loaded in 16
        bits (see the module docstring)."""
        current, at = ref, index
        while not self.is_buffer(current):
            node = self.graph.node(current)
            if node.kind == Kind.VIEW:
                [(current, at)] = self.operand_indices(node, at)
                continue
            source = node.args[0] if node.args else None
            if (
                node.target == _WIDENING
                and isinstance(source, Ref)
                and node.meta.dtype == "float32"
                and self.graph.meta(source).dtype in _HALF
            ):
                current = source
                continue
            return self._computed_operand(current, at)
        if self.buffers[buffer_key(current)].meta.dtype in _HALF:
            return self.load(current, at, upcast=False)
        return self.value(ref, index)

    def _computed_operand(self, ref: Ref, index: Index) -> Val:
        """An operand computed in the loop (a fused prologue): in its own dtype when that is
        16 bits, as the reference's matmul gets it, which is also the tensor cores' fast path
        (computed in float32, a 16-bit operand is rounded once)."""
        val = self.value(ref, index)
        mask = self.mask(val.vars)
        if mask:  # a padded lane's prologue of loaded zeros may be 0 / 0; the dot needs a 0
            val = self.assign(f"tl.where({mask}, {val.code}, 0)", val.dtype, val.vars)
        dtype = self.graph.meta(ref).dtype
        if dtype not in _HALF or val.dtype == dtype:
            return val
        return self.assign(f"({val.code}).to({TL_DTYPE[dtype]})", dtype, val.vars)

    def _close_loop(self, bounds: tuple[str, str] = ("0", "")) -> None:
        """Append the K loop (from `bounds[0]` to `bounds[1]`, default the whole K)."""
        assert self.loop is not None
        k = self.space.k
        start, stop = bounds[0], bounds[1] or str(k)
        self.kernel.lines.append(f"for k0 in range({start}, {stop}, KBLOCK):")
        self.kernel.lines.append("    ka = k0 + tl.arange(0, KBLOCK)[None, :]")
        self.kernel.lines.append("    kb = k0 + tl.arange(0, KBLOCK)[:, None]")
        self.kernel.lines.append(f"    kamask = ka < {k}")
        self.kernel.lines.append(f"    kbmask = kb < {k}")
        self.kernel.lines.extend(f"    {line}" for line in self.loop.lines)
        self.loop = None
        self.loop_vars = frozenset()

    # -- stores and assembly -----------------------------------------------------------------
    def _store(self, ref: Ref, index: Index) -> None:
        val = self.value(ref, index)
        meta = self.graph.meta(ref)
        flat = flat_index(index, tuple(meta.shape))
        self.max_address = max(self.max_address, flat.max_value() + 1)
        pointer = self.pointers.setdefault(ref.node, f"p{len(self.pointers)}")
        value = to_storage(val.code, val.dtype, meta.dtype)
        address = flat.code(self.names)
        # An output dim of extent 1 drops out of the index: keep the pointer a full tile.
        for var, name in ((X_NAME, "xindex"), (R_NAME, "rindex")):
            if var not in flat.variables():
                address += f" + 0 * {name}"
        mask = self.mask({X_NAME, R_NAME})
        self.kernel.lines.append(f"tl.store({pointer} + ({address}), {value}, {mask})")

    def _assemble(self, stores: list[Ref]) -> KernelSource:
        space = self.space
        wide = self.max_address > INT32_LIMIT
        blocks_m = math.ceil(space.m / self.launch.xblock)
        blocks_n = math.ceil(space.n / self.launch.rblock)
        cast = ".to(tl.int64)" if wide else ""
        body = [
            "pid = tl.program_id(0)",
            "group = GROUP_M * " + str(blocks_n),
            "first_m = (pid // group) * GROUP_M",
            f"size_m = tl.minimum({blocks_m} - first_m, GROUP_M)",
            "pid_m = first_m + (pid % group) % size_m",
            "pid_n = (pid % group) // size_m",
            f"xindex = pid_m{cast} * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
            f"rindex = pid_n{cast} * RBLOCK + tl.arange(0, RBLOCK)[None, :]",
            f"xmask = xindex < {space.m}",
            f"rmask = rindex < {space.n}",
        ]
        if space.batch:
            body.append(f"zindex = tl.program_id(1){cast}")
        body.extend(self.kernel.lines)
        params = [*self.pointers.values(), *self.scalars.values()]
        params += [f"{c}: tl.constexpr" for c in ("XBLOCK", "RBLOCK", "KBLOCK", "GROUP_M")]
        lines = ["@triton.jit", f"def {self.name}({', '.join(params)}):"]
        source = "\n".join(lines + [f"    {line}" for line in body]) + "\n"
        return KernelSource(
            name=self.name,
            source=source,
            pointers=list(self.pointers),
            scalars=list(self.scalars),
            stores=stores,
            grid=(blocks_m * blocks_n, max(space.batch, 1)),
            launch=self.launch,
        )


def operands(node: Node) -> tuple[Ref, Ref, Ref | None]:
    """(A, B, bias) of an mm / bmm / addmm node."""
    if node.target == "aten.addmm.default":
        bias, a, b = node.args[0], node.args[1], node.args[2]
        return a, b, bias
    return node.args[0], node.args[1], None


def gemm_space(graph: Graph, node: Node) -> GemmSpace | None:
    """The space of a GEMM kernel anchored on `node`, or None when its operands do not fit
    (integer dtypes, unexpected ranks, a non-tensor bias)."""
    a_ref, b_ref, bias = operands(node)
    if not isinstance(a_ref, Ref) or not isinstance(b_ref, Ref):
        return None
    if bias is not None and not isinstance(bias, Ref):
        return None
    a, b = graph.meta(a_ref), graph.meta(b_ref)
    if node.meta.dtype not in ("float16", "bfloat16", "float32"):
        return None
    if node.target == "aten.bmm.default":
        if len(a.shape) != 3 or len(b.shape) != 3:
            return None
        return GemmSpace(node.name, a.shape[0], a.shape[1], b.shape[2], a.shape[2])
    if len(a.shape) != 2 or len(b.shape) != 2:
        return None
    return GemmSpace(node.name, 0, a.shape[0], b.shape[1], a.shape[1])
