"""Stage the reference and the candidate inside the runner's private temp dir and import them.

Layout under the runner's cwd: `src/` holds the solution sources (never next to request.json or
any problem file, so a source named `definition.json` overwrites nothing), `ref/_reference.py`
holds the reference, imported as module `_kernelarc_reference` from a real file so that
`@triton.jit` (which reads source via inspect) works in references.

C++ solutions (`cuda_cpp`, `cutlass`, `cudnn`, `cublas`) are built by `kernelarc.runner.cpp_build`
into `build/` next to `src/`: call `build_solution` first (a step with its own timeout, whose
`BuildError` means COMPILE_ERROR); `load_entry` then imports the built extension (it builds
first if that step was skipped). `cute_dsl` solutions are plain Python: `import cutlass` comes
from the optional `nvidia-cutlass-dsl` package (`pip install kernelarc[cutlass]`).
"""

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from kernelarc.runner.cpp_build import (
    DEFAULT_BUILD_TIMEOUT_S,
    BuildError,
    BuiltExtension,
    build_extension,
    import_extension,
    is_cpp_solution,
)
from kernelarc.schema import Definition, Solution

__all__ = [
    "DEFAULT_BUILD_TIMEOUT_S",
    "REFERENCE_MODULE",
    "BuildError",
    "BuiltExtension",
    "Entry",
    "StagingError",
    "build_solution",
    "entry_module_name",
    "load_entry",
    "load_reference",
    "write_sources",
]

REFERENCE_MODULE = "_kernelarc_reference"
CUTE_DSL_MISSING = "cute_dsl needs nvidia-cutlass-dsl (pip install kernelarc[cutlass])"

Entry = Callable[..., Any]


class StagingError(Exception):
    """The candidate or reference could not be staged or imported; the message says why."""


def write_sources(solution: Solution, root: Path) -> Path:
    """Write every source file under `root/src` and return that dir."""
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    for source in solution.sources:
        target = (src / source.path).resolve()
        # The schema already rejects absolute paths and `..`; this re-check guards symlink tricks.
        if not target.is_relative_to(src.resolve()):
            msg = f"source path {source.path!r} leaves the staging dir"
            raise StagingError(msg)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.content, encoding="utf-8")
    return src


def load_reference(definition: Definition, root: Path) -> ModuleType:
    """Write and import the reference program; errors propagate (they mean INVALID_REFERENCE)."""
    ref_dir = root / "ref"
    ref_dir.mkdir(parents=True, exist_ok=True)
    path = ref_dir / "_reference.py"
    path.write_text(definition.reference, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(REFERENCE_MODULE, path)
    if spec is None or spec.loader is None:
        msg = f"cannot build an import spec for {path}"
        raise StagingError(msg)
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so decorators that look the module up (triton.jit) find it.
    sys.modules[REFERENCE_MODULE] = module
    spec.loader.exec_module(module)
    return module


def entry_module_name(entry_file: str) -> str:
    """Dotted module name of an entry file: `pkg/kernel.py` -> `pkg.kernel`."""
    return ".".join(PurePosixPath(entry_file).with_suffix("").parts)


def build_dir_for(src: Path) -> Path:
    """Where C++ builds go: `build/` next to `src/`, inside the runner's private temp dir."""
    return src.parent / "build"


def build_solution(
    solution: Solution,
    src: Path,
    *,
    build_dir: Path | None = None,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
) -> BuiltExtension | None:
    """Build a C++ solution's extension (None for Python languages, which need no build).

    Raises BuildError (-> COMPILE_ERROR) on a compile/link error, a timeout or `.cu` sources
    on a torch without CUDA. A second call with the same arguments reuses the build.
    """
    if not is_cpp_solution(solution):
        return None
    return build_extension(solution, src, build_dir or build_dir_for(src), timeout_s=timeout_s)


def load_entry(
    solution: Solution,
    src: Path,
    *,
    build_dir: Path | None = None,
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
) -> Entry:
    """Return the solution's entry function.

    Python languages: import the entry module by dotted name with `src` first on sys.path.
    Call this only after every runner module is imported: from here on, a candidate file named
    like a module the runner still needs could otherwise shadow it.

    C++ languages: build (or reuse the build of `build_solution`), import the extension and
    take its `entry_symbol` attribute; raises BuildError when the build fails.
    """
    symbol = solution.spec.entry_symbol
    if is_cpp_solution(solution):
        built = build_solution(solution, src, build_dir=build_dir, timeout_s=build_timeout_s)
        assert built is not None
        module = import_extension(built)
        where = f"the extension built from {solution.spec.entry_file}"
    else:
        module = _import_python_entry(solution, src)
        where = entry_module_name(solution.spec.entry_file)
    fn: Entry | None = getattr(module, symbol, None)
    if fn is None or not callable(fn):
        msg = f"entry point {solution.spec.entry_point!r}: {where} has no callable {symbol!r}"
        raise StagingError(msg)
    return fn


def _import_python_entry(solution: Solution, src: Path) -> ModuleType:
    name = entry_module_name(solution.spec.entry_file)
    top = name.split(".")[0]
    loaded = sys.modules.get(top)
    if loaded is not None and not _is_under(loaded, src):
        msg = (
            f"entry module {name!r} collides with the already imported module {top!r}; "
            "rename the solution's file or package"
        )
        raise StagingError(msg)
    sys.path.insert(0, str(src))
    importlib.invalidate_caches()
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:
        # The solution's own file does not parse: a compile error, named by the solution's
        # path and line (not the staging dir's, and without importlib's frames).
        reason = syntax_error_reason(exc, src)
        if reason is None:
            raise
        raise BuildError(reason) from None
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "cutlass":
            msg = f"{CUTE_DSL_MISSING}: {exc}"
            raise StagingError(msg) from exc
        raise


def syntax_error_reason(exc: SyntaxError, src: Path) -> str | None:
    """`kernel.py line 4: invalid syntax` plus the offending line, for a file of the solution
    staged under `src`; None for a file outside it (a library's own error)."""
    if not exc.filename:
        return None
    try:
        path = Path(exc.filename).resolve().relative_to(src.resolve()).as_posix()
    except ValueError:
        return None
    kind = type(exc).__name__
    where = f"{path} line {exc.lineno}" if exc.lineno else path
    text = f"{where}: {kind}: {exc.msg}"
    if exc.text:
        line = exc.text.rstrip("\n")
        stripped = line.lstrip()
        caret = ""
        if exc.offset:
            caret = "\n    " + " " * max(0, exc.offset - 1 - (len(line) - len(stripped))) + "^"
        text += f"\n    {stripped}{caret}"
    return text


def _is_under(module: ModuleType, src: Path) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is not None and Path(origin).resolve().is_relative_to(src.resolve())
