"""Build a C++ solution (`cuda_cpp`, `cutlass`, `cudnn`, `cublas`) into a torch extension.

Follows the official packager's rules (design/sol-execbench.md §1.3, §2.2):

- Compiled sources: every `.cu/.cpp/.cc/.cxx/.c` file at the top level of `src/`, not
  recursively (`src/kernel.cu` is not compiled). Headers anywhere are found via the include path.
- Include paths: `src/`, then the CUTLASS/CuTe headers: `$CUTLASS_DIR/{include,tools/util/include}`
  when `CUTLASS_DIR` is set, else those of the `nvidia-cutlass` wheel
  (`cutlass_library/source/...`), else `/usr/local/cutlass/...` (upstream's default); only
  directories that exist.
- Flags: `compute_build_flags` (compile_options defaults per field, gencode injection).
- The module name is unique per solution and flags (`ka_<12 hex>`), defined as
  `TORCH_EXTENSION_NAME`, so sources bind with `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`.

The build (`torch.utils.cpp_extension.load`, which also imports the result once) runs in a child
process in its own session with a timeout; on timeout, and after a normal exit, every process of
that session is killed, ninja's compilers included (`build_session.py`). Every failure is a
`BuildError` whose text ends with the head and tail of the compiler log.
`plan_build` computes the name and target without building (the judge's build step,
`build_step.py`, checks a prebuilt copy against it); `run_build` builds.

Timeout: `DEFAULT_BUILD_TIMEOUT_S` = 300 s, more than upstream's `--compile-timeout` of 120 s:
a cold build of `torch/extension.h` alone takes ~35 s on a CPU host, and CUTLASS templates for
two gencode targets took most of 127 s on an H200 host.
"""

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Literal

from kernelarc.runner.build_session import run_in_session
from kernelarc.schema import CompileOptions, Solution, TargetHardware
from kernelarc.schema.solution import CPP_LANGUAGES

DEFAULT_BUILD_TIMEOUT_S = 300.0
COMPILED_SUFFIXES = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c"})
B200_GENCODE = "-gencode=arch=compute_100a,code=sm_100a"
NO_CUDA_TORCH = "torch has no CUDA here; .cu sources need a CUDA build of torch"
DEFAULT_CUTLASS_DIR = "/usr/local/cutlass"
LOG_HEAD_CHARS = 8 * 1024
LOG_TAIL_CHARS = 24 * 1024
_STAMP_SUFFIX = ".built"
_CHILD = Path(__file__).with_name("_cpp_build_child.py")

Capability = tuple[int, int]


class BuildError(Exception):
    """A C++ solution failed to build: compile or link error, timeout, or unsupported here.

    Maps to `EvalStatus.COMPILE_ERROR` for every workload. `str(exc)` is the reason followed by
    the compiler log (head and tail when long); `log_tail` is that log alone.
    """

    def __init__(self, reason: str, log_tail: str = "") -> None:
        super().__init__(f"{reason}\n{log_tail}" if log_tail else reason)
        self.reason = reason
        self.log_tail = log_tail


@dataclass(frozen=True)
class BuildFlags:
    """The `extra_cflags`, `extra_cuda_cflags` and `extra_ldflags` given to cpp_extension."""

    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    ld_flags: tuple[str, ...]


@dataclass(frozen=True)
class BuiltExtension:
    """A built extension: its module name and shared object."""

    name: str
    path: Path


@dataclass(frozen=True)
class BuildPlan:
    """Everything a build will do, known before it runs: name, target, the child's request."""

    built: BuiltExtension
    stamp: Path
    """Written after a successful build (or a verified prebuilt copy): the build is reused."""
    request: dict[str, object]
    """Keyword arguments of `torch.utils.cpp_extension.load` (the child's request JSON)."""

    @property
    def done(self) -> bool:
        """The build already succeeded in this build dir."""
        return self.stamp.is_file() and self.built.path.is_file()


def is_cpp_solution(solution: Solution) -> bool:
    """True when the solution's languages are C++ ones (the schema forbids mixing groups)."""
    return bool(set(solution.spec.languages) & CPP_LANGUAGES)


def gencode_flags(
    targets: Iterable[TargetHardware], local_capability: Capability | None
) -> list[str]:
    """Gencode flags for the targets: B200 -> sm_100a; LOCAL -> the local GPU's capability.

    `local_capability` is `(major, minor)` of the local GPU, or None without one (then LOCAL
    adds nothing).
    """
    flags: list[str] = []
    for target in targets:
        if target == TargetHardware.B200:
            flag = B200_GENCODE
        elif local_capability is not None:
            major, minor = local_capability
            flag = f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"
        else:
            continue
        if flag not in flags:
            flags.append(flag)
    return flags


def has_arch_flag(cuda_cflags: Iterable[str]) -> bool:
    """True when some nvcc flag already picks the architecture (contains -gencode or -arch)."""
    return any("-gencode" in flag or "-arch" in flag for flag in cuda_cflags)


def compute_build_flags(
    options: CompileOptions | None,
    targets: Iterable[TargetHardware],
    local_capability: Capability | None,
    *,
    torch_cuda: bool = True,
) -> BuildFlags:
    """The build flags of a solution, as the official packager computes them.

    - `options` present: each field absent from the JSON takes its default (`cflags` [],
      `cuda_cflags` ["-O3", "--use_fast_math"], `ld_flags` ["-lcuda"]); a list given replaces
      its default. The gencode flags of `targets` are appended to `cuda_cflags` unless one of
      its entries contains `-gencode` or `-arch`.
    - `options` absent and some gencode flag to inject: as if the options held only
      `cuda_cflags` = the gencode flags, so no -O3/--use_fast_math, `ld_flags` ["-lcuda"].
    - `options` absent and nothing to inject (LOCAL only, no GPU): all three lists empty.

    `torch_cuda=False` (a torch build without CUDA, which cannot link libcuda) leaves out the
    *default* `-lcuda`; an `ld_flags` list written in the JSON is kept as given.
    """
    injected = gencode_flags(targets, local_capability)
    if options is None:
        if not injected:
            return BuildFlags((), (), ())
        options = CompileOptions(cuda_cflags=injected)
        explicit_ld = False
    else:
        explicit_ld = "ld_flags" in options.model_fields_set
        if not has_arch_flag(options.cuda_cflags):
            options = options.model_copy(update={"cuda_cflags": [*options.cuda_cflags, *injected]})
    ld_flags = list(options.ld_flags)
    if not torch_cuda and not explicit_ld:
        ld_flags = [flag for flag in ld_flags if flag != "-lcuda"]
    return BuildFlags(tuple(options.cflags), tuple(options.cuda_cflags), tuple(ld_flags))


def compiled_sources(solution: Solution) -> list[str]:
    """Source paths that get compiled: top-level files with a C/C++/CUDA suffix, sorted."""
    paths = (PurePosixPath(s.path) for s in solution.sources)
    return sorted(str(p) for p in paths if len(p.parts) == 1 and p.suffix in COMPILED_SUFFIXES)


def cutlass_include_dirs() -> list[Path]:
    """Existing CUTLASS/CuTe header dirs: $CUTLASS_DIR, else the nvidia-cutlass wheel, else
    /usr/local/cutlass. Each root contributes `include` and `tools/util/include`."""
    roots: list[Path] = []
    env_dir = os.environ.get("CUTLASS_DIR")
    if env_dir:
        roots.append(Path(env_dir))
    else:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is not None and spec.submodule_search_locations:
            roots.extend(Path(loc) / "source" for loc in spec.submodule_search_locations)
        roots.append(Path(DEFAULT_CUTLASS_DIR))
    dirs = [root / sub for root in roots for sub in ("include", "tools/util/include")]
    return [d for d in dirs if d.is_dir()]


def local_cuda_capability() -> Capability | None:
    """The current CUDA device's compute capability, or None without a usable GPU."""
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return (major, minor)


def extension_name(solution: Solution, flags: BuildFlags, include_dirs: Sequence[Path]) -> str:
    """`ka_<12 hex>`: unique per build input (every source's path and content, the flags and
    the library include dirs); the entry point is not part of it, so solutions differing only
    there share a build. `include_dirs` leaves out the sources' own dir, which is first on the
    include path of every build but lies in each runner's temp dir: the name, and so the host's
    build cache, must not change with it."""
    digest = hashlib.sha256()
    for source in sorted(solution.sources, key=lambda s: s.path):
        digest.update(source.path.encode() + b"\0" + source.content.encode() + b"\0")
    payload = [
        list(flags.cflags),
        list(flags.cuda_cflags),
        list(flags.ld_flags),
        [str(d) for d in include_dirs],
    ]
    digest.update(json.dumps(payload).encode())
    return f"ka_{digest.hexdigest()[:12]}"


def build_extension(
    solution: Solution,
    src: Path,
    build_dir: Path,
    *,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
    local_capability: Capability | Literal["detect"] | None = "detect",
) -> BuiltExtension:
    """Build the solution's extension in `build_dir` (reused if this build already succeeded).

    `src` holds the written sources (`staging.write_sources`). Raises BuildError.
    """
    plan = plan_build(solution, src, build_dir, local_capability=local_capability)
    if not plan.done:
        run_build(plan, timeout_s)
    return plan.built


def plan_build(
    solution: Solution,
    src: Path,
    build_dir: Path,
    *,
    local_capability: Capability | Literal["detect"] | None = "detect",
) -> BuildPlan:
    """The build of the solution's extension in `build_dir`, without running it.

    Raises BuildError when there is nothing to build or it cannot be built here.
    """
    import torch

    if not is_cpp_solution(solution):
        msg = f"languages {sorted(solution.spec.languages)} are not C++ ones; nothing to build"
        raise BuildError(msg)
    sources = compiled_sources(solution)
    if not sources:
        msg = (
            "no top-level .cu/.cpp/.cc/.cxx/.c source to compile (files in subdirectories are "
            f"not compiled; sources: {[s.path for s in solution.sources]})"
        )
        raise BuildError(msg)
    torch_cuda = torch.version.cuda is not None
    if not torch_cuda and any(PurePosixPath(p).suffix == ".cu" for p in sources):
        raise BuildError(NO_CUDA_TORCH)
    capability = local_cuda_capability() if local_capability == "detect" else local_capability
    flags = compute_build_flags(
        solution.spec.compile_options,
        solution.spec.target_hardware,
        capability,
        torch_cuda=torch_cuda,
    )
    library_dirs = cutlass_include_dirs()
    include_dirs = [src.resolve(), *library_dirs]
    name = extension_name(solution, flags, library_dirs)
    build_dir = build_dir.resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    built = BuiltExtension(name=name, path=build_dir / f"{name}.so")
    request: dict[str, object] = {
        "name": name,
        "sources": [str(src.resolve() / p) for p in sources],
        "extra_cflags": list(flags.cflags),
        "extra_cuda_cflags": list(flags.cuda_cflags),
        "extra_ldflags": list(flags.ld_flags),
        "extra_include_paths": [str(d) for d in include_dirs],
        "build_directory": str(build_dir),
    }
    return BuildPlan(built=built, stamp=build_dir / f"{name}{_STAMP_SUFFIX}", request=request)


def run_build(plan: BuildPlan, timeout_s: float = DEFAULT_BUILD_TIMEOUT_S) -> None:
    """Compile and link the plan in a child process (which also imports the result once), then
    mark the build done. Every process the build left behind is killed before this returns.

    Raises BuildError.
    """
    name, build_dir = plan.built.name, plan.built.path.parent
    request_path = build_dir / f"{name}.request.json"
    request_path.write_text(json.dumps(plan.request, indent=1), encoding="utf-8")
    _run_child(request_path, build_dir / f"{name}.log", build_dir, timeout_s)
    if not plan.built.path.is_file():
        msg = f"the build reported success but {plan.built.path.name} is missing"
        raise BuildError(msg)
    mark_done(plan)


def mark_done(plan: BuildPlan) -> None:
    """Write the plan's stamp: later `build_extension` calls reuse `plan.built`."""
    plan.stamp.write_text(json.dumps(plan.request), encoding="utf-8")


def import_extension(built: BuiltExtension) -> ModuleType:
    """Import a built extension (torch first: the extension links against libtorch)."""
    import torch  # noqa: F401

    loaded = sys.modules.get(built.name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(built.path):
        return loaded
    loader = importlib.machinery.ExtensionFileLoader(built.name, str(built.path))
    spec = importlib.util.spec_from_file_location(built.name, built.path, loader=loader)
    if spec is None:
        msg = f"cannot build an import spec for {built.path}"
        raise BuildError(msg)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[built.name] = module
    return module


def clip_log(text: str, head: int = LOG_HEAD_CHARS, tail: int = LOG_TAIL_CHARS) -> str:
    """Head and tail of a long log: the first compiler error and the final summary."""
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def _run_child(request_path: Path, log_path: Path, cwd: Path, timeout_s: float) -> None:
    argv = [sys.executable, "-P", str(_CHILD), str(request_path)]
    code = run_in_session(argv, log_path, cwd, timeout_s)
    if code is None:
        text = clip_log(_read_log(log_path))
        msg = f"build timed out after {timeout_s:g} s (build_timeout_s); its processes killed"
        raise BuildError(msg, text)
    if code != 0:
        text = clip_log(_read_log(log_path))
        msg = f"build failed (exit status {code})"
        raise BuildError(msg, text)


def _read_log(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
