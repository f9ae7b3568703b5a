"""Triton helper functions every generated solution defines (`_kg_max`, `_kg_welford`, ...).

Place in the flow: `solution_source.render_solution` writes `HELPERS` once at the top of the
solution file; the expressions of `pointwise_ops.py` and the reductions of `emit.py` /
`reduce_code.py` call them. Source text, not Python functions: they are Triton code of the
generated file, kept apart from the expression table that calls them. Only `tl` builtins, so they
run under Triton's interpreter on the CPU too.
"""

HELPERS = """
@triton.jit
def _kg_max(a, b):
    # NaN-propagating maximum (torch.maximum / relu / clamp semantics).
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _kg_min(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _kg_mul(a, b):
    return a * b


@triton.jit
def _kg_welford(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    # Merge of two (mean, M2, count) statistics (Chan et al.); empty lanes (count 0) vanish.
    n = n_a + n_b
    delta = mean_b - mean_a
    w_b = tl.where(n == 0, 0.0, n_b / tl.where(n == 0, 1.0, n))
    return mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b, n


@triton.jit
def _kg_tanh(x):
    # tanh from exp: exact to float32 rounding away from 0, and absolute error ~1e-7 near 0.
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -y, y)


@triton.jit
def _kg_pow(x, y):
    return tl.exp2(y * tl.log2(x))


@triton.jit
def _kg_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _kg_round(x):
    # Round half to even, as torch.round.
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0
    return tl.where(tie & odd, r - 1.0, r)


@triton.jit
def _kg_sign(x):
    return tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0)).to(x.dtype)


@triton.jit
def _kg_atan(x):
    # atan(x) = pi/2 - atan(1/x) for |x| > 1; an odd polynomial on [0, 1] (error < 2e-6).
    a = tl.abs(x)
    inv = a > 1.0
    z = tl.where(inv, 1.0 / a, a)
    z2 = z * z
    p = -0.01172120 * z2 + 0.05265332
    p = p * z2 - 0.11643287
    p = p * z2 + 0.19354346
    p = p * z2 - 0.33262347
    p = z * (p * z2 + 0.99997726)
    r = tl.where(inv, 1.5707963267948966 - p, p)
    return tl.where(x < 0, -r, r)


@triton.jit
def _kg_floordiv_int(a, b):
    q = a // b
    return q - (((a % b) != 0) & ((a < 0) != (b < 0))).to(q.dtype)


@triton.jit
def _kg_remainder_int(a, b):
    r = a % b
    return r + b * ((r != 0) & ((r < 0) != (b < 0))).to(r.dtype)
"""
"""Triton helper functions every generated solution defines (prefixed `_kg_`)."""
