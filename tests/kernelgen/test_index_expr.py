"""Index arithmetic of generated kernels: rewrites are identities and keep loads to digits."""

from kernelarc.kernelgen.index_expr import Lin, Var


def test_a_split_row_index_divides_into_digits() -> None:
    # The stage-1 index of a split (256 elements per partial) read as an (8, 16, 16) tensor.
    x, r = Var("x", 8), Var("r", 256)
    flat = Lin.of(x) * 256 + Lin.of(r)
    middle = (flat // 16) % 16
    assert middle == (Lin.of(r) // 16) % 16
    assert flat // 256 == Lin.of(x)
    row = flat // 16
    assert row == Lin.of(x) * 16 + Lin.of(r) // 16
    for xv in range(8):
        for rv in range(0, 256, 7):
            at = {"x": xv, "r": rv}
            assert eval(middle.code({}), at) == ((xv * 256 + rv) // 16) % 16
            assert eval(row.code({}), at) == (xv * 256 + rv) // 16
