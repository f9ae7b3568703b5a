"""Index arithmetic for generated kernels: integer expressions over a kernel's index variables.

Place in the flow: the kernel generator (`kernelarc.kernelgen`) pulls every value of a fused
kernel at an index, a tuple of `Lin` expressions, one per dimension. Views (reshape, permute,
expand, slice, ...) rewrite that tuple; loads turn it into an address. Reshapes produce floor
divisions and remainders; `Lin` keeps them as *digits* of a variable, `(v // div) % mod`, and
simplifies the patterns reshapes create (a digit split off and merged back is the variable
again), so a contiguous load in a fused kernel is emitted as `ptr + xindex`, which Triton can
vectorise, and two paths to the same element compare equal.

Pure and exact: every rewrite is an identity on non-negative integers; what cannot be
simplified stays as an opaque `//` or `%` term (correct, only slower).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class IndexExprError(ValueError):
    """An index expression the generator cannot emit (e.g. a division of a negative value)."""


@dataclass(frozen=True, order=True)
class Var:
    """A kernel index variable taking every value in [0, extent)."""

    name: str
    extent: int


@dataclass(frozen=True, order=True)
class Digit:
    """`(var // div) % mod` (no remainder when `mod` is None)."""

    var: Var
    div: int
    mod: int | None

    def max_value(self) -> int:
        """The largest value it takes."""
        top = (self.var.extent - 1) // self.div
        return top if self.mod is None else min(top, self.mod - 1)


@dataclass(frozen=True, order=True)
class Opaque:
    """`arg // k` or `arg % k` that no rule simplifies (arg is never negative)."""

    op: str
    arg: Lin
    k: int

    def max_value(self) -> int:
        """The largest value it can take."""
        top = self.arg.max_value()
        return top // self.k if self.op == "//" else min(top, self.k - 1)


Atom = Digit | Opaque


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, repr(atom)) if isinstance(atom, Digit) else (1, repr(atom))


@dataclass(frozen=True)
class Lin:
    """`const + sum(coef * atom)`: an integer expression, kept in canonical form."""

    terms: tuple[tuple[Atom, int], ...] = field(default=())
    const: int = 0

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def of(value: int | Var | Lin) -> Lin:
        """A constant, a whole variable, or the expression itself."""
        if isinstance(value, Lin):
            return value
        if isinstance(value, Var):
            return _canonical({Digit(value, 1, None): 1}, 0)
        return Lin((), int(value))

    # -- arithmetic --------------------------------------------------------------------------
    def __add__(self, other: int | Lin) -> Lin:
        other = Lin.of(other)
        terms = dict(self.terms)
        for atom, coef in other.terms:
            terms[atom] = terms.get(atom, 0) + coef
        return _canonical(terms, self.const + other.const)

    def __radd__(self, other: int) -> Lin:
        return self + other

    def __sub__(self, other: int | Lin) -> Lin:
        return self + Lin.of(other) * -1

    def __mul__(self, k: int) -> Lin:
        if k == 0:
            return Lin()
        return _canonical({a: c * k for a, c in self.terms}, self.const * k)

    __rmul__ = __mul__

    def __floordiv__(self, k: int) -> Lin:
        if k <= 0:
            msg = f"floor division by {k}"
            raise IndexExprError(msg)
        if k == 1:
            return self
        if not self.terms:
            return Lin((), self.const // k)
        quotient, rest = self._split(k)
        if rest.min_value() >= 0 and rest.max_value() < k:
            return quotient
        if quotient.terms and rest.min_value() >= 0:
            # (k*q + rest) // k == q + rest // k: a split reduction's row index `R/S * x + r`
            # divided by a dim's stride becomes digits of x and r, not an opaque division.
            return quotient + rest // k
        single = self._single_digit()
        if single is not None and (single.mod is None or single.mod % k == 0):
            mod = None if single.mod is None else single.mod // k
            return _canonical({Digit(single.var, single.div * k, mod): 1}, 0)
        carry = self._carry_free(k)
        if carry is not None:
            step, high, _ = carry
            return high // (k // step)
        if self.min_value() < 0:
            msg = f"floor division of a possibly negative index ({self.code({})}) by {k}"
            raise IndexExprError(msg)
        return _canonical({Opaque("//", self, k): 1}, 0)

    def __mod__(self, k: int) -> Lin:
        if k <= 0:
            msg = f"remainder by {k}"
            raise IndexExprError(msg)
        if k == 1:
            return Lin()
        if not self.terms:
            return Lin((), self.const % k)
        _, rest = self._split(k)
        if rest.min_value() >= 0 and rest.max_value() < k:
            return rest
        single = rest._single_digit()
        if single is not None and (single.mod is None or single.mod % k == 0):
            return _canonical({Digit(single.var, single.div, k): 1}, 0)
        carry = rest._carry_free(k)
        if carry is not None:
            step, high, low = carry
            return (high % (k // step)) * step + low
        if rest.min_value() < 0:
            msg = f"remainder of a possibly negative index ({self.code({})}) by {k}"
            raise IndexExprError(msg)
        return _canonical({Opaque("%", rest, k): 1}, 0)

    # -- queries -----------------------------------------------------------------------------
    def is_const(self) -> bool:
        """No variable in it."""
        return not self.terms

    def max_value(self) -> int:
        """An upper bound (exact for sums of independent digits)."""
        return self.const + sum(c * a.max_value() if c > 0 else 0 for a, c in self.terms)

    def min_value(self) -> int:
        """A lower bound (atoms are never negative)."""
        return self.const + sum(c * a.max_value() if c < 0 else 0 for a, c in self.terms)

    def variables(self) -> frozenset[str]:
        """Names of the kernel variables it depends on."""
        names: set[str] = set()
        for atom, _ in self.terms:
            names |= {atom.var.name} if isinstance(atom, Digit) else set(atom.arg.variables())
        return frozenset(names)

    def code(self, names: dict[str, str]) -> str:
        """Triton/Python source (variables renamed through `names`)."""
        parts: list[str] = []
        for atom, coef in self.terms:
            text = _atom_code(atom, names)
            if coef == 1:
                parts.append(text)
            elif coef == -1:
                parts.append(f"-{text}")
            else:
                parts.append(f"{coef} * {text}")
        if self.const or not parts:
            parts.append(str(self.const))
        out = " + ".join(parts)
        return out.replace("+ -", "- ")

    # -- internals ---------------------------------------------------------------------------
    def _split(self, k: int) -> tuple[Lin, Lin]:
        """(q, r) with self == k * q + r, q taking the terms whose coefficient k divides."""
        high: dict[Atom, int] = {}
        low: dict[Atom, int] = {}
        for atom, coef in self.terms:
            if coef % k == 0:
                high[atom] = coef // k
            else:
                low[atom] = coef
        q0, r0 = divmod(self.const, k)
        return _canonical(high, q0), _canonical(low, r0)

    def _carry_free(self, k: int) -> tuple[int, Lin, Lin] | None:
        """(c, high, low) with self == c * high + low, c > 1 dividing k, 0 <= low < c: then
        self // k == high // (k // c) and self % k == c * (high % (k // c)) + low. The largest
        such c is taken (None when there is none)."""
        for step in sorted({c for _, c in self.terms if c > 1}, reverse=True):
            if k % step:
                continue
            high = {a: c // step for a, c in self.terms if c >= step and c % step == 0}
            if len(high) != sum(1 for _, c in self.terms if c >= step):
                continue
            low = _canonical({a: c for a, c in self.terms if c < step}, self.const)
            if low.min_value() >= 0 and low.max_value() < step:
                return step, _canonical(high, 0), low
        return None

    def _single_digit(self) -> Digit | None:
        if self.const == 0 and len(self.terms) == 1:
            atom, coef = self.terms[0]
            if coef == 1 and isinstance(atom, Digit):
                return atom
        return None


def _atom_code(atom: Atom, names: dict[str, str]) -> str:
    if isinstance(atom, Digit):
        name = names.get(atom.var.name, atom.var.name)
        if atom.div == 1 and atom.mod is None:
            return name
        text = name if atom.div == 1 else f"{name} // {atom.div}"
        return f"({text})" if atom.mod is None else f"({text} % {atom.mod})"
    return f"(({atom.arg.code(names)}) {atom.op} {atom.k})"


def _normal_digit(d: Digit) -> Digit | None:
    """The same digit in normal form, None when it is always 0."""
    if d.div >= d.var.extent or d.mod == 1:
        return None
    if d.mod is not None and d.div * d.mod >= d.var.extent:
        return Digit(d.var, d.div, None)
    return d


def _merge_digits(terms: dict[Atom, int]) -> dict[Atom, int]:
    """Merge `c*(v//d % m) + c*m*(v//(d*m) % m2)` into `c*(v//d % (m*m2))`, repeatedly."""
    changed = True
    while changed:
        changed = False
        digits = [(a, c) for a, c in terms.items() if isinstance(a, Digit)]
        for low, c_low in digits:
            if low.mod is None:
                continue
            for high, c_high in digits:
                if (
                    high.var == low.var
                    and high.div == low.div * low.mod
                    and c_high == c_low * low.mod
                ):
                    mod = None if high.mod is None else low.mod * high.mod
                    merged = _normal_digit(Digit(low.var, low.div, mod))
                    del terms[low], terms[high]
                    if merged is not None:
                        terms[merged] = terms.get(merged, 0) + c_low
                    changed = True
                    break
            if changed:
                break
    return terms


def _canonical(terms: dict[Atom, int], const: int) -> Lin:
    cleaned: dict[Atom, int] = {}
    for atom, coef in terms.items():
        if coef == 0:
            continue
        norm: Atom | None = _normal_digit(atom) if isinstance(atom, Digit) else atom
        if norm is None:
            continue
        if isinstance(norm, Opaque) and norm.max_value() == 0:
            continue
        cleaned[norm] = cleaned.get(norm, 0) + coef
    cleaned = {a: c for a, c in _merge_digits(cleaned).items() if c != 0}
    ordered = tuple(sorted(cleaned.items(), key=lambda item: _atom_key(item[0])))
    return Lin(ordered, const)


def flat_index(index: tuple[Lin, ...], shape: tuple[int, ...]) -> Lin:
    """Row-major position of `index` in a tensor of `shape`."""
    flat = Lin()
    for i, size in zip(index, shape, strict=True):
        flat = flat * size + i
    return flat


def unflatten(flat: Lin, shape: tuple[int, ...]) -> tuple[Lin, ...]:
    """The index whose row-major position in `shape` is `flat`."""
    out: list[Lin] = []
    inner = 1
    for size in reversed(shape):
        out.append(Lin() if size == 1 else (flat // inner) % size)
        inner *= size
    return tuple(reversed(out))
