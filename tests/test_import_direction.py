"""Layering the linter cannot express (issue #19): imports only point down.

`leaderboard` imports `kernelarc`, and of `kernelarc` only the export command imports
`leaderboard` (scoring and the run-dir reader sit below both; issue #19 found report ->
leaderboard -> guard -> leaderboard cycles). No subpackage of `kernelarc` imports one that imports
it back, and no module does either; and every import between packages points down `LAYERS`, the
order docs/architecture.md ("Module map") writes down.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The application on top: the command that writes a leaderboard export.
ALLOWED = {"kernelarc/cli/export.py"}


def _imports_leaderboard(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "leaderboard" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "leaderboard":
            return True
    return False


def test_only_the_export_command_imports_leaderboard() -> None:
    importing = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "kernelarc").rglob("*.py"))
        if _imports_leaderboard(path)
    }
    assert importing <= ALLOWED, f"library modules importing leaderboard: {importing - ALLOWED}"
    assert importing, "the export command no longer imports leaderboard: update ALLOWED"


# Import cycles (issue #19): imports only point down, type-only imports included. The graph is
# read from the source with ast, so an import under `if TYPE_CHECKING:` or inside a function counts
# like a top-level one: a lazy import hides a cycle from Python, not from the layering.


Graph = dict[str, set[str]]


def _modules() -> dict[str, Path]:
    """Dotted name of every module of `kernelarc` and `leaderboard` (a package is its
    __init__.py), to its file."""
    out: dict[str, Path] = {}
    for top in ("kernelarc", "leaderboard"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(
    name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]
) -> set[str]:
    """The project modules one import statement of module `name` reaches: the nearest existing
    module of each target; `from p import m` reaches the module p.m when there is one, else p."""

    def nearest(target: str) -> str:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target

    if isinstance(node, ast.Import):
        return {nearest(alias.name) for alias in node.names} - {""}
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    out = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.add(sub if sub in modules else nearest(base))
    return out - {""}


def _module_graph() -> Graph:
    """Every module to the project modules it imports, a package's imports of its own submodules
    included: a submodule that imports names from its package's `__init__` while that `__init__`
    imports it (even lazily, as `executor.make_executor` does) is a cycle too."""
    modules = _modules()
    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name] |= {
                    target for target in _imported(name, path, node, modules) if target != name
                }
    return graph


def _package(module: str) -> str:
    """The unit of the package graph: a subpackage or top-level module of kernelarc
    (`kernelarc.guard`, `kernelarc.errors`), `kernelarc` itself, or all of `leaderboard`."""
    parts = module.split(".")
    return parts[0] if parts[0] == "leaderboard" else ".".join(parts[:2])


def _cycles(graph: Graph) -> list[set[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_no_package_imports_another_that_imports_it_back() -> None:
    graph = _module_graph()
    packages: Graph = {}
    for module, targets in graph.items():
        packages.setdefault(_package(module), set())
        for target in targets:
            if _package(target) != _package(module):
                packages[_package(module)].add(_package(target))
    problems = []
    for cycle in _cycles(packages):
        edges = sorted(
            f"  {module} -> {target}"
            for module, targets in graph.items()
            for target in targets
            if _package(module) in cycle
            and _package(target) in cycle
            and _package(target) != _package(module)
        )
        problems.append(f"package cycle {sorted(cycle)}, made by:\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


def test_no_module_imports_another_that_imports_it_back() -> None:
    graph = _module_graph()
    problems = []
    cycles = _cycles(graph)
    for cycle in cycles:
        edges = sorted(
            f"  {module} -> {target}"
            for module in cycle
            for target in graph[module]
            if target in cycle
        )
        problems.append(f"module cycle {sorted(cycle)}, made by:\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


#: The packages bottom to top, as docs/architecture.md lists them. A package imports only
#: packages of lower layers; the base layer's modules import each other (no cycles, above).
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "kernelarc kernelarc.errors kernelarc.python_ast kernelarc.ratio_interval "
        "kernelarc.command_paths kernelarc.config kernelarc.jsonl_log kernelarc.reference_ops "
        "kernelarc.timing_labels kernelarc.problem_key kernelarc.schema",
        "kernelarc.runner kernelarc.kernelgen",
        "kernelarc.problems",
        "kernelarc.sandboxes kernelarc.tracing kernelarc.guard",
        "kernelarc.executor kernelarc.rundir",
        "kernelarc.llm kernelarc.tracking",
        "kernelarc.agents kernelarc.report leaderboard",
        "kernelarc.coordination",
        "kernelarc.campaign",
        "kernelarc.benchmark kernelarc.cli",
    )
)


def test_every_package_import_points_down_the_documented_layers() -> None:
    layer_of = {package: index for index, layer in enumerate(LAYERS) for package in layer}
    graph = _module_graph()
    unplaced = sorted({_package(module) for module in graph} - set(layer_of))
    assert not unplaced, f"packages missing from LAYERS (and docs/architecture.md): {unplaced}"
    upward = sorted(
        f"  {module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if _package(target) != _package(module)
        and layer_of[_package(target)] >= layer_of[_package(module)]
        and layer_of[_package(module)] > 0
    )
    assert not upward, "imports that do not point down LAYERS:\n" + "\n".join(upward)
