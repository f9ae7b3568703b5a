"""`kernelarc problems import kernelbench`: find KernelBench files and convert each one in its own
process.

Place in the flow: the CLI (`kernelarc/cli/problems.py`) calls `find_files` then
`import_files`. This module never imports torch: `--jobs` worker processes
(`convert_worker`, CUDA hidden, one CPU thread) import it once and fork a child per file with a
timeout, so a broken, slow or crashing file is a listed failure, never the end of the import.
A problem dir is written under a hidden staging folder and moved to `OUT/<name>/` only when its
conversion succeeded (an earlier `OUT/<name>/` is replaced then, and left alone otherwise);
`OUT/import_report.json` lists every file.
"""

import contextlib
import fnmatch
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from kernelarc import __version__
from kernelarc.errors import ConfigError, SandboxError
from kernelarc.problems.kernelbench.convert_worker import ConversionTask
from kernelarc.problems.kernelbench.naming import level_dir, level_of, problem_name
from kernelarc.problems.kernelbench.report import FailureCause, FileResult, ImportReport

REPORT_FILE = "import_report.json"
DEFAULT_TIMEOUT_S = 300.0
_WORKER = "kernelarc.problems.kernelbench.convert_worker"
_START_TIMEOUT_S = 300.0  # importing torch on a loaded machine
_GRACE_S = 30.0


@dataclass(frozen=True)
class KernelBenchFile:
    """One file to convert."""

    path: Path
    label: str
    """`levelN/<file>` when under a levelN folder, else the path relative to its PATH."""
    level: int | None
    name: str
    """Definition and folder name."""


def _label(path: Path, root: Path) -> str:
    folder = level_dir(path)
    if folder is not None:
        return path.relative_to(folder.parent).as_posix()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


def _matches(file: KernelBenchFile, only: str | None) -> bool:
    if only is None:
        return True
    pattern = only.lower()
    return any(
        fnmatch.fnmatchcase(text.lower(), pattern)
        for text in (file.label, file.path.name, file.name)
    )


def find_files(
    paths: Iterable[Path], levels: set[int] | None = None, only: str | None = None
) -> list[KernelBenchFile]:
    """The `.py` files under `paths` (folders are searched recursively), in level and number
    order. `levels` keeps files inside those `levelN` folders (files outside any levelN folder
    are always kept); `only` is a glob matched, case-insensitively, against `levelN/<file>`,
    the file name and the problem name.

    Raises:
        ConfigError: a path does not exist.
    """
    found: dict[Path, KernelBenchFile] = {}
    names: set[str] = set()
    for root in paths:
        if not root.exists():
            msg = (
                f"{root}: no such file or folder; give a KernelBench checkout's KernelBench/ "
                "folder, a levelN folder or .py files"
            )
            raise ConfigError(msg)
        candidates = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in candidates:
            resolved = path.resolve()
            if resolved in found or path.name.startswith("__"):
                continue
            level = level_of(resolved)
            if levels is not None and level is not None and level not in levels:
                continue
            name = problem_name(path, level)
            while name in names:
                name += "_dup"
            file = KernelBenchFile(resolved, _label(resolved, root.resolve()), level, name)
            if _matches(file, only):
                names.add(name)
                found[resolved] = file
    return sorted(found.values(), key=_order)


def _order(file: KernelBenchFile) -> tuple[int, int, str]:
    stem = file.path.stem
    number = int(stem.split("_", 1)[0]) if stem.split("_", 1)[0].isdigit() else 1 << 30
    return (file.level if file.level is not None else 1 << 30, number, file.label)


class _Worker:
    """One conversion worker process (`convert_worker`), started on first use and again after
    it died or hung."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        # GPU-sized shapes only ever exist as meta tensors here; keep any GPU out of reach too.
        env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", _WORKER],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its group holds the children it forks: killed together
        )
        if self._read_line(proc, _START_TIMEOUT_S) != "ready":
            self._stop(proc)
            msg = "the conversion worker did not start (python -m " + _WORKER + ")"
            raise SandboxError(msg)
        return proc

    @staticmethod
    def _read_line(proc: subprocess.Popen[str], timeout_s: float) -> str | None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = proc.stdout.readline()
        return line.strip() if line else None

    @staticmethod
    def _stop(proc: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def convert(self, task: ConversionTask) -> FileResult:
        """Convert one file; a worker that dies or hangs is replaced, the file is CRASHED."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(task.model_dump_json() + "\n")
            proc.stdin.flush()
        except OSError:
            answer = None
        else:
            answer = self._read_line(proc, task.timeout_s + _GRACE_S)
        reason = None
        if answer is None:
            died = proc.poll()
            self._stop(proc)
            self._proc = None
            reason = (
                f"the conversion worker died ({_exit_text(died)}) on this file"
                if died is not None
                else f"the conversion worker hung past {task.timeout_s + _GRACE_S:g} s"
            )
        else:
            try:
                return FileResult.model_validate_json(Path(task.result).read_text(encoding="utf-8"))
            except (OSError, ValidationError) as exc:
                reason = f"the conversion left no valid result ({type(exc).__name__})"
        return FileResult(
            source=task.label,
            level=task.level,
            name=task.name,
            converted=False,
            cause=FailureCause.CRASHED,
            reason=reason,
        )

    def close(self, kill: bool = False) -> None:
        """Let the worker end (its stdin closes), or kill it and its children."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        try:
            if kill:
                raise OSError
            proc.stdin.close()
            proc.wait(timeout=_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            self._stop(proc)


def _exit_text(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"status {code}"


def import_files(
    files: list[KernelBenchFile],
    out: Path,
    *,
    jobs: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    paths: Iterable[Path] = (),
    on_result: Callable[[FileResult], None] | None = None,
) -> ImportReport:
    """Convert every file into `out/<name>/` and write `out/import_report.json`."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=out))
    idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
    workers = [_Worker() for _ in range(max(1, min(jobs, len(files))))]
    for worker in workers:
        idle.put(worker)

    def one(file: KernelBenchFile) -> FileResult:
        written = staging / file.name
        task = ConversionTask(
            source=str(file.path),
            label=file.label,
            name=file.name,
            level=file.level,
            out_dir=str(written),
            result=str(staging / f"{file.name}.result.json"),
            log=str(staging / f"{file.name}.log"),
            timeout_s=timeout_s,
        )
        worker = idle.get()
        try:
            outcome = worker.convert(task)
        finally:
            idle.put(worker)
        if outcome.converted:
            target = out / file.name
            if target.exists():
                shutil.rmtree(target)
            written.replace(target)
        if on_result is not None:
            on_result(outcome)
        return outcome

    pool = ThreadPoolExecutor(max_workers=len(workers))
    finished = False
    try:
        results = list(pool.map(one, files))
        finished = True
    finally:
        if not finished:  # Ctrl-C: kill the conversions under way, so their threads return
            for worker in workers:
                worker.close(kill=True)
        pool.shutdown(wait=True, cancel_futures=True)
        for worker in workers:
            worker.close()
        shutil.rmtree(staging, ignore_errors=True)
    report = summarize(results, out, paths)
    (out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


def summarize(results: list[FileResult], out: Path, paths: Iterable[Path]) -> ImportReport:
    """The report of an import: counts, failures grouped by cause, every file."""
    by_cause: dict[str, list[str]] = {}
    for result in results:
        if result.cause is not None:
            by_cause.setdefault(result.cause.value, []).append(result.source)
    converted = sum(1 for r in results if r.converted)
    return ImportReport(
        kernelarc_version=__version__,
        paths=[str(p) for p in paths],
        out=str(out),
        converted=converted,
        failed=len(results) - converted,
        failures_by_cause=dict(sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
        files=results,
    )
