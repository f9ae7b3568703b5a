"""The judge's signed result file: written after every workload, and the crash traces of the
workloads a runner could not finish (used by `__main__` and `resident.py`)."""

import logging
from pathlib import Path
from typing import Any

from kernelarc.runner.outcome import UNKNOWN_ENVIRONMENT, Outcome, make_trace
from kernelarc.runner.result_key import signed_result
from kernelarc.runner.run_facts import RunFacts
from kernelarc.schema import EvalRequest, EvalStatus, Trace

logger = logging.getLogger("kernelarc.runner")


def write_result(
    path: Path,
    request: EvalRequest,
    traces: dict[int, Trace],
    facts: RunFacts,
    key: bytes,
    setup_error: str | None = None,
    *,
    complete: bool = False,
) -> None:
    """The signed result: traces in request order (null where none yet), the run's facts, the
    judge's own set-up failure if any, and whether this is the request's last write (written
    atomically: a reader never sees half a file)."""
    listed = [traces.get(i) for i in range(len(request.workloads))]
    payload: dict[str, Any] = {
        "traces": [t.model_dump(mode="json") if t is not None else None for t in listed],
        **facts.payload(),
    }
    if setup_error is not None:
        payload["setup_error"] = setup_error
    if complete:
        payload["complete"] = True
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(signed_result(payload, key), encoding="utf-8")
    tmp.replace(path)


def crash_traces(
    request: EvalRequest, traces: dict[int, Trace], skipped: list[int], log: str
) -> None:
    """RUNTIME_ERROR traces with `log` for every workload neither done nor skipped."""
    logger.error("%s", log)
    crash = Outcome(EvalStatus.RUNTIME_ERROR, log)
    for index, workload in enumerate(request.workloads):
        if index not in traces and index not in skipped:
            traces[index] = make_trace(request, workload, UNKNOWN_ENVIRONMENT, crash)
