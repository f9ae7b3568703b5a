"""Entry point of the in-sandbox judge.

`python -P -m kernelarc.runner REQUEST.json RESULT.json` evaluates at once (the cold form);
`python -P -m kernelarc.runner --device DEVICE REQUEST.json RESULT.json` is a *spare*: it imports
torch first, then waits for a `go` line on stdin and only then reads REQUEST.json (which need
not exist before `go`). A sandbox starts a spare before the candidate arrives, so the ~3 s
import is off the candidate's path (see `kernelarc/sandboxes/spare_slot.py`). EOF instead of
`go` ends a spare quietly (a discarded spare). With `--resident MAX_REQUESTS` after `--device`
the spare is a resident judge that serves request after request of one problem
(`resident.py`).

This process is the judge; candidate code runs only in worker processes it forks (see
`evaluate.py`). Order matters here:
1. fd 1 is pointed at stderr before anything else, so nothing printed can look like runner
   output, and the process makes itself non-dumpable (`result_key`).
2. TRITON_INTERPRET (and no precompiled header for Inductor, `_cpu_environment`) is set on CPU
   before torch/triton load (triton reads it at import): from the request (cold form) or from
   --device (a spare; a request for another device is refused with RUNTIME_ERROR traces, which
   the host never sends).
3. The evaluation modules (torch) load and the worker zygote is forked (by a spare before `go`,
   with its first worker: `head_start.py`); only then is the result key read from stdin, so no
   worker ever has it in memory (a spare reads its `go` line one byte at a time, so the key line
   behind it stays in the pipe until then).
4. After each workload RESULT.json is rewritten atomically and signed with the key, so a crash or
   a kill later still leaves the traces done so far, and a file a worker writes is rejected. It
   holds the traces in request order (null for a workload not done yet), the stage times, the
   C++ build step and the workloads a screen left unevaluated (`run_facts.py`).
Any exception escaping the evaluation becomes RUNTIME_ERROR traces for the unfinished workloads.
A runner whose own set-up failed before any candidate code existed (its user has no name, its
dirs cannot be written: `self_check.py`; the zygote cannot start; a request for another device)
evaluates nothing and says so in the signed result (`setup_error`): the host reports that as
an infrastructure failure, never as the candidate's.
"""

import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Step 1, before any heavy import.
os.dup2(2, 1)

from kernelarc.runner.go_line import BadGoLine, lead_own_group, start_deadline, wait_for_go  # noqa: E402
from kernelarc.runner.result_key import read_result_key, set_dumpable  # noqa: E402
from kernelarc.runner.result_writer import crash_traces, write_result  # noqa: E402
from kernelarc.runner.run_facts import RunFacts  # noqa: E402
from kernelarc.runner.self_check import setup_problems  # noqa: E402
from kernelarc.schema import EvalRequest, Trace  # noqa: E402

if TYPE_CHECKING:
    from kernelarc.runner.head_start import HeadStart

set_dumpable(False)

logger = logging.getLogger("kernelarc.runner")


def _run(
    request: EvalRequest,
    root: Path,
    result_path: Path,
    refused: str | None,
    head: "HeadStart | None" = None,
) -> None:
    """Evaluate (with the zygote and worker of `head` when the spare had a head start);
    `refused` (a set-up failure) writes crash traces without evaluating anything and names the
    failure in the result."""
    traces: dict[int, Trace] = {}
    facts = RunFacts()
    zygote: Any = None
    prestarted: Any = None
    setup_error = refused
    crash_log = f"sandbox set-up failed: {refused}" if refused else ""
    crash_log = crash_log or "runner ended before every workload had a trace"
    try:
        if refused is None:
            from kernelarc.runner.evaluate import evaluate_request, start_zygote  # torch
            from kernelarc.runner.memory_limit import apply_address_space

            apply_address_space(request)  # the judge's own; each worker applies it at setup
            if head is not None:
                (zygote, prestarted), head = (head.zygote, head.worker), None
            else:
                zygote = start_zygote(request.device, root)
    except Exception:
        crash_log = "runner failed to start:\n" + traceback.format_exc()
        setup_error = crash_log[-2000:]
    if head is not None:
        head.close()
    key = read_result_key()  # step 3: after the fork
    try:
        if zygote is not None:
            evaluation = evaluate_request(request, root, zygote, facts, prestarted=prestarted)
            for index, trace in evaluation:
                traces[index] = trace
                write_result(result_path, request, traces, facts, key)
    except Exception:
        crash_log = "runner crashed:\n" + traceback.format_exc()
    finally:
        if zygote is not None:
            zygote.close()
    if len(traces) + len(facts.skipped) < len(request.workloads):
        crash_traces(request, traces, facts.skipped, crash_log)
    write_result(result_path, request, traces, facts, key, setup_error, complete=True)


_USAGE = (
    "usage: python -P -m kernelarc.runner [--device cpu|cuda [--resident MAX_REQUESTS]] "
    "REQUEST.json RESULT.json"
)


def _parse(argv: list[str]) -> tuple[str | None, int, list[str]] | None:
    """(--device or None, --resident's MAX_REQUESTS or 0, the two paths), or None on bad usage."""
    device, resident = None, 0
    if argv[:1] == ["--device"]:
        if len(argv) < 2 or argv[1] not in ("cpu", "cuda"):
            return None
        device, argv = argv[1], argv[2:]
        if argv[:1] == ["--resident"]:
            if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) < 1:
                return None
            resident, argv = int(argv[1]), argv[2:]
    return (device, resident, argv) if len(argv) == 2 else None


def _cpu_environment() -> None:
    """Set before torch/triton load on CPU, then loads them: Triton's interpreter (triton reads
    the variable at import), and no precompiled torch header for Inductor's C++ kernels.
    Inductor builds that header (~150 MB, tens of seconds) in every new process before it loads
    any C++ kernel, even one found in its cache, and keeps it outside its cache dir; without it
    a kernel compiles with the full headers, the same code. A candidate whose kernels come from
    the host's JIT cache (`jit_warmup.py`) then loads them at once instead of rebuilding that
    header."""
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS", "0")
    # Loads torch and triton (0.2 s more than torch alone, once per runner; the workers it
    # forks inherit the patch): bfloat16 casts round as on a GPU (`interpreter_rounding.py`).
    try:
        from kernelarc.runner.interpreter_rounding import install

        install()
    except Exception:
        logger.warning("interpreter rounding not installed:\n%s", traceback.format_exc())


def _preload() -> None:
    """A spare's import of the evaluation modules (torch) before `go`; an error is left for
    `_run` to import again and report in the traces."""
    try:
        import kernelarc.runner.evaluate  # noqa: F401
    except Exception:
        logger.warning("preloading the evaluation modules failed:\n%s", traceback.format_exc())


def _may_compile(request: EvalRequest) -> bool:
    """A CPU candidate whose sources mention `compile` (torch.compile): the host's rule for
    candidates whose JIT caches it keeps (`sandboxes/jit_cache.may_jit`)."""
    return request.device == "cpu" and any(
        "compile" in source.content for source in request.solution.sources
    )


def _preload_compile() -> None:
    """torch.compile's modules (dynamo, inductor; ~2.5 s of CPU on an idle development machine,
    10-17 s under load: more than torch itself), imported before the worker zygote is forked,
    so a candidate that uses torch.compile does not import them on its workload's clock. On the
    CPU only for such a candidate (`_may_compile`): a spare does not know its candidate before
    `go`, and on the CPU a spare starts when the previous evaluation ends, so every other
    candidate would wait for this import too. On `cuda` every spare imports them
    (`_preload_compile_for_cuda`). They start no thread or process at import."""
    try:
        import torch._dynamo
        import torch._inductor.compile_fx  # noqa: F401
    except Exception:  # a candidate that needs them imports them itself, and fails there
        logger.warning("preloading torch.compile failed:\n%s", traceback.format_exc())


def _preload_compile_for_cuda() -> None:
    """A CUDA spare's import of torch.compile's modules before its zygote is forked, so every
    worker of the judge starts with them: on an H100 host a compile candidate's worker spent
    6.5-8 s importing them, in its screen, its timed run and each of the guard's re-timings
    (2026-12-06), while a spare on a GPU host starts beside the running candidate, off any
    candidate's path. The zygote must be forked before anything initialises CUDA: availability
    checks made during the import go through NVML (`PYTORCH_NVML_BASED_CUDA_CHECK`), which
    leaves the driver alone, and a CUDA state found initialised afterwards is logged (the GPU
    test `test_cuda_workers_start_with_torch_compile_loaded` runs a kernel in such a worker)."""
    before = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        _preload_compile()
    finally:  # candidates see the environment they were given
        if before is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = before
    try:
        import torch

        if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            logger.error("importing torch.compile's modules initialised CUDA before the fork")
    except Exception:
        logger.warning("cannot check CUDA after the preload:\n%s", traceback.format_exc())


def _wait_for_go() -> int | threading.Timer | None:
    """A spare: block until `go` (None, or the deadline's timer when the line carries one) or
    EOF (exit code 0: a discarded spare) or a bad line (exit code 2)."""
    try:
        go = wait_for_go()
    except (BadGoLine, OSError) as exc:
        logger.error("spare runner: %s", exc)
        return 2
    if go is None:
        return 0
    if go.deadline_s is not None:
        lead_own_group()
        return start_deadline(go.deadline_s)
    return None


def main(argv: list[str]) -> int:
    """Evaluate REQUEST.json, write RESULT.json; 0 when a result was written (or a spare was
    discarded with EOF), 2 on bad usage, a bad go line or an unreadable request."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="runner: %(message)s")
    parsed = _parse(argv)
    if parsed is None:
        logger.error("%s < [go line] KEY", _USAGE)
        return 2
    device, resident, paths = parsed
    problems = setup_problems()  # before any candidate code exists: the judge's own set-up
    for problem in problems:
        logger.error("sandbox set-up: %s", problem)
    deadline: threading.Timer | None = None
    head: HeadStart | None = None
    if device is not None:
        waited, head = _spare(device, problems)
        if isinstance(waited, int):
            return waited
        deadline = waited
    # Absolute paths: the result is written by path long after start.
    request_path, result_path = Path(paths[0]).resolve(), Path(paths[1]).resolve()
    try:
        request = EvalRequest.model_validate_json(request_path.read_text(encoding="utf-8"))
    except Exception:
        logger.error("cannot read the request:\n%s", traceback.format_exc())
        return 2
    refused = "; ".join(problems) or None
    if device is None and request.device == "cpu":
        _cpu_environment()
    if device is not None and request.device != device:
        refused = (
            f"runner started for device {device!r} got a request for {request.device!r}; "
            "nothing was evaluated (a sandbox bug)"
        )
    if refused is None and _may_compile(request):
        if head is not None:  # its zygote was forked before torch.compile's modules loaded
            head.close()
            head = None
        _preload_compile()
    if resident and refused is None and device is not None:
        from kernelarc.runner.resident import serve

        root = Path.cwd().resolve()
        return serve(request_path, result_path, root, device, resident, deadline, head)
    _run(request, Path.cwd().resolve(), result_path, refused, head)
    return 0


def _spare(
    device: str, problems: list[str]
) -> tuple[int | threading.Timer | None, "HeadStart | None"]:
    """A spare's life before `go`: the evaluation modules loaded, the head start forked, then
    `_wait_for_go`'s answer (an exit code ends the spare, its head start stopped)."""
    if device == "cpu":
        _cpu_environment()
    _preload()
    if device == "cuda" and not problems:
        _preload_compile_for_cuda()
    head = _head_start(device, problems)
    waited = _wait_for_go()
    if isinstance(waited, int) and head is not None:
        head.close()
        head = None
    return waited, head


def _head_start(device: str, problems: list[str]) -> "HeadStart | None":
    """The spare's zygote and first worker, forked before `go` (`head_start.py`); none when
    the runner's set-up failed (it evaluates nothing) or the evaluation modules did not load."""
    if problems:
        return None
    try:
        from kernelarc.runner.head_start import head_start
    except Exception:
        logger.warning("no head start:\n%s", traceback.format_exc())
        return None
    return head_start(device, Path.cwd().resolve())


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # os._exit: leftover threads or atexit hooks must not keep the process alive (that would
    # read as a timeout) or run after the result is written.
    os._exit(code)
