"""The attention kernel emitter: online softmax over blocks of keys (see `attention.py`).

Place in the flow: `schedule._emit` uses it for an `AttentionSpace`. It is the GEMM emitter of
the P @ V matmul with a different K loop. Each program owns XBLOCK query rows of one head
(`zindex`) and every output column (RBLOCK >= Dv). Before the loop it loads the query tile
[XBLOCK x D]; each step over KBLOCK keys:

    qk      = Q tile @ K^T tile                       (the score matmul's value)
    s       = the score ops on qk                     (pulled like any epilogue)
    m_new   = max(m_i, rowmax(s))                     (the value of the row maximum)
    p       = exp(s - m_new) as the reference writes it (pulled: its row-sum node reads it)
    l_i     = l_i * alpha + rowsum(p)                 (alpha = exp(m_i - m_new))
    acc     = acc * alpha + P(p) @ V tile             (the division by the row sum deferred)

and after the loop `acc / l_i` is the P @ V matmul's value, on which its own epilogue runs. The
row maximum and row sum nodes get those values (`special_value`), the sum's value inside the
loop being 1, so the probabilities the reference divides by the sum are the unnormalised ones
and the division happens once per row at the end, which is exact up to rounding because the
sum does not change along the keys. With the FLASH_DOT16 knob, a float32 dot operand that is a
16-bit tensor widened (as the math path of `scaled_dot_product_attention` does on the CPU),
through views and scalings by at most 1 in magnitude, is rounded back to 16 bits, as the fused
attention kernels torch calls on a GPU compute: Q and K when both are, the probabilities with V
when V is. An exact widening loses nothing and a scaled-down value cannot overflow; any other
operand stays float32 under the DOT_PRECISION knob. A fully masked row gives 0 / 0 = NaN, as
the reference's softmax of a row of -inf does.

With a position-only mask (`attention_mask.py`) a scan over the mask alone bounds the loop to
the key blocks some row keeps, and finds the blocks every row keeps whole: when those are one
run of blocks the loop is split in three, the whole blocks in the middle without the mask
(below a causal diagonal, inside a sliding window), as FlashAttention's causal kernels do.
"""

from dataclasses import replace

from kernelarc.kernelgen.attention_mask import constant_value
from kernelarc.kernelgen.gemm_emit import GemmEmitter, operands
from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref
from kernelarc.kernelgen.index_expr import Lin, Var
from kernelarc.kernelgen.kernel_types import Buffer, Launch, NeedMaterialize
from kernelarc.kernelgen.knobs import SHARED_MEMORY_BYTES, next_pow2
from kernelarc.kernelgen.pointwise_ops import TL_DTYPE
from kernelarc.kernelgen.space import KA_NAME, KB_NAME, R_NAME, X_NAME, Z_NAME, AttentionSpace
from kernelarc.kernelgen.values import Index, Scope, Val, as_dtype
from kernelarc.kernelgen.views import broadcast_index

DA_NAME = "da"
"""The head dim along the query tile's columns."""
DB_NAME = "db"
"""The head dim along the key tile's rows."""
_HALF = ("float16", "bfloat16")
_CAST = "prims.convert_element_type.default"
_MULS = ("aten.mul.Tensor", "aten.mul.Scalar")
_DIVS = ("aten.div.Tensor", "aten.div.Scalar")
MINUS_INF = 'float("-inf")'


class AttentionEmitter(GemmEmitter):
    """Writes one attention kernel; see the module docstring."""

    def __init__(
        self,
        graph: Graph,
        space: AttentionSpace,
        buffers: dict[str, Buffer],
        computed_here: set[str],
        launch: Launch,
        name: str,
    ) -> None:
        super().__init__(graph, space, buffers, computed_here, launch, name)
        self.attention = space
        self.names |= {DA_NAME: "da", DB_NAME: "db"}
        self.masks |= {DA_NAME: "damask", DB_NAME: "dbmask"}
        # Keys in whole blocks (or a head dim that is a power of two): no mask along them, so
        # no select per score and no masked loads in the loop.
        self._ragged_keys = space.k % max(launch.kblock, 1) != 0
        if not self._ragged_keys:
            del self.masks[KA_NAME], self.masks[KB_NAME]
        if space.d == _dblock(space.d):
            del self.masks[DA_NAME], self.masks[DB_NAME]
        self._score: tuple[Index, Val] | None = None
        self._stats: dict[str, Index] = {}
        self._mask_at: set[Index] = set()

    def special_value(self, node: Node, index: Index) -> Val:
        """The score tile, the running row maximum, 1 for the row sum (deferred), or the
        anchor's accumulator (GemmEmitter)."""
        if node.name == self.attention.score:
            if self._score is None or index != self._score[0]:
                raise NeedMaterialize(node.name, "read at another index than the score tile")
            return self._score[1]
        if node.name in (self.attention.row_max, self.attention.row_sum):
            return self._statistic(node, index)
        if node.name and node.name == self.attention.row_any:
            # Whether the row has a finite score: in the loop, True will do. Where the row has
            # none so far, every probability so far is exp(-inf - 0) = 0 whichever way the
            # guard selects; a row with none at all ends with l_i = 0, which the end of the
            # kernel turns into 0 as the guard does.
            return Val("tl.full([], 1, tl.int1)", "bool")  # a tensor: `~` of it is False
        return super().special_value(node, index)

    # -- the key loop ------------------------------------------------------------------------
    def _accumulate(self, node: Node) -> Val:
        space = self.attention
        graph = self.graph
        dblock = _dblock(space.d)
        z = Lin.of(Var(Z_NAME, space.batch))
        rows = Lin.of(Var(X_NAME, space.m))
        keys = Lin.of(Var(KA_NAME, space.k))
        lines = self.kernel.lines
        lines += [
            f"da = tl.arange(0, {dblock})[None, :]",
            f"db = tl.arange(0, {dblock})[:, None]",
            f"damask = da < {space.d}",
            f"dbmask = db < {space.d}",
            "acc = tl.zeros([XBLOCK, RBLOCK], dtype=tl.float32)",
            'm_i = tl.full([XBLOCK, 1], float("-inf"), tl.float32)',
            "l_i = tl.zeros([XBLOCK, 1], dtype=tl.float32)",
        ]
        score = graph.nodes[space.score]
        q_ref, k_ref, _ = operands(score)
        q = self._dot_operand(q_ref, (z, rows, Lin.of(Var(DA_NAME, space.d))))
        q = replace(q, code=f"tl.broadcast_to({q.code}, (XBLOCK, {dblock}))")
        self.loop = Scope()
        self.loop_vars = frozenset({KA_NAME, KB_NAME})
        kt = self._dot_operand(k_ref, (z, Lin.of(Var(DB_NAME, space.d)), keys))
        kt = replace(kt, code=f"tl.broadcast_to({kt.code}, ({dblock}, KBLOCK))")
        narrow = self._narrowable(q_ref) if self.launch.dot16 else ""
        if narrow and narrow == self._narrowable(k_ref):
            q = self._rounded(q, narrow)
            kt = self._rounded(kt, narrow)
        self.launch = self._fit_stages(dblock, q.dtype)
        self.loop.lines.append(f"qk = {self._plain_dot(q, kt)}")
        qk = Val("qk", "float32", frozenset({Z_NAME, X_NAME, KA_NAME}))
        if score.meta.dtype in _HALF:  # the reference's scores are 16-bit values
            rounded = f"((qk).to({TL_DTYPE[score.meta.dtype]})).to(tl.float32)"
            qk = self.assign(rounded, "float32", qk.vars)
        self._score = ((z, rows, keys), qk)
        probs_ref, v_ref, _ = operands(node)
        probs = self._dot_operand(probs_ref, (z, rows, keys))
        if not self._stats.keys() >= {space.row_max, space.row_sum}:
            raise NeedMaterialize(space.row_max, "the probabilities do not read the softmax")
        v = self._dot_operand(
            v_ref, (z, Lin.of(Var(KB_NAME, space.k)), Lin.of(Var(R_NAME, space.n)))
        )
        narrow = self._narrowable(v_ref) if self.launch.dot16 else ""
        if narrow:  # the probabilities are in [0, 1]: 16 bits hold them as GPU attention does
            probs = self._rounded(probs, narrow)
            v = self._rounded(v, narrow)
        p_code = f"tl.broadcast_to({self._in_keys(probs.code, '0')}, (XBLOCK, KBLOCK))"
        v_code = f"tl.broadcast_to({v.code}, (KBLOCK, RBLOCK))"
        update = self._plain_dot(Val(p_code, probs.dtype), Val(v_code, v.dtype), "acc * alpha")
        self.loop.lines.append(f"acc = {update}")
        self.loop.lines.append("m_i = m_new")
        unmasked = self._unmasked_body()
        bounds = self._key_bounds(split=unmasked is not None)
        if unmasked is None or bounds == ("0", ""):
            self._close_loop(bounds)
        else:
            self._close_split_loop(unmasked)
        if space.row_any:  # a row without a finite score is 0, as the reference's guard has it
            self.kernel.lines.append("acc = tl.where(l_i == 0.0, 0.0, acc / l_i)")
        else:  # 0 / 0: NaN, as the reference's softmax of a row of -inf
            self.kernel.lines.append("acc = acc / l_i")
        acc = Val("acc", "float32", frozenset({Z_NAME, X_NAME, R_NAME}))
        if node.meta.dtype in _HALF:
            rounded = f"((acc).to({TL_DTYPE[node.meta.dtype]})).to(tl.float32)"
            acc = self.assign(rounded, "float32", acc.vars)
        return acc

    def _statistic(self, node: Node, index: Index) -> Val:
        """The row maximum (running, updated here) or the row sum (its running total updated
        here; the value 1: the division is deferred), for the current key block."""
        loop = self.loop
        if loop is None or any(i.variables() & {KA_NAME, KB_NAME} for i in index):
            raise NeedMaterialize(node.name, "read outside the key loop or along the keys")
        if index[-1] != Lin() or self._stats.setdefault(node.name, index) != index:
            raise NeedMaterialize(node.name, "read at another index than its row")
        at = (*index[:-1], Lin.of(Var(KA_NAME, self.attention.k)))
        row = self.value(node.args[0], at)  # the sum's exponentials read the maximum first
        if node.name == self.attention.row_max:
            block_max = f"tl.max({self._in_keys(row.code, MINUS_INF)}, 1)[:, None]"
            loop.lines += [
                f"m_new = tl.maximum(m_i, {block_max})",
                'm_safe = tl.where(m_new == float("-inf"), 0.0, m_new)',
                "alpha = tl.exp(m_i - m_safe)",
            ]
            return Val("m_safe", "float32", frozenset({X_NAME, KA_NAME}))
        if self.attention.row_max not in self._stats:
            raise NeedMaterialize(node.name, "summed before the row maximum is known")
        total = f"tl.sum({self._in_keys(row.code, '0.0')}, 1)[:, None]"
        loop.lines.append(f"l_i = l_i * alpha + {total}")
        return Val("1.0", "float32")

    def value(self, ref: Ref, index: Index) -> Val:
        """As ValueEmitter's, noting where the position mask is read (`_key_bounds`)."""
        if ref.node == self.attention.mask and self.loop is not None:
            self._mask_at.add(index)
        return super().value(ref, index)

    def _unmasked_body(self) -> list[str] | None:
        """The loop body for key blocks the position mask keeps whole: the line that puts the
        -inf in assigns the kept scores instead (the mask's own lines become dead code the
        compiler drops), as FlashAttention's causal kernels skip the mask below the diagonal.
        None when the mask is read at more than one index or its value is not one line."""
        space, loop = self.attention, self.loop
        if not space.mask or len(self._mask_at) != 1 or loop is None:
            return None
        [index] = self._mask_at
        masked = loop.memo.get((space.mask, 0, index, ""))
        node = self.graph.nodes[space.mask]
        kept_arg = _kept_operand(self.graph, node, space.mask_condition)
        if masked is None or kept_arg is None:
            return None
        at = broadcast_index(index, node.shape, tuple(self.graph.meta(kept_arg).shape))
        kept = self.value(kept_arg, at)
        assignment = f"{masked.code} = "
        lines = [line for line in loop.lines if line.startswith(assignment)]
        if kept.dtype != masked.dtype or len(lines) != 1:
            return None
        return [
            f"{assignment}{kept.code}" if line.startswith(assignment) else line
            for line in loop.lines
        ]

    def _close_split_loop(self, unmasked: list[str]) -> None:
        """The key loop in three ranges: masked blocks before the wholly kept ones, those with
        `unmasked` (no mask), masked blocks after (`_key_bounds` sets f_lo and f_hi)."""
        assert self.loop is not None
        masked = self.loop.lines
        for (start, stop), body in (
            (("k_lo", "f_lo"), masked),
            (("f_lo", "f_hi"), unmasked),
            (("f_hi", "k_hi"), masked),
        ):
            self.loop.lines = body
            self._close_loop((start, stop))
            self.loop = Scope()
        self.loop = None

    def _key_bounds(self, split: bool = False) -> tuple[str, str]:
        """The key range this program visits: the blocks the position mask keeps for some of
        its rows (a loop over the mask alone, no loads), or every key without such a mask.
        With `split`, also [f_lo, f_hi): the blocks it keeps whole for every row (when they are
        one run of blocks; else empty, at k_hi)."""
        space = self.attention
        if not space.mask or len(self._mask_at) != 1:
            return ("0", "")
        [index] = self._mask_at
        mask = self.graph.nodes[space.mask]
        condition = Ref(space.mask_condition)
        at = broadcast_index(index, mask.shape, tuple(self.graph.meta(condition).shape))
        body, self.loop = self.loop, Scope()
        try:
            keep = self.value(condition, at)
        finally:
            scan, self.loop = self.loop, body
        assert scan is not None and body is not None
        kept = keep.code if space.mask_keep else f"~({keep.code})"
        k = space.k
        # Whole blocks: every (row, key) this program has kept; `live` keeps partial ones too.
        whole = [
            f"    full = live * tl.min(tl.where(({kept}) | ~(kamask & xmask), 1, 0))",
            f"    f_lo = tl.minimum(f_lo, tl.where(full > 0, k0, {k}))",
            "    f_hi = tl.maximum(f_hi, tl.where(full > 0, k0 + KBLOCK, 0))",
            "    n_full += full",
        ]
        starts = [f"f_lo = tl.full([], {k}, tl.int32)", "f_hi = tl.full([], 0, tl.int32)"]
        starts.append("n_full = tl.full([], 0, tl.int32)")
        self.kernel.lines += [
            "k_hi = tl.full([], 0, tl.int32)",
            f"k_lo = tl.full([], {k}, tl.int32)",
            *(starts if split else []),
            f"for k0 in range(0, {k}, KBLOCK):",
            "    ka = k0 + tl.arange(0, KBLOCK)[None, :]",
            f"    kamask = ka < {k}",
            *(f"    {line}" for line in scan.lines),
            f"    live = tl.max(tl.where(({kept}) & kamask & xmask, 1, 0))",
            "    k_hi = tl.where(live > 0, k0 + KBLOCK, k_hi)",
            f"    k_lo = tl.minimum(k_lo, tl.where(live > 0, k0, {k}))",
            *(whole if split else []),
        ]
        if split:  # one run of whole blocks, or none (the split loop then visits none)
            self.kernel.lines += [
                "f_one_run = (n_full > 0) & (n_full * KBLOCK == f_hi - f_lo)",
                "f_lo = tl.where(f_one_run, f_lo, k_hi)",
                "f_hi = tl.where(f_one_run, f_hi, k_hi)",
            ]
        return ("k_lo", "k_hi")

    def _narrowable(self, ref: Ref) -> str:
        """The 16-bit dtype of the buffer `ref` widens, through views and scalings by at most
        1 in magnitude (`scaled_dot_product_attention`'s scale on Q and K), or ''. Rounding
        such a value back to 16 bits cannot overflow; an exact widening loses nothing."""
        while not self.is_buffer(ref):
            node = self.graph.node(ref)
            source = node.args[0] if node.args and isinstance(node.args[0], Ref) else None
            factor = constant_value(self.graph, node.args[1]) if len(node.args) > 1 else None
            scaled_down = factor is not None and (
                (node.target in _MULS and abs(factor) <= 1)
                or (node.target in _DIVS and abs(factor) >= 1)
            )
            if source is None or not (
                node.kind == Kind.VIEW or node.target == _CAST or scaled_down
            ):
                return ""
            ref = source
        dtype = self.graph.meta(ref).dtype
        return dtype if dtype in _HALF else ""

    def _rounded(self, val: Val, dtype: str) -> Val:
        if val.dtype == dtype:
            return val
        return self.assign(f"({val.code}).to({TL_DTYPE[dtype]})", dtype, val.vars)

    def _in_keys(self, code: str, other: str) -> str:
        """`code` where the key exists, `other` past the last key (ragged key counts only)."""
        return f"tl.where(kamask, {code}, {other})" if self._ragged_keys else code

    def _plain_dot(self, a: Val, b: Val, acc: str = "") -> str:
        tail = f", {acc}" if acc else ""
        if a.dtype == b.dtype and a.dtype in _HALF and self.launch.half_dot:
            return f"tl.dot({a.code}, {b.code}{tail})"
        a_code, b_code = as_dtype(a, "float32"), as_dtype(b, "float32")
        return f'tl.dot({a_code}, {b_code}{tail}, input_precision="{self.launch.precision}")'

    def _fit_stages(self, dblock: int, dtype: str) -> Launch:
        """No more pipeline stages than the key and value tiles of all stages fit in shared
        memory (the query tile stays resident)."""
        size = 2 if dtype in _HALF else 4
        resident = self.launch.xblock * dblock * size
        stage = self.launch.kblock * (dblock + self.launch.rblock) * size
        fits = max(1, (SHARED_MEMORY_BYTES - resident) // max(stage, 1))
        return replace(self.launch, num_stages=min(self.launch.num_stages, fits))


def _kept_operand(graph: Graph, node: Node, condition: str) -> Ref | None:
    """The operand of the mask node that holds the scores where they are kept: the other
    branch of `where(c, -inf, s)` / `where(c, s, -inf)`, the scores of `s + where(...)`."""
    args = [a for a in node.args if isinstance(a, Ref)]
    if node.target == "aten.where.self" and len(node.args) == 3:
        branches = [a for a in node.args[1:] if constant_value(graph, a) != float("-inf")]
        return branches[0] if len(branches) == 1 and isinstance(branches[0], Ref) else None
    if node.target == "aten.add.Tensor" and len(args) == 2:
        others = [a for a in args if not _reads(graph, a, condition)]
        return others[0] if len(others) == 1 else None
    return None


def _reads(graph: Graph, ref: Ref, name: str) -> bool:
    """Whether `ref` is computed from node `name` (the additive mask's where)."""
    node = graph.node(ref)
    return ref.node == name or any(isinstance(a, Ref) and a.node == name for a in node.args)


def _dblock(d: int) -> int:
    """The head dim's tile width: a power of two, at least 16 (tl.dot's least)."""
    return max(16, next_pow2(d))


__all__ = ["AttentionEmitter"]
