"""Stage the reference and the candidate inside the runner's private temp dir and import them.

Layout under the runner's cwd: `src/` holds the solution sources (never next to request.json or
any problem file, so a source named `definition.json` overwrites nothing), `ref/_reference.py`
holds the reference, imported as module `_kernelarc_reference` from a real file so that
`@triton.jit` (which reads source via inspect) works in references.
"""

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from kernelarc.schema import Definition, Solution

REFERENCE_MODULE = "_kernelarc_reference"

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


def load_entry(solution: Solution, src: Path) -> Entry:
    """Import the solution's entry module by dotted name with `src` first on sys.path.

    Call this only after every runner module is imported: from here on, a candidate file named
    like a module the runner still needs could otherwise shadow it.
    """
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
    module = importlib.import_module(name)
    symbol = solution.spec.entry_symbol
    fn: Entry | None = getattr(module, symbol, None)
    if fn is None or not callable(fn):
        msg = f"entry point {solution.spec.entry_point!r}: {name} has no callable {symbol!r}"
        raise StagingError(msg)
    return fn


def _is_under(module: ModuleType, src: Path) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is not None and Path(origin).resolve().is_relative_to(src.resolve())
