"""The host's access to a problem's traced graphs: a subprocess that traces, and a cache.

Place in the flow: the generated-kernel space of the strategy agents calls `load_traces` once
per problem; it runs `python -m kernelarc.tracing` (which imports torch: the campaign process
never does) with the GPU hidden and a timeout, and caches the `TraceSet` in memory and on disk
(`$KERNELARC_CACHE_DIR/traces/` or `~/.cache/kernelarc/traces/`, keyed by the definition and the
workload files' contents, the Python and torch that traced them and the tracer's own sources, so
an upgrade never reuses a stale graph). An unreadable entry is traced again. Concurrent agents
asking for the same problem wait for one trace.
"""

import hashlib
import importlib.metadata
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from pydantic import ValidationError

from kernelarc.schema.op_graph import TraceSet

logger = logging.getLogger(__name__)

CACHE_ENV = "KERNELARC_CACHE_DIR"
TRACE_TIMEOUT_S = 300.0

_lock = threading.Lock()
_problem_locks: dict[str, threading.Lock] = {}
_memory: dict[str, TraceSet | str] = {}


def cache_root() -> Path:
    """`$KERNELARC_CACHE_DIR/traces` or `~/.cache/kernelarc/traces`."""
    base = os.environ.get(CACHE_ENV)
    root = Path(base) if base else Path.home() / ".cache" / "kernelarc"
    return root / "traces"


def workload_files(problem_dir: Path, first: str | None = None) -> list[str]:
    """The problem's workload files (`first` leading), every `workload*.jsonl` in the dir."""
    names = sorted(p.name for p in problem_dir.glob("workload*.jsonl"))
    if first and first in names:
        names.remove(first)
        names.insert(0, first)
    return names


def load_traces(problem_dir: Path, files: list[str]) -> TraceSet | str:
    """The problem's traced graphs, or why there are none (one line)."""
    key = _key(problem_dir, files)
    with _lock:
        lock = _problem_locks.setdefault(key, threading.Lock())
    with lock:
        if key in _memory:
            return _memory[key]
        result: TraceSet | str | None = _from_disk(key)
        if result is None:
            result = _trace(problem_dir, files)
            if isinstance(result, TraceSet):
                _to_disk(key, result)
        _memory[key] = result
        return result


def clear_memory() -> None:
    """Forget the traces held in memory (the disk cache stays); for long-lived processes."""
    with _lock:
        _memory.clear()


def _tracer_identity() -> bytes:
    """The torch version and the tracer's sources: what a cached graph depends on besides the
    problem."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    digest = hashlib.sha256(torch_version.encode())
    package = Path(__file__).resolve().parents[1]
    sources = [*sorted((package / "tracing").glob("*.py")), package / "schema" / "op_graph.py"]
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.digest()


def _key(problem_dir: Path, files: list[str]) -> str:
    digest = hashlib.sha256(sys.executable.encode())
    digest.update(_tracer_identity())
    for name in ["definition.json", *files]:
        path = problem_dir / name
        digest.update(name.encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<missing>")
    return digest.hexdigest()[:32]


def _from_disk(key: str) -> TraceSet | None:
    path = cache_root() / f"{key}.json"
    try:
        return TraceSet.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None


def _to_disk(key: str, traces: TraceSet) -> None:
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(traces.model_dump_json(), encoding="utf-8")
        tmp.replace(root / f"{key}.json")
    except OSError as exc:
        logger.warning("cannot cache traced graphs under %s: %s", root, exc)


def _trace(problem_dir: Path, files: list[str]) -> TraceSet | str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INTERPRET")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory(prefix="kernelarc-trace-") as tmp:
        out = Path(tmp) / "traces.json"
        command = [
            sys.executable,
            "-m",
            "kernelarc.tracing",
            str(problem_dir.resolve()),
            str(out),
            *files,
        ]
        try:
            done = subprocess.run(
                command,
                env=env,
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=TRACE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"tracing the reference took longer than {TRACE_TIMEOUT_S:.0f} s"
        if done.returncode != 0 or not out.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"tracing the reference failed (exit {done.returncode}): {tail[0][:300]}"
        try:
            return TraceSet.model_validate_json(out.read_text(encoding="utf-8"))
        except (ValidationError, ValueError) as exc:
            return f"the tracer wrote an unreadable file: {exc}"[:300]
