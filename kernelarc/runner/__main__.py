"""Entry point of the in-sandbox judge: `python -P -m kernelarc.runner REQUEST.json RESULT.json`.

This process is the judge; candidate code runs only in worker processes it forks (see
`evaluate.py`). Order matters here:
1. fd 1 is pointed at stderr before anything else, so nothing printed can look like runner
   output, and the process makes itself non-dumpable (`result_key`).
2. The request is read with `kernelarc.schema` only, and TRITON_INTERPRET is set on CPU before
   torch/triton load (triton reads it at import).
3. The evaluation modules (torch) load and the worker zygote is forked; only then is the result
   key read from stdin, so no worker ever has it in memory.
4. After each workload RESULT.json is rewritten atomically and signed with the key, so a crash or
   a kill later still leaves the traces done so far, and a file a worker writes is rejected.
Any exception escaping the evaluation becomes RUNTIME_ERROR traces for the unfinished workloads.
"""

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

# Step 1, before any heavy import.
os.dup2(2, 1)

from kernelarc.runner.outcome import UNKNOWN_ENVIRONMENT, Outcome, make_trace  # noqa: E402
from kernelarc.runner.result_key import read_result_key, set_dumpable, signed_result  # noqa: E402
from kernelarc.schema import EvalRequest, EvalStatus, Trace  # noqa: E402

set_dumpable(False)

logger = logging.getLogger("kernelarc.runner")


def _write_result(path: Path, traces: list[Trace], key: bytes) -> None:
    payload = {"traces": [t.model_dump(mode="json") for t in traces]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(signed_result(payload, key), encoding="utf-8")
    tmp.replace(path)


def _crash_traces(request: EvalRequest, traces: list[Trace], log: str) -> None:
    logger.error("%s", log)
    crash = Outcome(EvalStatus.RUNTIME_ERROR, log)
    for workload in request.workloads[len(traces) :]:
        traces.append(make_trace(request, workload, UNKNOWN_ENVIRONMENT, crash))


def _run(request: EvalRequest, root: Path, result_path: Path) -> None:
    traces: list[Trace] = []
    zygote: Any = None
    crash_log = "runner ended before every workload had a trace"
    try:
        from kernelarc.runner.evaluate import evaluate_request, start_zygote  # torch loads here

        zygote = start_zygote(request, root)
    except Exception:
        crash_log = "runner failed to start:\n" + traceback.format_exc()
    key = read_result_key()  # step 3: after the fork
    try:
        if zygote is not None:
            for trace in evaluate_request(request, root, zygote):
                traces.append(trace)
                _write_result(result_path, traces, key)
    except Exception:
        crash_log = "runner crashed:\n" + traceback.format_exc()
    finally:
        if zygote is not None:
            zygote.close()
    if len(traces) < len(request.workloads):
        _crash_traces(request, traces, crash_log)
    _write_result(result_path, traces, key)


def main(argv: list[str]) -> int:
    """Evaluate REQUEST.json, write RESULT.json; 0 when a result was written, 2 on bad usage."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="runner: %(message)s")
    if len(argv) != 2:
        logger.error("usage: python -P -m kernelarc.runner REQUEST.json RESULT.json < KEY")
        return 2
    # Absolute paths: the result is written by path long after start.
    request_path, result_path = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    try:
        request = EvalRequest.model_validate_json(request_path.read_text(encoding="utf-8"))
    except Exception:
        logger.error("cannot read the request:\n%s", traceback.format_exc())
        return 2
    if request.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    _run(request, Path.cwd().resolve(), result_path)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # os._exit: leftover threads or atexit hooks must not keep the process alive (that would
    # read as a timeout) or run after the result is written.
    os._exit(code)
