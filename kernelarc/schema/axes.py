"""Axis expressions: a small, safe arithmetic evaluator over named integer axes.

Used by the Definition validator (at load time) and by input generation (at run time).
"""

import ast
import operator
from collections.abc import Callable, Mapping

from kernelarc.python_ast import parse_expression

_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class AxisExpressionError(ValueError):
    """An axis expression is malformed or cannot be evaluated."""


def expression_names(expression: str) -> set[str]:
    """Return the axis names an expression refers to; raise AxisExpressionError if malformed."""
    tree = _parse(expression)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif not isinstance(
            node,
            ast.Expression | ast.BinOp | ast.UnaryOp | ast.Constant | ast.operator | ast.unaryop,
        ) and not isinstance(node, ast.Load):
            msg = f"unsupported syntax {type(node).__name__!s} in axis expression {expression!r}"
            raise AxisExpressionError(msg)
    return names


def evaluate_expression(expression: str, values: Mapping[str, int]) -> int:
    """Evaluate an axis expression with the given axis values; the result must be integral."""
    result = _eval(_parse(expression).body, values, expression)
    if isinstance(result, float):
        if not result.is_integer():
            msg = f"axis expression {expression!r} gives {result}, which is not an integer"
            raise AxisExpressionError(msg)
        result = int(result)
    return int(result)


def _parse(expression: str) -> ast.Expression:
    try:
        return parse_expression(expression)
    except SyntaxError as exc:
        msg = f"axis expression {expression!r} is not valid arithmetic: {exc.msg}"
        raise AxisExpressionError(msg) from exc


def _eval(node: ast.AST, values: Mapping[str, int], expression: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            msg = f"axis expression {expression!r} uses a boolean"
            raise AxisExpressionError(msg)
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            msg = f"axis expression {expression!r} uses unknown or unresolved axis {node.id!r}"
            raise AxisExpressionError(msg)
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _eval(node.left, values, expression)
        right = _eval(node.right, values, expression)
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            msg = f"axis expression {expression!r} divides by zero"
            raise AxisExpressionError(msg) from exc
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, values, expression))
    msg = f"unsupported syntax {type(node).__name__} in axis expression {expression!r}"
    raise AxisExpressionError(msg)
