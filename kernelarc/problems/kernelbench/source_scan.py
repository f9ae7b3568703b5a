"""Read a KernelBench file without running it: its shape, docstring and candidate size constants.

Place in the flow: the first step of converting one file (`convert.py`). A file that does not
parse, or lacks `class Model` / `get_inputs` / `get_init_inputs` at the top level, is refused
here with the reason. Candidate size constants are the top-level names bound to an integer
literal expression (`batch_size = 16`, `N = 2048 * 2`, `depth, height, width = 16, 32, 32`,
`height = width = 128`) and the entries of a literal integer tuple (`input_shape = (4096,)`);
constants computed from other names (`bias_shape = (out_channels, 1, 1)`) are not candidates:
they follow the constants they are computed from.
"""

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass

from kernelarc.problems.kernelbench.report import FailureCause

#: What a KernelBench file defines at its top level (and its builder returns).
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_BINOPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
}


class ConversionError(Exception):
    """A file cannot be converted; `cause` groups it in the report, the message says why."""

    def __init__(self, cause: FailureCause, message: str) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True)
class SizeConstant:
    """A candidate axis: a module-level integer constant, or one entry of an integer tuple."""

    axis: str
    """The axis name it would get (`batch_size`, `input_shape_0`)."""
    constant: str
    """The module-level name."""
    index: int | None
    """Entry of the tuple constant, or None for a plain integer."""
    value: int
    """Its value in the file."""


@dataclass(frozen=True)
class ScannedFile:
    """What the converter needs to know about a file before running it."""

    source: str
    """The file's text."""
    docstring: str | None
    """The docstring of `class Model`, if any."""
    constants: tuple[SizeConstant, ...]
    """Candidate size constants, in file order."""


def scan_source(source: str, filename: str) -> ScannedFile:
    """Parse a KernelBench file; ConversionError if it does not parse or is not one."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        msg = f"does not parse: line {exc.lineno}: {exc.msg}"
        raise ConversionError(FailureCause.SYNTAX_ERROR, msg) from exc
    defined = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        msg = f"not a KernelBench problem: no top-level {', '.join(missing)}"
        raise ConversionError(FailureCause.NOT_KERNELBENCH, msg)
    model = defined["Model"]
    docstring = ast.get_docstring(model) if isinstance(model, ast.ClassDef) else None
    return ScannedFile(source=source, docstring=docstring, constants=_size_constants(tree))


def _size_constants(tree: ast.Module) -> tuple[SizeConstant, ...]:
    found: dict[str, SizeConstant] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            for name, value in _bindings(target, stmt.value):
                for constant in _constants_of(name, value):
                    found.pop(constant.axis, None)  # a later assignment wins, in its place
                    found[constant.axis] = constant
    return tuple(found.values())


def _bindings(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """(name, expression) pairs of `a = v` and of `a, b = v1, v2`."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        pairs: list[tuple[str, ast.expr]] = []
        for t, v in zip(target.elts, value.elts, strict=True):
            pairs.extend(_bindings(t, v))
        return pairs
    return []


def _constants_of(name: str, value: ast.expr) -> list[SizeConstant]:
    number = _int_literal(value)
    if number is not None:
        return [SizeConstant(axis=name, constant=name, index=None, value=number)]
    if isinstance(value, ast.Tuple) and value.elts:
        entries = [_int_literal(e) for e in value.elts]
        if all(e is not None for e in entries):
            return [
                SizeConstant(axis=f"{name}_{i}", constant=name, index=i, value=int(e or 0))
                for i, e in enumerate(entries)
            ]
    return []


def _int_literal(node: ast.expr) -> int | None:
    """The value of an integer expression made only of literals (`4096`, `2048 * 2`)."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _int_literal(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _int_literal(node.left), _int_literal(node.right)
        if (
            left is None
            or right is None
            or (isinstance(node.op, ast.Pow | ast.LShift) and right > 64)
        ):
            return None
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
    return None
