"""Turn a KernelBench file into the builder function of its converted reference.

Place in the flow: `convert.py` wraps the file in a `KernelBenchSource` here for every meta run
of the shape probes and workload sizing, and `definition_builder` writes the same builder text
into the reference, so the importer checks exactly the code the evaluator will run. The builder
is plain Python: the file's top-level statements, as written (comments kept), indented into
`def _kb_namespace(<sizes>):`, with `<name> = <sizes>.apply(<name>, <axis>, <index>)` right after
each statement that assigns a size constant, returning the file's `Model`, `get_inputs` and
`get_init_inputs` (see `adapter.py` for `Sizes.apply`). Nothing in it builds code at run time, so
the reference, and every candidate that embeds it, passes the guard's static scan.

A file whose top-level code cannot run inside a function is refused here (UNSUPPORTED_SOURCE):
`from x import *` and `global` statements. `from __future__` imports are returned apart, to go
to the top of the reference.
"""

import ast
import io
import itertools
import re
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelarc.problems.kernelbench import adapter
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.source_scan import REQUIRED_NAMES, ConversionError

#: Axis name -> the (module-level constant, index into it when the constant is a tuple, else
#: None) it sets; usually one, several when constants must stay equal (a tied axis).
SizeConstants = Mapping[str, Sequence[tuple[str, int | None]]]

BUILDER_NAME = "_kb_namespace"
_INDENT = "    "
_BUILDERS = itertools.count()


@dataclass(frozen=True)
class BuilderSource:
    """The builder function's text, and the `from __future__` lines it needs above everything."""

    function: str
    future_imports: str


def builder_source(
    source: str, filename: str, size_constants: SizeConstants, name: str = BUILDER_NAME
) -> BuilderSource:
    """`def <name>(<sizes>): <the file's top-level code>; return {Model, get_inputs, ...}`.

    Raises:
        ConversionError: SYNTAX_ERROR when the file does not parse, UNSUPPORTED_SOURCE when its
            top-level code cannot run inside a function.
    """
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        msg = f"does not parse: line {exc.lineno}: {exc.msg}"
        raise ConversionError(FailureCause.SYNTAX_ERROR, msg) from exc
    _refuse_unsupported(tree)
    sizes = _free_name(source, "_kb_sizes")
    lines = source.splitlines()
    in_string = _string_interior_lines(source)
    setters: dict[str, list[tuple[str, int | None]]] = {}
    for axis, targets in size_constants.items():
        for constant, index in targets:
            setters.setdefault(constant, []).append((axis, index))
    future: list[str] = []
    body: list[str] = []
    previous_end = 0
    for group in _line_groups(tree.body):
        last = group[-1]
        start = previous_end + 1
        end = last.end_lineno or last.lineno
        previous_end = end
        future.extend(ast.unparse(stmt) for stmt in group if _is_future(stmt))
        group = [stmt for stmt in group if not _is_future(stmt)]
        chunk = _indented(lines[start - 1 : end], start, in_string)
        if len(group) == 1 and _same_code(chunk, group):
            body.extend(chunk)
            body.extend(_setter_lines(group[0], setters, sizes))
            continue
        # Several statements on one line, or text whose indentation would change a string
        # (tabs): write each out from the AST (without the comments), then its setter lines.
        for stmt in group:
            body.extend(_unparsed(stmt))
            body.extend(_setter_lines(stmt, setters, sizes))
    body.extend(_indented(lines[previous_end:], previous_end + 1, in_string))
    while body and not body[-1].strip():
        body.pop()
    returned = ", ".join(f"{n!r}: {n}" for n in REQUIRED_NAMES)
    doc = (
        f'{_INDENT}"""KernelBench {filename} at the sizes asked for.\n\n'
        f"{_INDENT}Its top-level code, each size constant set from `{sizes}` right after it is\n"
        f'{_INDENT}assigned; returns its {", ".join(REQUIRED_NAMES)}."""\n'
    )
    function = (
        f"def {name}({sizes}):\n{doc}" + "\n".join(body) + f"\n\n{_INDENT}return {{{returned}}}\n"
    )
    return BuilderSource(function=function, future_imports="\n".join(future))


def _setter_lines(
    stmt: ast.stmt, setters: Mapping[str, list[tuple[str, int | None]]], sizes: str
) -> list[str]:
    """`<constant> = <sizes>.apply(<constant>, <axis>[, <index>])` for each size constant the
    statement assigns."""
    lines = []
    for constant in sorted(_assigned(stmt)):
        for axis, index in setters.get(constant, []):
            args = f"{constant}, {axis!r}" + ("" if index is None else f", {index}")
            lines.append(f"{_INDENT}{constant} = {sizes}.apply({args})")
    return lines


def _unparsed(stmt: ast.stmt) -> list[str]:
    """The statement's lines as the body of a function (ast.unparse indents it, strings kept)."""
    no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    wrapper = ast.FunctionDef(name="_", args=no_args, body=[stmt], decorator_list=[])
    module = ast.fix_missing_locations(ast.Module(body=[wrapper], type_ignores=[]))
    return ast.unparse(module).splitlines()[1:]


def _refuse_unsupported(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            msg = (
                f"line {node.lineno}: `from {node.module} import *` cannot run inside the "
                "reference's builder function; import the names it uses explicitly"
            )
            raise ConversionError(FailureCause.UNSUPPORTED_SOURCE, msg)
        if isinstance(node, ast.Global):
            msg = (
                f"line {node.lineno}: `global {', '.join(node.names)}`: the file's top-level "
                "names become locals of the reference's builder function; pass the value as an "
                "argument or attribute instead"
            )
            raise ConversionError(FailureCause.UNSUPPORTED_SOURCE, msg)


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def _free_name(source: str, wanted: str) -> str:
    """`wanted`, or `wanted_<n>`, whichever is not a word of the file."""
    words = set(re.findall(r"[A-Za-z_]\w*", source))
    name, n = wanted, 2
    while name in words:
        name, n = f"{wanted}_{n}", n + 1
    return name


def _line_groups(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """Top-level statements, those sharing a line (`a = 1; b = 2`) grouped together."""
    groups: list[list[ast.stmt]] = []
    for stmt in body:
        if groups and stmt.lineno == (groups[-1][-1].end_lineno or 0):
            groups[-1].append(stmt)
        else:
            groups.append([stmt])
    return groups


def _string_interior_lines(source: str) -> set[int]:
    """Lines that begin inside a multi-line string (indenting them would change the string)."""
    inside: set[int] = set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return inside
    for token in tokens:
        if token.type == tokenize.STRING and token.end[0] > token.start[0]:
            inside.update(range(token.start[0] + 1, token.end[0] + 1))
    return inside


def _indented(lines: list[str], first_line: int, in_string: set[int]) -> list[str]:
    return [
        line if (first_line + i in in_string or not line.strip()) else _INDENT + line
        for i, line in enumerate(lines)
    ]


def _same_code(chunk: list[str], group: list[ast.stmt]) -> bool:
    """Whether the indented text means exactly the statements (strings included)."""
    text = "def _():\n" + "\n".join(chunk) + "\n"
    try:
        parsed = ast.parse(text).body[0]
    except SyntaxError:
        return False
    if not isinstance(parsed, ast.FunctionDef):
        return False
    return [ast.dump(s) for s in parsed.body] == [ast.dump(s) for s in group]


def _assigned(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds by plain assignment."""
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


class KernelBenchSource:
    """A KernelBench file as its builder function, for the importer's meta and CPU runs.

    The builder text is the one `definition_builder` writes into the reference; here it is
    compiled once (the importer is KernelArc's own code, not a candidate)."""

    def __init__(self, source: str, filename: str, size_constants: SizeConstants) -> None:
        self.filename = filename
        self.size_constants = {axis: list(targets) for axis, targets in size_constants.items()}
        self.builder = builder_source(source, filename, self.size_constants)
        text = self.builder.future_imports + "\n" + self.builder.function
        scope: dict[str, Any] = {"__name__": f"kernelbench_problem_{next(_BUILDERS)}"}
        exec(compile(text, filename, "exec"), scope)  # the importer's own run of the builder
        self._build = scope[BUILDER_NAME]

    def namespace(self, sizes: Mapping[str, int]) -> adapter.Namespace:
        """The file's `Model`, `get_inputs` and `get_init_inputs` with the given axes' constants
        replaced (built anew on every call)."""
        unknown = set(sizes) - set(self.size_constants)
        if unknown:
            msg = f"{self.filename}: no size constant for {sorted(unknown)}"
            raise KeyError(msg)
        ns: adapter.Namespace = self._build(adapter.Sizes(sizes))
        return ns

    def build_model(self, ns: adapter.Namespace, device: torch.device | str) -> torch.nn.Module:
        """`Model(*get_init_inputs())` with every factory call on `device`."""
        return adapter.build_model(ns, device)

    def forward_inputs(self, ns: adapter.Namespace, device: torch.device | str) -> list[Any]:
        """`get_inputs()` with every factory call on `device`."""
        return adapter.forward_inputs(ns, device)
