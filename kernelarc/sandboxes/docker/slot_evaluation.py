"""The Docker sandbox's side of one evaluation in one slot: `runner_lifecycle.RunnerHost`.

Place in the flow: `DockerSandbox.evaluate` makes a `SlotEvaluation` under the slot's lock and
runs the request through `runner_lifecycle.run_evaluation` with it: the slot's spare (or the
resident judge of the request's problem, kept after its last request), runners exec'd as the
user that did not run last, the container replaced when the run leaves it untrustworthy
(`processes.py`), the user's compile cache trimmed, the next spare exec'd. It reaches into its
`DockerSandbox` only through `SlotOwner`.
"""

import logging
from collections.abc import Callable
from typing import Any, Protocol

from kernelarc.sandboxes.docker.accounts import trim_cache
from kernelarc.sandboxes.docker.containers import drop_container
from kernelarc.sandboxes.docker.engine import PROBLEM_MOUNT
from kernelarc.sandboxes.docker.exec_runner import ExecRunner
from kernelarc.sandboxes.docker.processes import replace_reason
from kernelarc.sandboxes.docker.slot import Slot
from kernelarc.sandboxes.request_limits import runner_request
from kernelarc.sandboxes.result_file import SignedResult
from kernelarc.sandboxes.runner_lifecycle import RunEnd
from kernelarc.schema import EvalRequest, Trace

logger = logging.getLogger(__name__)


class SlotOwner(Protocol):
    """What a `SlotEvaluation` uses of its `DockerSandbox`."""

    _client: Any
    python: str
    warm_spare: bool
    cache_limit_bytes: int | None

    def _other_user(self, user: str | None) -> str: ...

    def _spare_at_once(self, device: str) -> bool: ...

    def _start_spare(self, slot: Slot, device: str, user: str, *, beside: bool = False) -> None: ...

    def _start_runner(
        self, slot: Slot, device: str, user: str, *, keep_container: bool = False
    ) -> ExecRunner: ...


class SlotEvaluation:
    """DockerSandbox's side of one evaluation in one slot (`runner_lifecycle.RunnerHost`),
    under the slot's lock."""

    kill_note = "the container was replaced"

    def __init__(self, sandbox: SlotOwner, slot: Slot, problem: str) -> None:
        """For one request (of `problem`, its `problem_key`) in `slot`, whose container is
        up."""
        self._sandbox = sandbox
        self._slot = slot
        self._problem = problem
        self.kept = False
        """The runner was kept as the slot's resident judge for the next request."""
        self._cold_reason = ""

    def take_spare(self, device: str, timeout_s: float) -> ExecRunner | None:
        """The slot's spare if it is for `device`, still running and, a resident judge that
        served before, holds this problem (else it is dropped)."""
        del timeout_s  # a spare fits any: its deadline comes with `go`
        spare, self._slot.spare = self._slot.spare, None
        if spare is None:
            self._cold_reason = "no spare runner was held"
            return None
        if spare.fits != device:
            self._cold_reason = f"the spare runner was for {spare.fits}"
        elif spare.problem not in (None, self._problem):
            self._cold_reason = "the resident judge held another problem"
        elif not spare.alive():
            self._cold_reason = "the spare runner had ended"
        else:
            spare.problem = self._problem
            return spare
        spare.discard()
        return None

    def start_runner(self, device: str, timeout_s: float) -> ExecRunner:
        """A runner exec'd now, as the user that did not run last."""
        del timeout_s
        user = self._sandbox._other_user(self._slot.last_user)
        runner = self._sandbox._start_runner(self._slot, device, user)
        runner.problem = self._problem
        if self._cold_reason:  # why the evaluation starts cold (the tests read it)
            runner.notes.append(f"cold start: {self._cold_reason}")
        return runner

    def request_for(
        self, runner: ExecRunner, request: EvalRequest, timeout_s: float, notes: list[str]
    ) -> EvalRequest:
        """The request with its timeout, naming the problem dir where the container has it."""
        del runner, notes
        sent = runner_request(request, timeout_s)
        if sent.problem_dir is not None:
            sent = sent.model_copy(update={"problem_dir": PROBLEM_MOUNT})
        return sent

    def start_spare_beside(
        self, device: str, timeout_s: float, runner: ExecRunner
    ) -> Callable[[], None] | None:
        """Exec the next spare now, as the other user, where the rule and two users allow (not
        beside a resident judge: it comes back for the next request)."""
        del timeout_s
        sandbox = self._sandbox
        if runner.resident:
            return None
        if sandbox.warm_spare and sandbox._spare_at_once(device):
            sandbox._start_spare(self._slot, device, sandbox._other_user(runner.user), beside=True)
        return None

    def collect(self, runner: ExecRunner, signed: SignedResult, notes: list[str]) -> None:
        """Nothing: DockerSandbox keeps no host caches yet."""
        del runner, signed, notes

    def release(self, runner: ExecRunner) -> None:
        """Keep a resident judge whose request completed as the slot's spare (its eval dir
        emptied); else close its connection and remove its eval dir."""
        if runner.reusable and runner.clear_for_next():
            held, self._slot.spare = self._slot.spare, runner
            if held is not None:
                held.discard()
            self.kept = True
            return
        runner.discard()

    def replaced(
        self, run: RunEnd, signed: SignedResult, traces: list[Trace], notes: list[str]
    ) -> bool:
        """Drop the container when the run leaves it untrustworthy (`processes.py`)."""
        slot = self._slot
        api, python = self._sandbox._client.api, self._sandbox.python
        reason = replace_reason(api, python, slot, run, signed.problem, traces)
        if reason is None:
            return False
        notes.append(f"container {slot.container.short_id} replaced: {reason}")
        logger.info("sandbox slot %s: replacing its container (%s)", slot.key, reason)
        drop_container(slot)  # and the runner kept in it, if any
        self.kept = False
        return True

    def start_spare_after(
        self, device: str, timeout_s: float, runner: ExecRunner, replaced: bool
    ) -> None:
        """Trim the runner's user's cache; exec the next spare unless the container went or a
        spare is held (one exec'd beside)."""
        del timeout_s
        sandbox, slot = self._sandbox, self._slot
        trim_cache(slot.pool_dir, runner.user, sandbox.cache_limit_bytes)
        if not replaced and sandbox.warm_spare and slot.spare is None:
            sandbox._start_spare(slot, device, sandbox._other_user(runner.user))


def with_image(traces: list[Trace], image_id: str) -> list[Trace]:
    """Every trace's environment.libs gets `sandbox_image` (models are frozen: copies)."""
    out: list[Trace] = []
    for trace in traces:
        evaluation = trace.evaluation
        if evaluation is None:
            out.append(trace)
            continue
        env = evaluation.environment
        env = env.model_copy(update={"libs": {**env.libs, "sandbox_image": image_id}})
        evaluation = evaluation.model_copy(update={"environment": env})
        out.append(trace.model_copy(update={"evaluation": evaluation}))
    return out
