"""The inverse index maps of views (`views.view_index`): for every one-to-one view, the source
index read at the view index it gives is the index it started from, and views that are not
one-to-one refuse."""

import pytest

from kernelarc.kernelgen.index_expr import Lin, Var
from kernelarc.kernelgen.views import ViewError, source_index, view_index

#: (target, view shape, source shape, arguments after the source)
ONE_TO_ONE = [
    ("aten.view.default", (2, 5, 12), (2, 5, 3, 4), [[2, 5, 12]]),
    ("aten.reshape.default", (10, 12), (2, 5, 3, 4), [[10, 12]]),
    ("aten.permute.default", (2, 3, 5, 4), (2, 5, 3, 4), [[0, 2, 1, 3]]),
    ("aten.transpose.int", (2, 3, 5, 4), (2, 5, 3, 4), [1, 2]),
    ("aten.t.default", (4, 6), (6, 4), []),
    ("aten.unsqueeze.default", (2, 1, 5), (2, 5), [1]),
    ("aten.squeeze.dim", (2, 5), (2, 1, 5), [1]),
    ("aten.expand.default", (2, 5), (2, 5), [[2, 5]]),
]


@pytest.mark.parametrize(("target", "out", "src", "args"), ONE_TO_ONE)
def test_the_inverse_map_returns_to_the_source_index(
    target: str, out: tuple[int, ...], src: tuple[int, ...], args: list[object]
) -> None:
    start = tuple(Lin.of(Var(f"v{i}", size)) if size > 1 else Lin() for i, size in enumerate(src))
    at = view_index(target, start, out, src, args)
    assert len(at) == len(out)
    assert source_index(target, at, out, src, args) == start


@pytest.mark.parametrize(
    ("target", "out", "src", "args"),
    [
        ("aten.expand.default", (3, 5), (1, 5), [[3, 5]]),
        ("aten.slice.Tensor", (2, 3), (2, 5), [1, 0, 3, 1]),
        ("aten.select.int", (2,), (2, 5), [1, 0]),
    ],
)
def test_views_that_are_not_one_to_one_have_no_inverse(
    target: str, out: tuple[int, ...], src: tuple[int, ...], args: list[object]
) -> None:
    start = tuple(Lin.of(Var(f"v{i}", size)) for i, size in enumerate(src))
    with pytest.raises(ViewError):
        view_index(target, start, out, src, args)
