"""Entry point of the in-sandbox runner: `python -P -m kernelarc.runner REQUEST.json RESULT.json`.

Order matters here:
1. fd 1 is pointed at stderr before anything else, so nothing a candidate prints can look like
   runner output; results travel only through RESULT.json. No copy of the real stdout is kept:
   a saved handle would only give candidate code a channel to forge results on.
2. The request is read with `kernelarc.schema` only, and TRITON_INTERPRET is set on CPU before
   torch/triton load (triton reads it at import).
3. The evaluation modules (torch) load; after each workload RESULT.json is rewritten atomically,
   so a crash or a kill later still leaves the traces done so far for the host.
Any exception escaping the evaluation becomes RUNTIME_ERROR traces for the unfinished workloads.
"""

import json
import logging
import os
import sys
import traceback
from pathlib import Path

# Step 1, before any heavy import.
os.dup2(2, 1)

from kernelarc.runner.outcome import UNKNOWN_ENVIRONMENT, Outcome, make_trace  # noqa: E402
from kernelarc.schema import EvalRequest, EvalStatus, Trace  # noqa: E402

logger = logging.getLogger("kernelarc.runner")


def _write_result(path: Path, traces: list[Trace]) -> None:
    payload = {"traces": [t.model_dump(mode="json") for t in traces]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    tmp.replace(path)


def _run(request: EvalRequest, root: Path, result_path: Path) -> None:
    traces: list[Trace] = []
    try:
        from kernelarc.runner.evaluate import evaluate_request  # torch loads here, after step 2

        for trace in evaluate_request(request, root):
            traces.append(trace)
            _write_result(result_path, traces)
    except Exception:
        log = "runner crashed:\n" + traceback.format_exc()
        logger.error("%s", log)
        crash = Outcome(EvalStatus.RUNTIME_ERROR, log)
        for workload in request.workloads[len(traces) :]:
            traces.append(make_trace(request, workload, UNKNOWN_ENVIRONMENT, crash))
    _write_result(result_path, traces)


def main(argv: list[str]) -> int:
    """Evaluate REQUEST.json, write RESULT.json; 0 when a result was written, 2 on bad usage."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="runner: %(message)s")
    if len(argv) != 2:
        logger.error("usage: python -P -m kernelarc.runner REQUEST.json RESULT.json")
        return 2
    # Absolute paths: candidate code may chdir.
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
    # os._exit: leftover non-daemon threads or atexit hooks of candidate code must not keep the
    # process alive (that would read as a timeout) or run after the result is written.
    os._exit(code)
