"""The conversion worker: `python -m kernelarc.problems.kernelbench.convert_worker`.

Place in the flow: `importer.py` starts one worker per job. The worker imports torch and the
converter once, then, for every task line on stdin (a `ConversionTask` as JSON), forks a child
that converts that one file (`convert.convert_file`) and writes its `FileResult` JSON; the
worker waits at most the task's timeout, kills the child when it runs over, writes a TIMEOUT or
CRASHED result itself when the child left none, and answers `done` on stdout. A KernelBench file
is arbitrary code: it runs only in the forked child, with its stdout and stderr sent to the
task's log, one CPU thread, CUDA hidden (by the importer) and an address-space limit, so a
file that hangs, crashes or patches torch affects nothing after it.
"""

import contextlib
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

from pydantic import Field

from kernelarc.problems.kernelbench.report import FailureCause, FileResult
from kernelarc.schema.base import RecordModel

#: Address-space limit of a conversion: every big tensor is a meta tensor, so running into this
#: means the file allocates real memory on its own (it fails instead of swapping).
MEMORY_LIMIT_BYTES = 16 << 30
_POLL_S = 0.02


class ConversionTask(RecordModel):
    """One file for the worker."""

    source: str
    label: str
    name: str
    level: int | None
    out_dir: str
    result: str
    log: str
    timeout_s: float = Field(gt=0)


def _child(task: ConversionTask) -> None:
    """In the forked child: convert, write the result, never return."""
    status = 1
    try:
        fd = os.open(task.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        with contextlib.suppress(ValueError, OSError):  # a lower hard limit is already set
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
        from kernelarc.problems.kernelbench.convert import convert_file

        outcome = convert_file(
            Path(task.source), task.label, task.name, task.level, Path(task.out_dir)
        )
        _write_result(task, outcome)
        status = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _write_result(task: ConversionTask, outcome: FileResult) -> None:
    tmp = Path(task.result + ".tmp")
    tmp.write_text(outcome.model_dump_json(), encoding="utf-8")
    tmp.replace(task.result)


def _last_line(log: str) -> str:
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return "no output"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][-400:] if lines else "no output"


def _failed(task: ConversionTask, cause: FailureCause, reason: str, seconds: float) -> FileResult:
    return FileResult(
        source=task.label,
        level=task.level,
        name=task.name,
        converted=False,
        cause=cause,
        reason=reason,
        seconds=seconds,
    )


def run_task(task: ConversionTask) -> None:
    """Convert one file in a forked child, within the task's timeout."""
    Path(task.result).unlink(missing_ok=True)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(task)
    deadline = started + task.timeout_s
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            reason = f"conversion ran past {task.timeout_s:g} s and was killed"
            _write_result(task, _failed(task, FailureCause.TIMEOUT, reason, task.timeout_s))
            return
        else:
            time.sleep(_POLL_S)
    if not Path(task.result).is_file():
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {-code}" if code < 0 else f"status {code}"
        reason = f"conversion died ({how}): {_last_line(task.log)}"
        elapsed = time.monotonic() - started
        _write_result(task, _failed(task, FailureCause.CRASHED, reason, elapsed))


_WARM_UP_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))

batch_size = 4
features = 8

def get_inputs():
    return [torch.rand(batch_size, features)]

def get_init_inputs():
    return [features]
"""


def _warm_up() -> None:
    """Convert a tiny problem once before forking, so that the lazy imports of torch
    (torch.func pulls in dynamo: seconds) are paid once per worker, not once per file."""
    from kernelarc.problems.kernelbench.convert import convert_file

    with tempfile.TemporaryDirectory(prefix="kernelarc-kb-warm-") as tmp:
        path = Path(tmp) / "warm_up.py"
        path.write_text(_WARM_UP_PROBLEM, encoding="utf-8")
        convert_file(path, "warm_up.py", "warm_up", None, Path(tmp) / "out")


def main() -> int:
    """Serve tasks from stdin until it closes."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of the worker itself must not corrupt the protocol
    import torch

    torch.set_num_threads(1)
    _warm_up()
    protocol.write("ready\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        task = ConversionTask.model_validate_json(line)
        run_task(task)
        protocol.write(f"done {task.name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
