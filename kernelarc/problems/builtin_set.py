"""The built-in problem set: SOL-ExecBench problem dirs shipped as package data.

Place in the flow: the campaign (via the CLI's `problem=` option) calls `resolve_problem`, which
accepts a built-in name (`rmsnorm`) or a path to any SOL-ExecBench problem dir, and hands the
loaded `Problem` to the agents and the sandbox. Each built-in dir holds `definition.json`,
`workload.jsonl` (small CPU shapes) and `workload_gpu.jsonl` (GPU-sized shapes).
"""

from pathlib import Path

from kernelarc.errors import ConfigError
from kernelarc.problems.files import Problem, load_problem


def builtin_dir() -> Path:
    """The directory holding the built-in problem dirs."""
    return Path(__file__).resolve().parent / "builtin"


def builtin_names() -> list[str]:
    """Names of the built-in problems, sorted (each is a dir with a definition.json)."""
    root = builtin_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "definition.json").is_file())


def resolve_problem(name_or_path: str, workload_file: str = "workload.jsonl") -> Problem:
    """Load a problem given a built-in name, a path to a problem dir, or a path to the
    `definition.json` in one (its folder is the problem dir).

    An existing directory wins over a built-in of the same name, so `./rmsnorm` and `rmsnorm`
    can differ on purpose.

    Raises:
        ConfigError: the name is neither an existing directory nor a built-in problem.
        ProblemFormatError: the problem's files do not validate.
    """
    candidate = Path(name_or_path).expanduser()
    if candidate.name == "definition.json" and candidate.is_file():
        candidate = candidate.parent
    if candidate.is_dir():
        return load_problem(candidate, workload_file)
    names = builtin_names()
    if name_or_path in names:
        return load_problem(builtin_dir() / name_or_path, workload_file)
    msg = (
        f"unknown problem {name_or_path!r}: not a built-in problem and not a directory; "
        f"built-in problems: {', '.join(names)}; or give a path to a SOL-ExecBench problem dir "
        "(definition.json + workload.jsonl)"
    )
    raise ConfigError(msg)
