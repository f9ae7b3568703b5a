"""`kernelarc problems ...`: the problem-set commands (today: `import kernelbench`).

Place in the flow: `kernelarc.cli` registers `add_parser` and hands the parsed arguments to
`run`; the work is in `kernelarc.problems.kernelbench.importer`. Nothing here imports torch: each
file is converted in its own subprocess.
"""

import argparse
import os
import threading
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from kernelarc.errors import ConfigError

_EPILOG_IMPORT_KERNELBENCH = """\
Converts KernelBench problems (ScalingIntelligence/KernelBench: files with `class Model`,
module-level size constants, get_inputs() and get_init_inputs()) into SOL-ExecBench problem dirs,
OUT/<name>/ with definition.json, workload.jsonl (small sizes for the CPU) and
workload_gpu.jsonl (KernelBench's sizes and one smaller). The forward's arguments and the
model's parameters and buffers become inputs drawn the way KernelBench draws them; size
constants become axes. Each file runs in its own subprocess with a timeout (the files are code:
import only files you trust); a file that cannot be converted is listed with the reason.
Writes OUT/import_report.json. Exit status 0 if at least one file converted, 1 if none did,
2 for bad arguments. See docs/problems.md.

examples:
  git clone https://github.com/ScalingIntelligence/KernelBench ~/KernelBench
  kernelarc problems import kernelbench ~/KernelBench/KernelBench --out ~/kb_problems
  kernelarc problems import kernelbench ~/KernelBench/KernelBench --out kb --only 'level1/*Norm*'
  kernelarc problems import kernelbench level2/12_Gemm_Multiply_LeakyReLU.py --out kb --jobs 1
  kernelarc eval ~/kb_problems/kb_l1_36_rmsnorm --solution solution.json --device cpu
"""


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `problems import kernelbench` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    problems = sub.add_parser(
        "problems",
        help="problem sets: import KernelBench problems as SOL-ExecBench problem dirs",
        description="Problem-set commands.",
        formatter_class=fmt,
        epilog="examples:\n"
        "  kernelarc problems import kernelbench ~/KernelBench/KernelBench --out kb\n"
        "run `kernelarc problems import kernelbench --help` for the details.\n",
    )
    problems.set_defaults(problems_help=problems.print_help)
    kinds = problems.add_subparsers(dest="problems_command", metavar="{import}")
    importing = kinds.add_parser(
        "import",
        help="convert another benchmark's problems into SOL-ExecBench problem dirs",
        description="Convert another benchmark's problems into SOL-ExecBench problem dirs.",
    )
    importing.set_defaults(problems_help=importing.print_help)
    formats = importing.add_subparsers(dest="import_format", metavar="{kernelbench}")
    kb = formats.add_parser(
        "kernelbench",
        help="KernelBench level 1 and 2 files (Model, get_inputs, get_init_inputs)",
        description="Convert KernelBench problems into SOL-ExecBench problem dirs.",
        epilog=_EPILOG_IMPORT_KERNELBENCH,
        formatter_class=fmt,
    )
    kb.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a KernelBench checkout's KernelBench/ folder, a levelN folder, or .py files",
    )
    kb.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    kb.add_argument(
        "--levels",
        default="1,2",
        help="comma-separated levels to convert, or `all` (default 1,2; files outside any "
        "levelN folder are always converted)",
    )
    kb.add_argument(
        "--jobs",
        type=int,
        default=max(1, min(8, (os.cpu_count() or 2) // 2)),
        help="files converted at once (default: half the CPUs, at most 8)",
    )
    kb.add_argument(
        "--only", metavar="PATTERN", help="glob on levelN/<file>, the file name or the problem name"
    )
    kb.add_argument("--timeout", type=float, default=300.0, help="seconds per file (default 300)")


def _parse_levels(text: str) -> set[int] | None:
    if text.strip().lower() == "all":
        return None
    try:
        levels = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        levels = set()
    if not levels or min(levels) < 1:
        msg = f"--levels {text!r}: give comma-separated level numbers such as 1,2, or `all`"
        raise ConfigError(msg)
    return levels


def run(ns: argparse.Namespace) -> int:
    """Dispatch `kernelarc problems ...`; the help and status 2 when the command is incomplete."""
    if getattr(ns, "import_format", None) != "kernelbench":
        ns.problems_help()
        return 2
    return _import_kernelbench(ns)


def _import_kernelbench(ns: argparse.Namespace) -> int:
    from kernelarc.problems.kernelbench.importer import REPORT_FILE, find_files, import_files
    from kernelarc.problems.kernelbench.report import FileResult

    if ns.jobs < 1 or ns.timeout <= 0:
        msg = "--jobs must be at least 1 and --timeout positive"
        raise ConfigError(msg)
    files = find_files(ns.paths, _parse_levels(ns.levels), ns.only)
    if not files:
        where = ", ".join(str(p) for p in ns.paths)
        msg = f"no KernelBench .py files under {where} (levels {ns.levels}, only {ns.only or '*'})"
        raise ConfigError(msg)
    console = Console(highlight=False, soft_wrap=True)
    lock = threading.Lock()
    console.print(f"converting {len(files)} file(s) into {ns.out} with {ns.jobs} job(s)")

    def show(result: FileResult) -> None:
        with lock:
            if result.converted:
                console.print(
                    f"[green]converted[/] {escape(result.source)} -> {escape(result.name)} "
                    f"({len(result.axes)} axes, {result.cpu_workloads} CPU + "
                    f"{result.gpu_workloads} GPU workloads, {result.seconds:.1f} s)"
                )
                for warning in result.warnings:
                    console.print(f"  [yellow]warning:[/] {escape(warning)}")
            else:
                console.print(
                    f"[bold red]failed[/]    {escape(result.source)} "
                    f"{escape(f'[{result.cause}]')}: {escape(result.reason or '')}"
                )

    report = import_files(
        files, ns.out, jobs=ns.jobs, timeout_s=ns.timeout, paths=ns.paths, on_result=show
    )
    console.print(
        f"converted {report.converted} of {len(report.files)} file(s) into {ns.out}; "
        f"report: {ns.out / REPORT_FILE}"
    )
    for cause, sources in report.failures_by_cause.items():
        console.print(f"  {cause}: {len(sources)} ({escape(', '.join(sources))})")
    return 0 if report.converted else 1
