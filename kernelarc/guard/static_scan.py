"""Matching for the static rules: an AST pass over each Python source plus token-level regexes.

Place in the flow: `static_rules.scan_solution` calls `scan_python_source` per `.py` source and
`scan_source_paths` once; both return `Match`es naming a rule id of the catalogue. Names are
resolved through the file's imports (`import torch as T` makes `T.cuda` mean `torch.cuda`) and
simple assignments (`c = torch.cuda`), so aliasing does not hide a call. The names and
patterns each rule matches are the tables of `static_patterns.py`.
"""

import ast
import io
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kernelarc.guard.static_patterns import (
    ATTRIBUTE_RULES,
    BUILTIN_RULES,
    CACHE_DECORATORS,
    CONTAINER_CALLS,
    ENV_WRITE_METHODS,
    IDENTITY_ATTRS,
    IDENTITY_CALLS,
    QUALNAME_RULES,
    RESERVED_FILES,
    RESERVED_TOP_LEVEL,
    SETTING_PREFIXES,
    STORE_METHODS,
    TOKEN_RULES,
)
from kernelarc.python_ast import parse_module
from kernelarc.schema import SourceFile


@dataclass(frozen=True)
class Match:
    """One rule hit."""

    rule: str
    """Rule id."""
    line: int
    """1-based line (0: the whole file)."""
    detail: str
    """What matched."""
    path: str = ""
    """Set by path rules; empty means the file being scanned."""


def qualname_rule(qualname: str) -> str | None:
    """The rule a resolved dotted name triggers, if any (the most specific prefix wins)."""
    best: tuple[int, str] | None = None
    for rule, prefixes in QUALNAME_RULES:
        for prefix in prefixes:
            if (qualname == prefix or qualname.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), rule)
    return best[1] if best else None


def scan_source_paths(sources: Iterable[SourceFile]) -> list[Match]:
    """KA-S023: source paths that overwrite problem files or shadow the evaluator's imports."""
    found: list[Match] = []
    for source in sources:
        parts = source.path.split("/")
        name = parts[-1]
        top = parts[0].removesuffix(".py")
        if (
            name in RESERVED_FILES
            or name.endswith(".pth")
            or name.startswith("benchmark_kernel")
            or top in RESERVED_TOP_LEVEL
        ):
            found.append(Match("KA-S023", 0, f"source path {source.path!r}", path=source.path))
    return found


def scan_python_source(text: str, entry_symbol: str | None) -> list[Match]:
    """All rule hits in one Python source; `entry_symbol` is set for the entry-point file."""
    try:
        tree = parse_module(text)
    except SyntaxError as exc:
        matches = list(_token_matches(text, frozenset()))
        matches.append(Match("KA-S035", exc.lineno or 0, f"syntax error: {exc.msg}"))
        return matches
    matches = list(_token_matches(text, _bare_string_lines(tree)))
    visitor = _Visitor(entry_symbol, _module_containers(tree))
    visitor.visit(tree)
    return matches + visitor.matches


def _bare_string_lines(tree: ast.Module) -> frozenset[int]:
    """First lines of string statements (docstrings): prose, never used as data."""
    return frozenset(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _code_tokens(text: str, skip_string_lines: frozenset[int]) -> Iterator[tuple[int, str]]:
    """(line, text) of every token except comments and docstrings; the raw lines if the text
    does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        yield from enumerate(text.splitlines(), start=1)
        return
    for token in tokens:
        if token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.STRING and token.start[0] in skip_string_lines:
            continue
        yield token.start[0], token.string


def _token_matches(text: str, skip_string_lines: frozenset[int]) -> Iterator[Match]:
    for line, chunk in _code_tokens(text, skip_string_lines):
        for rule, pattern in TOKEN_RULES:
            found = pattern.search(chunk)
            if found:
                yield Match(rule, line, f"`{found.group(0)}`")


def _module_containers(tree: ast.Module) -> frozenset[str]:
    """Module-level names bound to a mutable container (dict/list/set display or constructor)."""
    names: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        if value is None or not _is_container(value):
            continue
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def _is_container(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in CONTAINER_CALLS
    return False


class _Visitor(ast.NodeVisitor):
    """Walks one module; resolves names through imports and collects rule hits."""

    def __init__(self, entry_symbol: str | None, containers: frozenset[str]) -> None:
        self.entry_symbol = entry_symbol
        self.containers = containers
        self.aliases: dict[str, str] = {}
        self.tainted: set[str] = set()
        self.matches: list[Match] = []

    # --- helpers -----------------------------------------------------------------------------

    def _hit(self, rule: str, node: ast.AST, detail: str) -> None:
        self.matches.append(Match(rule, getattr(node, "lineno", 0), detail))

    def _resolve(self, node: ast.expr) -> str | None:
        """Dotted name of a Name/Attribute chain rooted at an imported (or aliased) name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def _check_qualname(self, qualname: str, node: ast.AST) -> None:
        rule = qualname_rule(qualname)
        if rule is not None:
            self._hit(rule, node, f"`{qualname}`")

    def _has_identity(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Name) and func.id in IDENTITY_CALLS:
                    return True
                if isinstance(func, ast.Attribute) and func.attr in IDENTITY_ATTRS:
                    return True
            if isinstance(sub, ast.Attribute) and sub.attr in IDENTITY_ATTRS:
                return True
            if isinstance(sub, ast.Name) and sub.id in self.tainted:
                return True
        return False

    # --- imports and aliases -----------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_qualname(alias.name, node)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module:
            self._check_qualname(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if alias.name != "*":
                self._check_qualname(full, node)
                self.aliases[alias.asname or alias.name] = full

    # --- references --------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        rule = ATTRIBUTE_RULES.get(node.attr)
        if rule is not None:
            self._hit(rule, node, f"`.{node.attr}`")
        qualname = self._resolve(node)
        if qualname is not None:
            self._check_qualname(qualname, node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            if isinstance(node.ctx, ast.Load):
                self._check_qualname(self.aliases[node.id], node)
        elif node.id in BUILTIN_RULES:
            self._hit(BUILTIN_RULES[node.id], node, f"`{node.id}`")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            self._check_patch_target(node.args[0], node, via=func.id)
        if isinstance(func, ast.Attribute):
            owner = self._resolve(func.value)
            if owner == "os.environ" and func.attr in ENV_WRITE_METHODS:
                self._hit("KA-S022", node, f"`os.environ.{func.attr}`")
            if (
                isinstance(func.value, ast.Name)
                and func.value.id in self.containers
                and func.attr in STORE_METHODS
                and any(self._has_identity(arg) for arg in node.args)
            ):
                self._hit("KA-S015", node, f"`{func.value.id}.{func.attr}(<tensor identity>)`")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (
            isinstance(node.value, ast.Name)
            and node.value.id in self.containers
            and self._has_identity(node.slice)
        ):
            self._hit("KA-S015", node, f"`{node.value.id}[<tensor identity>]`")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for op, right in zip(node.ops, node.comparators, strict=True):
            if (
                isinstance(op, ast.In | ast.NotIn)
                and isinstance(right, ast.Name)
                and right.id in self.containers
                and self._has_identity(node.left)
            ):
                self._hit("KA-S015", node, f"`<tensor identity> in {right.id}`")
        self.generic_visit(node)

    # --- assignments -------------------------------------------------------------------------

    def _check_patch_target(self, target: ast.expr, node: ast.AST, via: str) -> None:
        """KA-S003 (or KA-S034 for settings) when `target` is rooted at an imported module."""
        base = target.value if isinstance(target, ast.Attribute | ast.Subscript) else target
        qualname = self._resolve(base)
        if qualname is None:
            return
        if qualname == "os.environ" and isinstance(target, ast.Subscript):
            self._hit("KA-S022", node, "`os.environ[...]` written")
        elif qualname.startswith(SETTING_PREFIXES):
            self._hit("KA-S034", node, f"`{qualname}` set")
        elif isinstance(target, ast.Attribute) or via != "assign":
            self._hit("KA-S003", node, f"{via} on `{qualname}`")

    def _visit_assign_targets(self, targets: list[ast.expr], value: ast.expr | None) -> None:
        for target in targets:
            self._check_patch_target(target, target, via="assign")
            if isinstance(target, ast.Name) and value is not None:
                resolved = self._resolve(value)
                if resolved is not None:
                    self.aliases[target.id] = resolved
                if self._has_identity(value):
                    self.tainted.add(target.id)
                if target.id == self.entry_symbol and self._is_cache_call(value):
                    self._hit("KA-S014", target, f"`{target.id}` wrapped in a cache")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._visit_assign_targets(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_assign_targets([node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._visit_assign_targets([node.target], None)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_patch_target(target, node, via="del")
        self.generic_visit(node)

    # --- definitions -------------------------------------------------------------------------

    def _is_cache_call(self, node: ast.expr) -> bool:
        while isinstance(node, ast.Call):
            qualname = self._resolve(node.func)
            if qualname in CACHE_DECORATORS:
                return True
            node = node.func
        return self._resolve(node) in CACHE_DECORATORS

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if self._is_cache_call(decorator):
                rule = "KA-S014" if node.name == self.entry_symbol else "KA-S030"
                self._hit(rule, decorator, f"cache decorator on `{node.name}`")
        for sub in ast.walk(node):
            if isinstance(sub, ast.Global):
                self._hit("KA-S032", sub, f"`global {', '.join(sub.names)}` in `{node.name}`")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if self._resolve(base) in (
                "torch.Tensor",
                "torch._C.TensorBase",
                "torch._C._TensorBase",
            ):
                self._hit("KA-S021", node, f"class `{node.name}` subclasses torch.Tensor")
        self.generic_visit(node)
