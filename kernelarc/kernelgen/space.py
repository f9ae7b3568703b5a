"""The iteration space of one generated kernel.

Place in the flow: the scheduler gives every fused kernel a `Space`: the shape it iterates over
and the dims it reduces. A pointwise kernel (no reduced dims) runs one flat index `xindex` over
the shape; a reduction kernel runs `xindex` over the kept dims and `rindex` over the reduced
ones, a [XBLOCK, RBLOCK] tile per program. `full_index` is the index of the whole shape in those
two variables; every value of the kernel is pulled at an index derived from it.

Two plans for a reduction, chosen from the shape: when the last dim is reduced (`inner == 1`)
the *row* plan, where `xindex` counts every kept position and a program reduces XBLOCK rows;
when kept dims follow the last reduced one (a sum over dim 1 of (B, R, C): `inner == C`) the
*column* plan, where `xindex` runs over those contiguous inner positions only and `yindex`
(one per program) over the kept dims before them, so the tile's x axis is contiguous in
memory: the loads are coalesced (and provably contiguous to Triton: no `% C` in the address)
and the reduction loops over the strided axis, accumulating XBLOCK columns at once.
"""

import math
from dataclasses import dataclass

from kernelarc.kernelgen.index_expr import Lin, Var, flat_index, unflatten

X_NAME = "x"
R_NAME = "r"
Y_NAME = "y"
Z_NAME = "z"
KA_NAME = "ka"
KB_NAME = "kb"
CODE_NAMES = {
    X_NAME: "xindex",
    R_NAME: "rindex",
    Y_NAME: "yindex",
    Z_NAME: "zindex",
    KA_NAME: "ka",
    KB_NAME: "kb",
}


@dataclass(frozen=True)
class Space:
    """A kernel's iteration space."""

    shape: tuple[int, ...]
    dims: tuple[int, ...] = ()
    """Reduced dims (sorted); empty for a pointwise kernel."""
    order: tuple[int, ...] = ()
    """The dims of `shape` from outermost to innermost as the kernel walks them (empty: in
    order). `memory_order` sets it for a reduction over a channels-last buffer, so the walk
    follows memory; kept dims always stay in order (a reduction's output is stored row-major
    over them)."""

    tiled: bool = False
    """A pointwise kernel on 2-d tiles (`Kind` "tile"): `xindex` over the leading dims (batch,
    channels), `rindex` over `dims` (the spatial ones), nothing reduced, one [XBLOCK, RBLOCK]
    tile per program. For an epilogue that reads a channels-last convolution and writes NCHW:
    its loads are contiguous along x, its stores along r, and Triton moves the tile between
    the two layouts through shared memory (a transpose that reads and writes whole lines)."""

    def walk(self) -> tuple[int, ...]:
        """The dims from outermost to innermost as the kernel walks them."""
        return self.order or tuple(range(len(self.shape)))

    @property
    def is_reduction(self) -> bool:
        """Whether the kernel reduces."""
        return bool(self.dims)

    @property
    def kept_shape(self) -> tuple[int, ...]:
        """Sizes of the dims `xindex` runs over."""
        return tuple(self.shape[i] for i in self.walk() if i not in self.dims)

    @property
    def reduced_shape(self) -> tuple[int, ...]:
        """Sizes of the dims `rindex` runs over, in walking order."""
        return tuple(self.shape[d] for d in self.walk() if d in self.dims)

    @property
    def xnumel(self) -> int:
        """Number of values of `xindex`."""
        return math.prod(self.kept_shape)

    @property
    def rnumel(self) -> int:
        """Number of values of `rindex` (1 for a pointwise kernel)."""
        return math.prod(self.reduced_shape)

    @property
    def inner(self) -> int:
        """Elements of the dims after the last reduced dim (kept and contiguous); 0 for a
        pointwise space."""
        if not self.dims:
            return 0
        walk = self.walk()
        last = max(walk.index(d) for d in self.dims)
        return math.prod(self.shape[d] for d in walk[last + 1 :])

    @property
    def column(self) -> bool:
        """A reduction over a dim that is not the innermost: the column plan (see the module
        docstring)."""
        return self.is_reduction and self.inner > 1

    @property
    def ynumel(self) -> int:
        """Number of values of `yindex` (the kept positions before the inner dims; 1 for the
        row plan)."""
        return self.xnumel // self.inner if self.column else 1

    def x_var(self) -> Var:
        """The tile variable over kept positions (only the inner ones in the column plan)."""
        return Var(X_NAME, max(self.inner if self.column else self.xnumel, 1))

    def y_var(self) -> Var:
        """The column plan's per-program variable over the outer kept positions."""
        return Var(Y_NAME, self.ynumel)

    def kept_flat(self) -> Lin:
        """The row-major position among the kept positions (a reduction's output position)."""
        if self.column:
            return Lin.of(self.y_var()) * self.inner + Lin.of(self.x_var())
        return Lin.of(self.x_var())

    def r_var(self) -> Var:
        """The reduction variable."""
        return Var(R_NAME, max(self.rnumel, 1))

    def full_index(self) -> tuple[Lin, ...]:
        """The index of `shape` that the kernel's (xindex, rindex) stands for."""
        kept = unflatten(self.kept_flat(), self.kept_shape)
        reduced = unflatten(Lin.of(self.r_var()), self.reduced_shape) if self.dims else ()
        kept_it, reduced_it = iter(kept), iter(reduced)
        index: list[Lin] = [Lin()] * len(self.shape)
        for i in self.walk():
            index[i] = next(reduced_it) if i in self.dims else next(kept_it)
        return tuple(index)

    def x_index(self) -> tuple[Lin, ...]:
        """The full index with the reduced dims at 0 (a reduction's keepdim output index)."""
        full = self.full_index()
        return tuple(Lin() if i in self.dims else full[i] for i in range(len(self.shape)))

    def store_index(self, shape: tuple[int, ...]) -> tuple[Lin, ...] | None:
        """Where a root of `shape` is stored: the whole space (same element count, row-major
        order) or one value per `xindex` (element count = xnumel); None when neither fits."""
        count = math.prod(shape)
        if count == math.prod(self.shape):
            return unflatten(flat_index(self.full_index(), self.shape), shape)
        if self.is_reduction and count == self.xnumel:
            return unflatten(self.kept_flat(), shape)
        return None


@dataclass(frozen=True)
class GemmSpace:
    """A GEMM kernel's space: [batch,] M x N output tiles, a K loop, anchored on one matmul."""

    anchor: str
    """The mm / addmm / bmm node."""
    batch: int
    m: int
    n: int
    k: int

    is_reduction = False

    @property
    def shape(self) -> tuple[int, ...]:
        """The matmul's output shape."""
        return (self.batch, self.m, self.n) if self.batch else (self.m, self.n)

    def output_index(self) -> tuple[Lin, ...]:
        """The matmul output index the tile stands for (batch `z`, rows `x`, columns `r`)."""
        rows = Lin.of(Var(X_NAME, self.m))
        cols = Lin.of(Var(R_NAME, self.n))
        if self.batch:
            return (Lin.of(Var(Z_NAME, self.batch)), rows, cols)
        return (rows, cols)

    def store_index(self, shape: tuple[int, ...]) -> tuple[Lin, ...] | None:
        """Where a root of `shape` (same element count as the output) is stored."""
        if math.prod(shape) != math.prod(self.shape):
            return None
        return unflatten(flat_index(self.output_index(), self.shape), shape)


@dataclass(frozen=True)
class AttentionSpace(GemmSpace):
    """The space of an attention kernel anchored on the P @ V matmul (`anchor`): `batch`
    heads, `m` query rows, `n` = Dv output columns, `k` keys (the loop)."""

    score: str = ""
    """The Q @ K^T matmul."""
    d: int = 0
    """Q's and K's head dim (the score matmul's K)."""
    row_max: str = ""
    """The softmax's maximum over each row of scores (a `max` reduction node)."""
    row_sum: str = ""
    """The softmax's sum over each row of exponentials (a `sum` reduction node)."""
    mask: str = ""
    """The node that sets scores to -inf by position alone (`attention_mask.IndexMask`), or
    ''; with it each program visits only the key blocks the mask keeps for some row."""
    mask_condition: str = ""
    """The mask's boolean condition (computed from index ranges only)."""
    mask_keep: bool = True
    """The condition's value where a score is kept."""
    row_any: str = ""
    """`any(scores != -inf)` per row, when the reference zeroes fully masked rows (as
    `scaled_dot_product_attention`'s math path does) instead of dividing 0 by 0; else ''."""


def index_prologue(space: Space, persistent: bool, tiles: int, wide: bool) -> list[str]:
    """A pointwise or reduction kernel's first lines: its index variables and their masks
    (`tiles`: programs per column tile row for the column plan, r tiles per x tile for a tiled
    space; `wide`: 64-bit indices)."""
    body = []
    pid = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
    if space.tiled:
        # One program per (x tile, r tile); `tiles`: r tiles per x tile.
        body.append(f"pid = {pid}")
        body.append(f"xindex = (pid // {tiles}) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        body.append(f"xmask = xindex < {space.xnumel}")
        body.append(f"rindex = (pid % {tiles}) * RBLOCK + tl.arange(0, RBLOCK)[None, :]")
        body.append(f"rmask = rindex < {space.rnumel}")
        return body
    if space.column:
        # One program per (outer kept position, XBLOCK-wide tile of the inner ones).
        body.append(f"pid = {pid}")
        body.append("yindex = pid" if tiles == 1 else f"yindex = pid // {tiles}")
        start = "" if tiles == 1 else f"(pid % {tiles}) * XBLOCK + "
        body.append(f"xindex = {start}tl.arange(0, XBLOCK)[:, None]")
        body.append(f"xmask = xindex < {space.inner}")
    elif space.is_reduction:
        body.append(f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        body.append(f"xmask = xindex < {space.xnumel}")
    if space.is_reduction:
        body.append("rbase = tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if wide else ""))
        if persistent:
            body.append("rindex = rbase")
            body.append(f"rmask = rindex < {space.rnumel}")
    else:
        body.append(f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)")
        body.append(f"xmask = xindex < {space.xnumel}")
    return body
