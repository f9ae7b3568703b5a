"""Index maps of view operators: from an index of the view to an index of its source.

Place in the flow: when the emitter pulls a view node at an index, `source_index` gives the
index of the source to pull instead; nothing is copied. Broadcasting of pointwise operands
(`broadcast_index`) is the same kind of map. `view_index` is the inverse, for the views that
have one (reshapes, permutes, (un)squeezes): a GEMM or attention kernel stores a root that is
a permuted view of its tile (`o.transpose(1, 2).reshape(B, L, H * D)`) at the root's own index.
"""

from collections.abc import Callable, Sequence
from typing import Any

from kernelarc.kernelgen.index_expr import Lin, flat_index, unflatten

Index = tuple[Lin, ...]
ViewMap = Callable[[Index, tuple[int, ...], tuple[int, ...], Sequence[Any]], Index]
"""(index of the view, view shape, source shape, the op's arguments after the source)."""


class ViewError(ValueError):
    """A view the generator cannot map (the message says which)."""


def broadcast_index(index: Index, out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> Index:
    """Index of an operand of shape `in_shape` broadcast to `out_shape` (right-aligned)."""
    lead = len(out_shape) - len(in_shape)
    if lead < 0:
        msg = f"cannot broadcast {in_shape} to {out_shape}"
        raise ViewError(msg)
    return tuple(
        Lin() if size == 1 and out_shape[lead + j] != 1 else index[lead + j]
        for j, size in enumerate(in_shape)
    )


def _reshape(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    return unflatten(flat_index(index, out), src)


def _expand(index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]) -> Index:
    return broadcast_index(index, out, src)


def _permute(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    dims = [int(d) % len(src) for d in args[0]]
    result: list[Lin] = [Lin()] * len(src)
    for k, d in enumerate(dims):
        result[d] = index[k]
    return tuple(result)


def _transpose(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    if not args:
        return tuple(reversed(index))
    rank = max(len(src), 1)
    a, b = int(args[0]) % rank, int(args[1]) % rank
    result = list(index)
    result[a], result[b] = index[b], index[a]
    return tuple(result)


def _unsqueeze(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    dim = int(args[0]) % len(out)
    return index[:dim] + index[dim + 1 :]


def _squeeze(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    if args:
        dims = args[0] if isinstance(args[0], list | tuple) else [args[0]]
        squeezed = {int(d) % max(len(src), 1) for d in dims if src and src[int(d) % len(src)] == 1}
    else:
        squeezed = {i for i, s in enumerate(src) if s == 1}
    it = iter(index)
    return tuple(Lin() if i in squeezed else next(it) for i in range(len(src)))


def _slice(index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]) -> Index:
    dim = int(args[0]) % len(src) if args else 0
    start = args[1] if len(args) > 1 and args[1] is not None else 0
    step = int(args[3]) if len(args) > 3 and args[3] is not None else 1
    size = src[dim]
    start = int(start)
    if start < 0:
        start += size
    start = min(max(start, 0), size)
    result = list(index)
    result[dim] = index[dim] * step + start
    return tuple(result)


def _select(index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]) -> Index:
    dim = int(args[0]) % len(src)
    position = int(args[1]) % src[dim]
    return (*index[:dim], Lin.of(position), *index[dim:])


def _flip(index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]) -> Index:
    dims = {int(d) % len(src) for d in args[0]}
    return tuple(Lin.of(src[i] - 1) - idx if i in dims else idx for i, idx in enumerate(index))


def _repeat(index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]) -> Index:
    lead = len(out) - len(src)
    return tuple(index[lead + j] % size for j, size in enumerate(src))


def _identity(
    index: Index, out: tuple[int, ...], src: tuple[int, ...], args: Sequence[Any]
) -> Index:
    return index


VIEWS: dict[str, ViewMap] = {
    "aten.view.default": _reshape,
    "aten._unsafe_view.default": _reshape,
    "aten.reshape.default": _reshape,
    "aten.view_copy.default": _reshape,
    "aten.expand.default": _expand,
    "aten.expand_copy.default": _expand,
    "aten.permute.default": _permute,
    "aten.permute_copy.default": _permute,
    "aten.t.default": _transpose,
    "aten.transpose.int": _transpose,
    "aten.unsqueeze.default": _unsqueeze,
    "aten.squeeze.dim": _squeeze,
    "aten.squeeze.dims": _squeeze,
    "aten.squeeze.default": _squeeze,
    "aten.slice.Tensor": _slice,
    "aten.select.int": _select,
    "aten.flip.default": _flip,
    "prims.rev.default": _flip,
    "aten.repeat.default": _repeat,
    "aten.alias.default": _identity,
}

VIEW_TARGETS = frozenset(VIEWS)
"""Targets whose value is its source's, re-indexed."""


def _inverse_permute(index: Index, out: tuple[int, ...], args: Sequence[Any]) -> Index:
    dims = [int(d) % len(out) for d in args[0]]
    return tuple(index[d] for d in dims)


def _inverse_unsqueeze(index: Index, out: tuple[int, ...], args: Sequence[Any]) -> Index:
    dim = int(args[0]) % len(out)
    return (*index[:dim], Lin(), *index[dim:])


def view_index(
    target: str,
    index: Index,
    out_shape: tuple[int, ...],
    src_shape: tuple[int, ...],
    args: Sequence[Any],
) -> Index:
    """The index of the view (shape `out_shape`) at which it reads its source at `index`; the
    inverse of `source_index`, for views that have one.

    Raises:
        ViewError: the view is not one-to-one (expand, slice, select, repeat, ...).
    """
    mapping = VIEWS.get(target)
    if mapping in (_reshape, _identity) or (mapping is _expand and out_shape == src_shape):
        return unflatten(flat_index(index, src_shape), out_shape)
    if mapping is _permute:
        return _inverse_permute(index, out_shape, args)
    if mapping is _transpose:
        return _transpose(index, src_shape, out_shape, args)
    if mapping is _unsqueeze:
        return _inverse_unsqueeze(index, out_shape, args)
    if mapping is _squeeze:
        return unflatten(flat_index(index, src_shape), out_shape)
    msg = f"{target} has no inverse index map"
    raise ViewError(msg)


def source_index(
    target: str,
    index: Index,
    out_shape: tuple[int, ...],
    src_shape: tuple[int, ...],
    args: Sequence[Any],
) -> Index:
    """The source index a view reads at `index` (args: the op's arguments after the source)."""
    mapping = VIEWS.get(target)
    if mapping is None:
        msg = f"no index map for view {target}"
        raise ViewError(msg)
    result = mapping(index, out_shape, src_shape, args)
    if len(result) != len(src_shape):
        msg = f"{target}: mapped index has rank {len(result)}, source rank {len(src_shape)}"
        raise ViewError(msg)
    return result
