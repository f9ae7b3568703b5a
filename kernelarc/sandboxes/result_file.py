"""Turn whatever the runner left behind into exactly one valid Trace per requested workload.

The result file must carry the judge's signature: `{"payload": "<JSON text>", "hmac": "<hex>"}`
with the HMAC-SHA256 of the payload under the per-evaluation key the host gave the judge on
stdin (see `kernelarc.runner.result_key`); a file written by candidate code does not verify and
counts as no result. The runner's traces are trusted only for their evaluation: definition,
workload and solution are re-taken from the request (so a trace cannot claim a looser
tolerance). Workloads without a usable trace get a synthesized TIMEOUT or RUNTIME_ERROR trace
carrying the reason, except those the judge lists as `skipped` (a correctness screen stopped at
an earlier failure): they get a trace without evaluation, the format's "not evaluated". The
payload's other keys (`stage_s`, `build`, `skipped`, `jit_cache`) become `RunReport`
(`read_signed_result`); `setup_error` is the judge's own set-up failure (`setup_failure`).
"""

import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kernelarc.sandboxes.jail import SETUP_FAILED
from kernelarc.schema import (
    Environment,
    EvalRequest,
    EvalStatus,
    Evaluation,
    Trace,
    utc_now,
)
from kernelarc.schema.build import BuildInfo, JitSnapshot

logger = logging.getLogger(__name__)

LOG_CAP_BYTES = 64 * 1024


def cap_tail(text: str, limit: int = LOG_CAP_BYTES) -> str:
    """The last `limit` bytes of a text."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return "[... cut ...]\n" + data[-limit:].decode("utf-8", errors="ignore")


def new_result_key() -> bytes:
    """A fresh key for one evaluation (give it to the runner as a hex line on stdin)."""
    return secrets.token_bytes(32)


def sign_payload(text: str, key: bytes) -> str:
    """The hex HMAC-SHA256 of a payload text (what the judge writes next to it)."""
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


class RunReport(BaseModel):
    """What a signed result says besides the traces (`kernelarc.runner.run_facts`)."""

    stage_s: dict[str, float] = Field(default_factory=dict)
    build: BuildInfo | None = None
    skipped: list[int] = Field(default_factory=list)
    jit_cache: JitSnapshot | None = None
    cache: dict[str, int] = Field(default_factory=dict)
    """A resident judge's cache hits and misses (`kernelarc.runner.resident_cache`)."""
    resident: dict[str, float] = Field(default_factory=dict)
    """A resident judge's request number and age; empty for a one-off runner."""


@dataclass(frozen=True)
class SignedResult:
    """What a result file holds once its signature verified (or why nothing is usable)."""

    traces: list[Any] = field(default_factory=list)
    """The raw `traces` list ([] when unusable)."""
    problem: str | None = None
    """Why the file is unusable (missing, forged, malformed), or None."""
    setup_error: str | None = None
    """The judge's own report that it could not set itself up before any candidate code ran
    (`kernelarc.runner`: its identity or environment is broken): an infrastructure failure."""
    report: RunReport = field(default_factory=RunReport)
    """Stage times, build facts, skipped workloads, JIT caches (empty when unusable)."""


def read_signed_result(path: Path, key: bytes) -> SignedResult:
    """The signed result file's contents, or why it is unusable."""
    data, why = _read_payload(path, key)
    if data is None:
        return SignedResult(problem=why)
    setup = data.get("setup_error")
    rest = {k: v for k, v in data.items() if k not in ("traces", "setup_error")}
    try:
        report = RunReport.model_validate(rest)
    except ValidationError as exc:  # signed by the judge: a bug, not an attack
        logger.warning("the runner's report does not validate: %s", exc)
        report = RunReport()
    return SignedResult(data["traces"], None, setup if isinstance(setup, str) else None, report)


def result_complete(path: Path, key: bytes) -> tuple[bool, bool]:
    """(whether the result file verifies under `key` and is the judge's last write of the
    request, whether the resident judge said it retires after it)."""
    data, _ = _read_payload(path, key)
    if data is None or data.get("complete") is not True:
        return False, False
    resident = data.get("resident")
    return True, isinstance(resident, dict) and bool(resident.get("retiring"))


def read_raw_traces(path: Path, key: bytes) -> tuple[list[Any], str | None]:
    """The `traces` list of a signed result file, or ([], why) when missing, forged or bad."""
    result = read_signed_result(path, key)
    return result.traces, result.problem


def _read_payload(path: Path, key: bytes) -> tuple[dict[str, Any] | None, str | None]:
    try:
        envelope = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "the runner wrote no result file"
    except (OSError, ValueError) as exc:
        return None, f"the result file is unreadable: {exc}"
    if not isinstance(envelope, dict):
        return None, "the result file is not a signed result"
    text, digest = envelope.get("payload"), envelope.get("hmac")
    if not isinstance(text, str) or not isinstance(digest, str):
        return None, "the result file is not a signed result"
    if not hmac.compare_digest(sign_payload(text, key), digest):
        return None, "the result file's signature does not verify (not written by the judge)"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"the result file is unreadable: {exc}"
    if not isinstance(data, dict) or not isinstance(data.get("traces"), list):
        return None, "the result file has no `traces` list"
    return data, None


#: Exit codes only the sandbox's own machinery gives a runner that wrote no result: the
#: judge's bad usage, go line or request (2), a command that cannot run (126) or is missing
#: (127); and, jailed, the jail's set-up failure (`jail.SETUP_FAILED`).
_MACHINERY_EXITS = frozenset({2, 126, 127})


def setup_failure(result: SignedResult, exit_code: int | None, *, jailed: bool) -> str | None:
    """Why the runner failed before any candidate code ran (an infrastructure failure, never
    the candidate's), or None when it got that far (whatever happened next is the
    candidate's: a crash, a kill, a timeout).

    The judge reports its own set-up failures in the signed result (`setup_error`). Without a
    signed result, only exit codes that candidate code cannot cause count: candidate code runs
    in worker processes, and a worker can end the judge only by a signal (128 + n) or by
    making it raise (1).
    """
    if result.setup_error is not None:
        return result.setup_error
    if result.problem is None or exit_code is None:
        return None
    if exit_code in _MACHINERY_EXITS or (jailed and exit_code == SETUP_FAILED):
        return f"runner exited with code {exit_code} and no result ({result.problem})"
    return None


def _evaluation_of(raw: Any, uuid: str) -> Evaluation | None:
    if raw is None:  # not done (yet): the runner lists every workload in request order
        return None
    try:
        trace = Trace.model_validate(raw)
    except ValidationError as exc:
        logger.warning("runner trace for %s does not validate: %s", uuid, exc)
        return None
    if trace.workload.uuid != uuid or trace.evaluation is None:
        return None
    return trace.evaluation


def assemble_traces(
    request: EvalRequest,
    raw_traces: list[Any],
    *,
    missing_status: EvalStatus,
    missing_log: str,
    notes: list[str],
    skipped: list[int] | None = None,
) -> list[Trace]:
    """One trace per requested workload, in order; notes are appended to every log. Workloads
    in `skipped` (and without a trace) get a trace without evaluation."""
    evaluations = [
        _evaluation_of(raw_traces[i], w.uuid) if i < len(raw_traces) else None
        for i, w in enumerate(request.workloads)
    ]
    known = next((e.environment for e in evaluations if e is not None), None)
    environment = known or Environment(hardware="unknown")
    note_text = "".join(f"\n[sandbox] {n}" for n in notes)
    traces: list[Trace] = []
    not_evaluated = set(skipped or ())
    for index, workload in enumerate(request.workloads):
        evaluation = evaluations[index]
        if evaluation is None and index in not_evaluated:
            pass  # left unevaluated on purpose: the format's trace without evaluation
        elif evaluation is None:
            evaluation = Evaluation(
                status=missing_status,
                environment=environment,
                timestamp=utc_now(),
                log=cap_tail(missing_log) + note_text,
            )
        elif note_text:
            data = evaluation.model_dump()
            data["log"] = evaluation.log + note_text
            evaluation = Evaluation.model_validate(data)
        traces.append(
            Trace(
                definition=request.definition.name,
                workload=workload,
                solution=request.solution.name,
                evaluation=evaluation,
            )
        )
    return traces


def traces_after_run(
    request: EvalRequest,
    raw_traces: list[Any],
    problem: str | None,
    *,
    timed_out: bool,
    exit_code: int | None,
    timeout_s: float,
    kill_note: str,
    log_tail: str,
    notes: list[str],
    skipped: list[int] | None = None,
) -> list[Trace]:
    """Traces for a finished runner: its signed results, and a TIMEOUT or RUNTIME_ERROR trace
    (saying why, with the runner's log tail) for every workload it did not finish.

    `kill_note` says what the sandbox did on a timeout (e.g. "the process group was killed").
    """
    if timed_out:
        status = EvalStatus.TIMEOUT
        why = f"timed out after {timeout_s:g} s wall clock; {kill_note}"
    else:
        status = EvalStatus.RUNTIME_ERROR
        why = f"runner exited with code {exit_code} before this workload finished"
        if problem:
            why += f" ({problem})"
    return assemble_traces(
        request,
        raw_traces,
        missing_status=status,
        missing_log=f"{why}\n--- runner log tail ---\n{log_tail}",
        notes=notes,
        skipped=skipped,
    )
