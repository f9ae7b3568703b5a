"""The runner lifecycle both sandboxes share: a spare runner ahead, one run, its result read back.

Place in the flow: `LocalSandbox.evaluate` (`local/`) and `DockerSandbox.evaluate` (`docker/`,
under the device slot's lock) each pass `run_evaluation` their side of one evaluation, a
`RunnerHost`, and build the `EvalResult` from what it returns. The steps are the same for both:

1. the spare runner when it fits (`WARM_SPARE_NOTE` in the notes), else one started now (cold);
2. the request as the runner gets it (the host's limits, caches and mounts);
3. the next spare started beside the candidate, where the spare rule (`spare_start`) and the
   host's isolation allow it;
4. a fresh result key, `go`, the run against the wall-clock timeout, the signed result read
   back (`result_file.py`); the runner is discarded whatever happened, and the spare started
   beside it waited for;
5. one trace per workload (`traces_after_run`), the host's check whether what the runner ran in
   can be trusted by the next one (Docker replaces its container), the wall time;
6. the next spare (after the end: the `cpu` rule, or none started beside), then a runner that
   could not set itself up is a SandboxError, never the candidate's failure.

What differs lives with each sandbox: how a runner is started (a subprocess forked from the
spawn thread, a `docker exec`), whether it is still alive, how it is killed and discarded (the
`Runner` protocol), and where spares are kept and which users they run as (`RunnerHost`).

Warm spares (`sandbox.warm_spare`, default on). Most of a trivial candidate's sandbox cost was
the fresh runner importing torch (~3 s on the development CPU). A spare is the next runner
(`python -P -m kernelarc.runner --device D ...`) started ahead in its own fresh dir and process
group: it imports torch and blocks on stdin until an evaluation that fits (its device, and for a
local runner the timeout its RLIMIT_CPU was set from) sends `go` and the key; the wall-clock
timeout starts there. Anything else, or a dead spare, gets a cold runner by the same path.
Each candidate gets its own key and its own worker processes. A runner is by default a resident
judge (`sandbox.resident_requests`, `kernelarc/runner/resident.py`): after a request it lives
on, holding the problem's inputs, reference outputs and reference latency, and is handed back to
the slot as the spare for the next request of the same problem (its dir emptied, everything the
last candidate started killed); without it each candidate gets its own runner process, dir and
zygote.
`Sandbox.prepare` starts the first spare before any evaluation; the campaign calls
`Executor.prepare` as soon as it has its executor, with the device, `eval.timeout_s` and problem
dir every evaluation of it uses (screens, timed runs, guard runs), so each slot's first
candidate is warm too.

When the next spare starts (`spare_start`, default `auto`): on cuda as soon as an evaluation has
its runner, so back-to-back candidates find it ready (one core importing torch does not disturb
GPU timing); on cpu only once the evaluation ended and everything it left is dead, so the import
never competes with CPU timing. A spare beside a running candidate must be out of its reach (on
CUDA there is no PID namespace, and Docker's share a container), so runners alternate between
two uid:gid identities (`user`, `spare_user`), both without capabilities: a process of one can
neither signal nor ptrace the other's, nor enter its 0700 dir. Where two identities cannot be
kept apart (no jail, one user, a non-root Docker host) the spare waits for the end. What the
identities cannot split is process limits: RLIMIT_NPROC counts per uid locally, but Docker's
pids limit is the container's, so a candidate that hit it while a spare started beside it has
its container replaced. What they do not share: anything writable (each identity has its own
compile cache dir, `runner_cache.py`). Several sandboxes of one host use the same two default
identities; give each its own pair to keep them apart too. Numbers: docs/benchmarks.md,
"Sandbox overhead per candidate".
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.result_file import (
    SignedResult,
    new_result_key,
    read_signed_result,
    setup_failure,
    traces_after_run,
)
from kernelarc.sandboxes.spare_slot import Spare
from kernelarc.schema import EvalRequest, Trace

#: When the next spare starts: `auto` = at once on cuda, after the evaluation on cpu; `after` =
#: always after; `concurrent` = always at once (what tests and benchmarks use on a CPU host).
SpareStart = Literal["auto", "after", "concurrent"]
#: EvalResult.sandbox_notes of an evaluation that used the spare (tests and logs look for it).
WARM_SPARE_NOTE = "warm spare runner"


def check_spare_start(spare_start: str) -> None:
    """Refuse a `spare_start` that is not one of `SpareStart`'s (a sandbox's option).

    Raises:
        ValueError: it is not.
    """
    if spare_start not in ("auto", "after", "concurrent"):
        msg = f"spare_start must be auto, after or concurrent (got {spare_start!r})"
        raise ValueError(msg)


def spare_rule_allows_beside(spare_start: SpareStart, device: str) -> bool:
    """Whether the rule lets the next spare start beside a running candidate on `device` (the
    host must still keep the two apart: two users)."""
    return not (spare_start == "after" or (spare_start == "auto" and device != "cuda"))


@dataclass(frozen=True)
class RunEnd:
    """How a runner ended: exit code (None if it never ended), whether it overran, log tail."""

    returncode: int | None
    timed_out: bool
    log_tail: str


class Runner(Spare, Protocol):
    """A started runner: waiting for `go` (a spare: `fits`, `alive`, `discard`), or running."""

    @property
    def started(self) -> float:
        """When it was started (time.monotonic)."""
        ...

    @property
    def jailed(self) -> bool:
        """Whether it runs in the local jail (an exit code of its set-up means a failure)."""
        ...

    @property
    def notes(self) -> list[str]:
        """For EvalResult.sandbox_notes (what its start-up could not isolate)."""
        ...

    @property
    def trace_notes(self) -> list[str]:
        """The subset every trace's log must carry."""
        ...

    @property
    def result_path(self) -> Path:
        """Where the host reads its signed result file."""
        ...

    def go(self, request_json: str, key: bytes, timeout_s: float) -> None:
        """Write its request, then give it the go line and the result key.

        Raises:
            SandboxError: the request cannot be written.
        """
        ...

    def finish(self, timeout_s: float) -> RunEnd:
        """Wait for it against the wall-clock timeout (killing what is left); how it ended."""
        ...


R = TypeVar("R", bound=Runner)


class RunnerHost(Protocol[R]):
    """A sandbox's side of one evaluation (of one slot): its spares, its runners, its checks."""

    @property
    def kill_note(self) -> str:
        """What the sandbox did on a timeout, for the TIMEOUT traces' logs."""
        ...

    def take_spare(self, device: str, timeout_s: float) -> R | None:
        """The spare when it fits and is alive (then the caller's), else None."""
        ...

    def start_runner(self, device: str, timeout_s: float) -> R:
        """A runner started now, for this evaluation (a cold start).

        Raises:
            SandboxError: it cannot be started.
        """
        ...

    def request_for(
        self, runner: R, request: EvalRequest, timeout_s: float, notes: list[str]
    ) -> EvalRequest:
        """`request` as `runner` gets it (limits, staged caches, mount points); notes added."""
        ...

    def start_spare_beside(
        self, device: str, timeout_s: float, runner: R
    ) -> Callable[[], None] | None:
        """Start the next spare now, beside `runner`'s candidate, when the spare rule and the
        isolation allow it; what to call once `runner` is discarded (None: nothing)."""
        ...

    def collect(self, runner: R, signed: SignedResult, notes: list[str]) -> None:
        """After the run, before the discard: keep what its judge built (notes added)."""
        ...

    def release(self, runner: R) -> None:
        """Discard `runner`, whatever happened, and free what it held."""
        ...

    def replaced(
        self, run: RunEnd, signed: SignedResult, traces: list[Trace], notes: list[str]
    ) -> bool:
        """Whether what the runner ran in could not be trusted by the next candidate and was
        replaced (notes say why); the next spare then starts with the replacement."""
        ...

    def start_spare_after(self, device: str, timeout_s: float, runner: R, replaced: bool) -> None:
        """Once the evaluation is timed: tidy up after `runner` and start the next spare (none
        when one is held already)."""
        ...


@dataclass(frozen=True)
class Finished(Generic[R]):
    """One evaluation's run, for the sandbox's EvalResult."""

    runner: R
    run: RunEnd
    signed: SignedResult
    traces: list[Trace]
    wall_s: float


def take_runner(
    host: RunnerHost[R], device: str, timeout_s: float, started: float, notes: list[str]
) -> R:
    """The spare when it fits, else a runner started now; its notes (and the spare's) added."""
    runner = host.take_spare(device, timeout_s)
    if runner is None:
        runner = host.start_runner(device, timeout_s)
        notes += runner.notes
        return runner
    ahead = max(0.0, started - runner.started)  # < 0: a prepare still starting it
    notes += [*runner.notes, f"{WARM_SPARE_NOTE} (started {ahead:.1f} s before the request)"]
    return runner


def run_evaluation(
    host: RunnerHost[R],
    request: EvalRequest,
    *,
    timeout_s: float,
    started: float,
    notes: list[str],
) -> Finished[R]:
    """Run `request` in a runner of `host` (module docstring: the steps); `notes` are the
    evaluation's sandbox notes, extended here.

    Raises:
        SandboxError: no runner could be started, its request could not be written, or it
            could not set itself up.
    """
    runner = take_runner(host, request.device, timeout_s, started, notes)
    wait_for_spare: Callable[[], None] | None = None
    try:
        sent = host.request_for(runner, request, timeout_s, notes)
        wait_for_spare = host.start_spare_beside(request.device, timeout_s, runner)
        key = new_result_key()
        runner.go(sent.model_dump_json(), key, timeout_s)
        run = runner.finish(timeout_s)
        signed = read_signed_result(runner.result_path, key)
        host.collect(runner, signed, notes)
    finally:
        host.release(runner)
        if wait_for_spare is not None:
            wait_for_spare()
    traces = traces_after_run(
        request,
        signed.traces,
        signed.problem,
        timed_out=run.timed_out,
        exit_code=run.returncode,
        timeout_s=timeout_s,
        kill_note=host.kill_note,
        log_tail=run.log_tail,
        notes=runner.trace_notes,
        skipped=signed.report.skipped,
    )
    replaced = host.replaced(run, signed, traces, notes)
    wall_s = time.monotonic() - started
    host.start_spare_after(request.device, timeout_s, runner, replaced)
    setup = setup_failure(signed, run.returncode, jailed=runner.jailed)
    if setup is not None:
        msg = f"the sandbox runner could not set itself up: {setup}\n{run.log_tail[-2000:]}"
        raise SandboxError(msg)
    return Finished(runner, run, signed, traces, wall_s)
