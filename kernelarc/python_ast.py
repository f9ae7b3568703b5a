"""`ast.parse` behind one lock: CPython 3.11 before 3.11.8 is not safe parsing in several threads.

Two threads inside `ast.parse` at once can fail with "SystemError: AST constructor recursion
depth mismatch" (CPython issue gh-106905, fixed in 3.11.8 and 3.12): the depth counter of the
C-to-Python AST conversion is shared. KernelArc parses in several threads at once (agents build
definitions and proposals in parallel, the static scan and the no-code rule run on any of
them), so every parse in the package goes through this module.
"""

import ast
import threading

_LOCK = threading.Lock()


def parse_module(source: str) -> ast.Module:
    """`ast.parse(source)`, one thread at a time (SyntaxError/ValueError as usual)."""
    with _LOCK:
        return ast.parse(source)


def parse_expression(source: str) -> ast.Expression:
    """`ast.parse(source, mode="eval")`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, mode="eval")
