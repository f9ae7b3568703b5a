"""The pointwise and reduction kernel emitter.

Place in the flow: the scheduler (`schedule.py`) gives a kernel its roots and its `Space`;
`KernelEmitter.emit` writes it. Roots are pulled at their store index (`values.py`); a reduction
is available only at the kernel's own x-index (its row), otherwise `NeedMaterialize` tells the
scheduler to give it a kernel of its own. The scan before emitting finds every reduction the
roots need, so they can be computed first.

Reductions run before the stores: all at once on a [XBLOCK, RBLOCK] tile holding whole rows
(`persistent`), or each in its own loop over RBLOCK-wide chunks, with a last loop for the
stores; later loops re-read their inputs (as Inductor's looped reductions do). Two pairs share
one loop: a max and the sum of exp(x - max) (online softmax), and a Welford pair (the mean and
the M2 of a variance: per lane a running mean and M2 updated with 1/k of the k-th chunk, lanes
merged with `_kg_welford`), so a looped norm reads its rows twice (statistics, stores) and a
softmax twice too. On a whole-rows tile the Welford pair is the exact two-pass formula in
registers (one load); which reductions pair up, and each op's spelling, are `reduce_code.py`'s.
`KernelSource.passes` counts the reads of the rows. The column plan (`Space.column`: a
reduction over a dim that is not the innermost) is the same code over other index variables:
XBLOCK contiguous columns of one `yindex` per program, RBLOCK rows per step.
"""

from typing import Any

from kernelarc.kernelgen.graph_ir import WELFORD_OPS, Graph, Kind, Node, Ref
from kernelarc.kernelgen.index_expr import flat_index
from kernelarc.kernelgen.kernel_types import Buffer, KernelSource, Launch, NeedMaterialize
from kernelarc.kernelgen.knobs import MAX_KERNEL_LOADS, whole_rows
from kernelarc.kernelgen.pointwise_ops import TL_DTYPE, compute_dtype, to_storage
from kernelarc.kernelgen.reduce_code import (
    REDUCER,
    accumulator_dtype,
    combine,
    identity,
    online_pairs,
    reduce_input,
    welford_groups,
)
from kernelarc.kernelgen.space import CODE_NAMES, R_NAME, X_NAME, Space, index_prologue
from kernelarc.kernelgen.values import INT32_LIMIT, Index, Scope, Val, ValueEmitter, as_dtype


class KernelEmitter(ValueEmitter):
    """Writes one pointwise or reduction kernel; see the module docstring."""

    def __init__(
        self,
        graph: Graph,
        space: Space,
        buffers: dict[str, Buffer],
        computed_here: set[str],
        launch: Launch,
        name: str,
    ) -> None:
        masks = {X_NAME: "xmask", R_NAME: "rmask"}
        super().__init__(graph, buffers, computed_here, dict(CODE_NAMES), masks)
        self.space = space
        self.launch = launch
        self.name = name
        self.max_address = max(space.xnumel * space.rnumel, 1)
        self._reduced: dict[str, Val] = {}
        self._scanned: dict[str, Val] = {}
        self._passes = 0

    def emit(self, roots: list[Ref]) -> KernelSource:
        """The kernel storing every root (each at its store index)."""
        targets = []
        for ref in roots:
            index = self.space.store_index(tuple(self.graph.meta(ref).shape))
            if index is None:
                msg = f"{ref.node} has no place in space {self.space.shape} / {self.space.dims}"
                raise NeedMaterialize(ref.node, msg)
            targets.append((ref, index))
        needed: list[str] = []
        seen: set[Any] = set()
        for ref, index in targets:
            self._scan(ref, index, needed, seen)
        order = [n for n in self.graph.nodes if n in needed]
        self._whole_rows_if_needed(order)
        if self.launch.persistent or not self.space.is_reduction:
            groups = welford_groups(self.graph, order)
            for name in order:
                node = self.graph.node(name)
                if node.reduce_op in WELFORD_OPS:
                    if name not in self._reduced:
                        self._welford_tile(groups[name])
                    continue
                source = self.value(node.args[0], self.space.full_index())
                if node.kind == Kind.SCAN:
                    self._scanned[name] = self._scan_tile(node, source)
                    continue
                self._reduced[name] = self._reduce_tile(node, source)
            for ref, index in targets:
                self._store(ref, index)
        else:
            self._emit_looped(order, targets)
        self.check_recomputation(MAX_KERNEL_LOADS)
        return self._assemble([ref for ref, _ in targets])

    def _whole_rows_if_needed(self, order: list[str]) -> None:
        """A persistent launch when an arg-reduction or a scan is among the reductions."""
        if self.launch.persistent and not self.space.column:
            return
        arg = [n for n in order if self.graph.nodes[n].reduce_op in ("argmax", "argmin")]
        if arg and not self.space.column:
            self.launch = whole_rows(self.launch, self.space, arg[0])
        scans = [n for n in order if self.graph.nodes[n].kind == Kind.SCAN]
        if scans and self.space.column:
            raise NeedMaterialize(scans[0], "a scan in a column kernel")
        if scans:
            self.launch = whole_rows(self.launch, self.space, scans[0], warps_for_tile=True)

    def special_value(self, node: Node, index: Index) -> Val:
        """A reduction's [XBLOCK, 1] result (computed before any store)."""
        if node.kind == Kind.REDUCTION and node.name in self._reduced:
            return self._reduced[node.name]
        if node.kind == Kind.SCAN and node.name in self._scanned:
            if index != self.space.full_index():
                raise NeedMaterialize(node.name, "a scan read at another element than its own")
            return self._scanned[node.name]
        raise NeedMaterialize(node.name, f"{node.target} is not computed in this kernel")

    # -- scanning: which reductions the roots need, checked before emitting ------------------
    def _scan(self, ref: Ref, index: Index, needed: list[str], seen: set[Any]) -> None:
        key = (ref.node, ref.index, index)
        if key in seen:
            return
        seen.add(key)
        node = self.graph.node(ref)
        if self.is_buffer(ref) or node.kind in (Kind.SCALAR, Kind.FACTORY):
            return
        if node.kind in (Kind.REDUCTION, Kind.SCAN):
            self._check_row_op(node, index)
            if node.name not in needed:
                needed.append(node.name)
                self._scan(node.args[0], self.space.full_index(), needed, seen)
            return
        for arg_ref, arg_index in self.operand_indices(node, index):
            self._scan(arg_ref, arg_index, needed, seen)

    def _check_row_op(self, node: Node, index: Index) -> None:
        """A reduction or scan this kernel computes: over its space, read where it lives (a
        reduction at the kernel's row, a scan at its own element)."""
        source_shape = tuple(self.graph.meta(node.args[0]).shape)
        if self.space.tiled:
            raise NeedMaterialize(node.name, f"{node.kind} in a tile kernel (no whole rows)")
        if source_shape != self.space.shape or node.dims != self.space.dims:
            msg = f"{node.kind} over {source_shape}/{node.dims} in space {self.space.shape}"
            raise NeedMaterialize(node.name, msg)
        own = self.space.full_index() if node.kind == Kind.SCAN else self.space.x_index()
        if index != own:
            raise NeedMaterialize(node.name, f"{node.kind} read at another index than its own")

    # -- reductions --------------------------------------------------------------------------
    def _emit_looped(self, order: list[str], targets: list[tuple[Ref, Index]]) -> None:
        online = online_pairs(self.graph, order)
        groups = welford_groups(self.graph, order)
        for name in order:
            node = self.graph.node(name)
            if name in online.values() or name in self._reduced:
                continue  # computed in its max's loop, or in its Welford partner's
            if node.reduce_op in WELFORD_OPS:
                self._emit_welford_loop(groups[name])
                continue
            if name in online:
                self._emit_online(node, self.graph.node(online[name]))
                continue
            if node.reduce_op in ("argmax", "argmin"):
                self._emit_looped_arg(node)
                continue
            acc = f"acc_{len(self._reduced)}"
            acc_dtype = accumulator_dtype(node)
            ident = identity(node.reduce_op, acc_dtype)
            self.kernel.lines.append(
                f"{acc} = tl.full([XBLOCK, RBLOCK], {ident}, {TL_DTYPE[acc_dtype]})"
            )
            self._open_loop()
            source = self.value(node.args[0], self.space.full_index())
            combined = combine(node.reduce_op, acc, reduce_input(node.reduce_op, source, acc_dtype))
            assert self.loop is not None
            self.loop.lines.append(f"{acc} = tl.where(xmask & rmask, {combined}, {acc})")
            self._close_loop()
            self._reduced[name] = self._finish(node, Val(acc, acc_dtype))
        rows = [(ref, index) for ref, index in targets if self._is_row_root(ref)]
        full = [(ref, index) for ref, index in targets if not self._is_row_root(ref)]
        for ref, index in rows:
            self._store(ref, index)
        if full:
            self._open_loop()
            for ref, index in full:
                self._store(ref, index)
            self._close_loop()

    def _emit_online(self, max_node: Node, sum_node: Node) -> None:
        """One loop for a max and the sum of exp(x - max) (see `reduce_code.online_pairs`).
        Lanes keep a running max and a sum relative to it; a lane that has seen only -inf keeps
        0."""
        dtype = accumulator_dtype(max_node)
        tl_dtype = TL_DTYPE[dtype]
        m, acc = f"acc_{len(self._reduced)}", f"acc_{len(self._reduced)}s"
        self.kernel.lines.append(f'{m} = tl.full([XBLOCK, RBLOCK], float("-inf"), {tl_dtype})')
        self.kernel.lines.append(f"{acc} = tl.full([XBLOCK, RBLOCK], 0, {tl_dtype})")
        self._open_loop()
        assert self.loop is not None
        x = as_dtype(self.value(max_node.args[0], self.space.full_index()), dtype)
        self.loop.lines += [
            f"{m}_x = {x}",
            f"{m}_new = _kg_max({m}, {m}_x)",
            f'{m}_inf = {m}_new == float("-inf")',
            f"{acc}_new = {acc} * tl.exp(tl.where({m}_inf, 0.0, {m} - {m}_new)) + tl.exp("
            f'tl.where({m}_inf, float("-inf"), {m}_x - {m}_new))',
            f"{acc} = tl.where(xmask & rmask, {acc}_new, {acc})",
            f"{m} = tl.where(xmask & rmask, {m}_new, {m})",
        ]
        self._close_loop()
        row_max = self._finish(max_node, Val(m, dtype))
        self._reduced[max_node.name] = row_max
        row = as_dtype(Val(f"tl.max({m}, 1)[:, None]", dtype), dtype)
        scaled = f'tl.where({m} == float("-inf"), 0.0, {acc} * tl.exp({m} - {row}))'
        self._reduced[sum_node.name] = self._finish(sum_node, Val(scaled, dtype))

    def _set_welford(self, group: list[Node], mean: Val, m2: Val) -> None:
        rows = frozenset({X_NAME})
        for node in group:
            val = mean if node.reduce_op == "welford_mean" else m2
            out_dtype = compute_dtype(node.meta.dtype)
            self._reduced[node.name] = self.assign(as_dtype(val, out_dtype), out_dtype, rows)

    def _welford_tile(self, group: list[Node]) -> None:
        """Mean and M2 of whole rows in one tile: sum / n, then the squared deviations from
        it (in registers: the rows are loaded once)."""
        node = group[0]
        dtype = accumulator_dtype(node)
        source = as_dtype(self.value(node.args[0], self.space.full_index()), dtype)
        tile, rows = frozenset({X_NAME, R_NAME}), frozenset({X_NAME})
        x = self.assign(f"tl.where(xmask & rmask, {source}, 0)", dtype, tile)
        count = float(self.space.rnumel)
        mean = self.assign(f"tl.sum({x.code}, 1)[:, None] / {count}", dtype, rows)
        dev = self.assign(f"tl.where(xmask & rmask, {x.code} - {mean.code}, 0)", dtype, tile)
        m2 = self.assign(f"tl.sum({dev.code} * {dev.code}, 1)[:, None]", dtype, rows)
        self._set_welford(group, mean, m2)

    def _emit_welford_loop(self, group: list[Node]) -> None:
        """Mean and M2 in one loop. Every lane sees one element per chunk (the last chunk's
        masked lanes keep their state), so its count after chunk k is k: one reciprocal per
        chunk, no per-element division. The lanes' (mean, M2, count) then merge in a tree."""
        node = group[0]
        dtype = accumulator_dtype(node)
        tl_dtype = TL_DTYPE[dtype]
        m = f"acc_{len(self._reduced)}"
        self.kernel.lines.append(f"{m} = tl.full([XBLOCK, RBLOCK], 0, {tl_dtype})")
        self.kernel.lines.append(f"{m}q = tl.full([XBLOCK, RBLOCK], 0, {tl_dtype})")
        self._open_loop()
        assert self.loop is not None
        x = as_dtype(self.value(node.args[0], self.space.full_index()), dtype)
        step = "1.0 / (roff // RBLOCK + 1)"
        if dtype == "float64":
            step = "tl.full([1, 1], 1.0, tl.float64) / (roff // RBLOCK + 1)"
        self.loop.lines += [
            f"{m}_x = {x}",
            f"{m}_d = {m}_x - {m}",
            f"{m}_new = {m} + {m}_d * ({step})",
            f"{m}q = tl.where(xmask & rmask, {m}q + {m}_d * ({m}_x - {m}_new), {m}q)",
            f"{m} = tl.where(xmask & rmask, {m}_new, {m})",
        ]
        self._close_loop()
        rnumel = self.space.rnumel
        count = f"((({rnumel} - rbase) + RBLOCK - 1) // RBLOCK).to({tl_dtype})"
        self.kernel.lines += [
            f"{m}_n = tl.broadcast_to({count}, [XBLOCK, RBLOCK])",
            f"{m}_mean, {m}_m2, {m}_cnt = tl.reduce(({m}, {m}q, {m}_n), 1, _kg_welford)",
        ]
        rows = frozenset({X_NAME})
        mean = Val(f"{m}_mean[:, None]", dtype, rows)
        m2 = Val(f"{m}_m2[:, None]", dtype, rows)
        self._set_welford(group, mean, m2)

    def _emit_looped_arg(self, node: Node) -> None:
        """An arg-reduction in a loop (column plan: the reduced axis is long and strided). Each
        lane keeps its best value and where it saw it first (NaN counts as the largest, as in
        torch); then the lanes' best value wins, the first index among equals."""
        better = ">" if node.reduce_op == "argmax" else "<"
        combine = "_kg_max" if node.reduce_op == "argmax" else "_kg_min"
        v, i = f"acc_{len(self._reduced)}", f"acc_{len(self._reduced)}i"
        ident = identity(node.reduce_op, "float32")
        self.kernel.lines.append(f"{v} = tl.full([XBLOCK, RBLOCK], {ident}, tl.float32)")
        self.kernel.lines.append(f"{i} = tl.full([XBLOCK, RBLOCK], 0, tl.int64)")
        self._open_loop()
        assert self.loop is not None
        x = as_dtype(self.value(node.args[0], self.space.full_index()), "float32")
        self.loop.lines += [
            f"{v}_x = {x}",
            f"{v}_nan = ({v}_x != {v}_x) & ({v} == {v})",
            f"{v}_take = xmask & rmask & (({v}_x {better} {v}) | {v}_nan)",
            f"{v} = tl.where({v}_take, {v}_x, {v})",
            f"{i} = tl.where({v}_take, rindex, {i})",
        ]
        self._close_loop()
        rows = frozenset({X_NAME})
        best = self.assign(f"tl.reduce({v}, 1, {combine})[:, None]", "float32", rows)
        hit = f"({v} == {best.code}) | (({best.code} != {best.code}) & ({v} != {v}))"
        found = f"tl.min(tl.where({hit}, {i}, {self.space.rnumel}), 1)[:, None]"
        self._reduced[node.name] = self.assign(found, "int64", rows)

    def _is_row_root(self, ref: Ref) -> bool:
        count = 1
        for size in self.graph.meta(ref).shape:
            count *= size
        return count == self.space.xnumel and self.space.rnumel != 1

    def _open_loop(self) -> None:
        self.loop = Scope()
        self.loop_vars = frozenset({R_NAME})

    def _close_loop(self) -> None:
        assert self.loop is not None
        self._passes += 1
        body = self.loop.lines
        self.kernel.lines.append(f"for roff in range(0, {self.space.rnumel}, RBLOCK):")
        self.kernel.lines.append("    rindex = roff + rbase")
        self.kernel.lines.append(f"    rmask = rindex < {self.space.rnumel}")
        self.kernel.lines.extend(f"    {line}" for line in body or ["pass"])
        self.loop = None
        self.loop_vars = frozenset()

    def _reduce_tile(self, node: Node, source: Val) -> Val:
        acc_dtype = accumulator_dtype(node)
        ident = identity(node.reduce_op, acc_dtype)
        value = reduce_input(node.reduce_op, source, acc_dtype)
        tile = self.assign(
            f"tl.where(xmask & rmask, {value}, {ident})", acc_dtype, frozenset({X_NAME, R_NAME})
        )
        return self._finish(node, tile)

    def _scan_tile(self, node: Node, source: Val) -> Val:
        """Prefix sums or products of whole rows in the compute dtype, the source widened to
        the tile (a broadcast or a constant would be scanned over an axis of one); positions
        past a row's end come after it and never enter a stored prefix."""
        dtype = compute_dtype(node.meta.dtype)
        tile = frozenset({X_NAME, R_NAME})
        value = as_dtype(source, dtype)
        ident = "1" if node.reduce_op == "cumprod" else "0"
        full = f"tl.where(xmask & rmask, {value}, {ident})"
        reverse = ", reverse=True" if node.reverse else ""
        return self.assign(f"tl.{node.reduce_op}({full}, axis=1{reverse})", dtype, tile)

    def _finish(self, node: Node, tile: Val) -> Val:
        """The [XBLOCK, 1] result of reducing a masked tile (or a loop's accumulator)."""
        op = node.reduce_op
        rows = frozenset({X_NAME})
        if op in ("argmax", "argmin"):
            return self.assign(f"tl.{op}({tile.code}, 1)[:, None].to(tl.int64)", "int64", rows)
        expr = REDUCER[op].format(t=tile.code) + "[:, None]"
        if op in ("any", "all"):
            return self.assign(f"({expr} != 0)", "bool", rows)
        out_dtype = compute_dtype(node.meta.dtype)
        return self.assign(as_dtype(Val(expr, tile.dtype), out_dtype), out_dtype, rows)

    # -- stores and assembly -----------------------------------------------------------------
    def _store(self, ref: Ref, index: Index) -> None:
        val = self.value(ref, index)
        meta = self.graph.meta(ref)
        flat = flat_index(index, tuple(meta.shape))
        self.max_address = max(self.max_address, flat.max_value() + 1)
        variables = flat.variables() | val.vars | {X_NAME}
        pointer = self.pointers.setdefault(ref.node, f"p{len(self.pointers)}")
        value = to_storage(val.code, val.dtype, meta.dtype)
        address = flat.code(self.names)
        if X_NAME not in flat.variables():
            address += " + 0 * xindex"  # a one-element output: every lane masked but the first
        line = f"tl.store({pointer} + ({address}), {value}, {self.mask(variables)})"
        scope = self.loop if (self.loop is not None and R_NAME in variables) else self.kernel
        scope.lines.append(line)

    def _assemble(self, stores: list[Ref]) -> KernelSource:
        wide = self.max_address > INT32_LIMIT
        params = [*self.pointers.values(), *self.scalars.values()]
        params += ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        tiles = -(-self.space.inner // self.launch.xblock) if self.space.column else 1
        if self.space.tiled:
            tiles = -(-self.space.rnumel // self.launch.rblock)
        body = index_prologue(self.space, self.launch.persistent, tiles, wide)
        body.extend(self.kernel.lines)
        lines = ["@triton.jit", f"def {self.name}({', '.join(params)}):"]
        source = "\n".join(lines + [f"    {line}" for line in body]) + "\n"
        if self.space.column:
            grid = self.space.ynumel * tiles
        else:
            grid = max(1, -(-self.space.xnumel // self.launch.xblock)) * tiles
        return KernelSource(
            name=self.name,
            source=source,
            pointers=list(self.pointers),
            scalars=list(self.scalars),
            stores=stores,
            grid=(grid,),
            launch=self.launch,
            passes=max(self._passes, 1),
        )
