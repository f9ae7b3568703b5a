"""A resident judge: one runner process that judges request after request of one problem.

`python -P -m kernelarc.runner --device D --resident MAX REQUEST.json RESULT.json` starts as a
spare does (`__main__`); after its first `go` it serves requests until EOF on stdin, MAX
requests, or a reason to retire. Per request the host removes the last result, writes a fresh
REQUEST.json and sends `go` (with Docker's deadline: the judge kills its group then, and
cancels the timer before the request's result is complete) and a fresh result key on stdin
(`kernelarc/sandboxes/local/runner_process.py`, `kernelarc/sandboxes/docker/exec_runner.py`);
the judge writes RESULT.json as a one-off runner does, signed with that request's key, and marks
its last write `complete`, which is how the host knows the request is done while the process
lives on. An old result cannot pass for a new one: each request has its own key.

Its zygote and first worker may come from the spare's head start (`head_start.py`, forked before
`go`). What it keeps (`resident_cache.py`): the loaded reference, every round's inputs
(pristine, per stream position), the reference's outputs on them, and the reference's latency
(measured again on a schedule, reported as the median of its recent measurements with their
spread). What it never keeps: anything of a candidate. Candidates still run only in workers
forked from the zygote, which was forked before the judge loaded the reference or read any key;
between two requests the judge kills the last candidate's workers and, through the zygote (their
child subreaper), every process they left (`Zygote.sweep`), and empties the jail's private
/dev/shm. The next candidate's worker is forked at the start of a request, before this request's
candidate code runs, so its CUDA context is made while the current candidate is judged, not on
the next one's path; until its `setup` it is not dumpable (the current candidate cannot trace or
read it), and its scheduling, the judge's and the zygote's are checked against their readings
from before any candidate (`sched_state.py`): a change found once the candidate's processes are
gone turns the request's passes into REWARD_HACK and retires the judge. The host empties the
runner's dir between requests (but the judge's `ref/` and logs).

It retires (exits after writing the complete result) when the sweep cannot clear what a
candidate left, when its zygote is gone, when it has used half its CPU-time limit, after MAX
requests, when a request is for another problem or device, or when a candidate changed the
scheduling of its processes; the host then starts a fresh one.
"""

import contextlib
import logging
import os
import resource
import shutil
import threading
import time
import traceback
from pathlib import Path

from kernelarc.problem_key import problem_key
from kernelarc.runner.evaluate import evaluate_request, prestart_worker, start_zygote
from kernelarc.runner.go_line import BadGoLine, start_deadline, wait_for_go
from kernelarc.runner.head_start import HeadStart
from kernelarc.runner.memory_limit import INFRASTRUCTURE_LIMIT, apply_address_space
from kernelarc.runner.outcome import as_reward_hack
from kernelarc.runner.resident_cache import (
    ProblemCache,
    release_device_memory,
)
from kernelarc.runner.result_key import read_result_key
from kernelarc.runner.result_writer import crash_traces, write_result
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.sched_state import SchedWatch
from kernelarc.runner.worker_client import WorkerClient
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest, EvalStatus, Trace

logger = logging.getLogger("kernelarc.runner")

#: The role of the worker forked ahead for the next candidate in the judge's SchedWatch.
AHEAD = "worker forked ahead"
#: The share of RLIMIT_CPU after which a resident judge retires (the next runner starts fresh).
CPU_SHARE_TO_RETIRE = 0.5
#: Set by the local jail when /dev/shm is its private tmpfs (`sandboxes/jail.py`,
#: PRIVATE_SHM_VARIABLE): then the judge empties it between candidates.
PRIVATE_SHM_VARIABLE = "KERNELARC_PRIVATE_SHM"
SHM = Path("/dev/shm")


def _judge_shm_files() -> set[str]:
    """Names in /dev/shm this process has mapped or open: the judge's own (torch's CUDA IPC
    reference counters live there while shared inputs are mapped anywhere)."""
    names: set[str] = set()
    prefix = f"{SHM}/"
    try:
        for line in Path("/proc/self/maps").read_text(errors="replace").splitlines():
            path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
            if path.startswith(prefix):
                names.add(path[len(prefix) :].split("/")[0].removesuffix(" (deleted)"))
        for fd in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith(prefix):
                    names.add(target[len(prefix) :].split("/")[0])
    except OSError:
        return names
    return names


def clear_private_shm() -> int:
    """Remove what a candidate left in /dev/shm when it is the jail's private tmpfs: every
    entry but the judge's own (`_judge_shm_files`); how many entries were removed."""
    if os.environ.get(PRIVATE_SHM_VARIABLE) != "1":
        return 0
    removed = 0
    try:
        entries = list(SHM.iterdir())
    except OSError:
        return 0
    own = _judge_shm_files()
    for entry in entries:
        if entry.name in own:
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed += 1
        except OSError as exc:
            logger.warning("cannot remove %s a candidate left: %s", entry, exc)
    return removed


def cpu_time_spent() -> tuple[float, float | None]:
    """This process's CPU seconds so far, and its soft RLIMIT_CPU (None: unlimited)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    limit = None if soft == resource.RLIM_INFINITY else float(soft)
    return usage.ru_utime + usage.ru_stime, limit


class ResidentJudge:
    """The loop's state: zygote, cache, pre-started worker, requests served."""

    def __init__(self, root: Path, device: str, max_requests: int) -> None:
        """A judge in `root` for `device` that serves at most `max_requests`."""
        self.root = root
        self.device = device
        self.max_requests = max_requests
        self.served = 0
        self.started = time.monotonic()
        self.zygote: Zygote | None = None
        self.cache: ProblemCache | None = None
        self.prestarted: WorkerClient | None = None
        """The next candidate's worker, forked while the current one is judged (its CUDA
        context is made off the next candidate's path)."""
        self.sched: SchedWatch | None = None
        """The judge, the zygote and the worker forked ahead, with their scheduling before any
        candidate could touch them (`sched_state.py`)."""
        self.retire_reason: str | None = None
        self.deadline: threading.Timer | None = None
        """The current request's deadline from its go line (Docker's), cancelled before its
        result is complete: a judge between requests is never killed for a finished one."""

    def judge(self, request: EvalRequest, result_path: Path, key: bytes) -> None:
        """Evaluate one request and write its complete result (signed with `key`)."""
        traces: dict[int, Trace] = {}
        facts = RunFacts()
        self.served += 1
        facts.resident = {
            "request": self.served,
            "age_s": round(time.monotonic() - self.started, 3),
        }
        crash_log = "runner ended before every workload had a trace"
        identity = problem_key(request)
        if self.cache is None:
            self.cache = ProblemCache(identity, self.device)
        elif self.cache.identity != identity or request.device != self.device:
            # Another problem: the worker zygote inherited this one's limits. Judge it without
            # the cache, then retire.
            self.retire_reason = "a request for another problem or device"
        cache = self.cache if self.retire_reason is None else None
        try:
            assert self.zygote is not None, "serve() starts the zygote before any key is read"
            prestarted, self.prestarted = self.prestarted, None
            if self.sched is not None:
                self.sched.forget(AHEAD)  # this candidate's own now
            self._fork_ahead()
            evaluation = evaluate_request(
                request,
                self.root,
                self.zygote,
                facts,
                cache=cache,
                prestarted=prestarted,
                sched=self.sched,
            )
            for index, trace in evaluation:
                traces[index] = trace
                write_result(result_path, request, traces, facts, key)
        except Exception:
            crash_log = "runner crashed:\n" + traceback.format_exc()
            self.retire_reason = self.retire_reason or "the judge raised"
        if len(traces) + len(facts.skipped) < len(request.workloads):
            crash_traces(request, traces, facts.skipped, crash_log)
        self._sweep()  # before the result is complete: then nothing of the candidate is alive
        changed = self.sched.changes() if self.sched is not None else None
        if changed is not None:
            # Nothing of the candidate is alive now, so it (or what it left) did this; the nice
            # value and policy cannot be set back without privileges: the judge retires.
            logger.warning("%s", changed)
            self.retire_reason = "a candidate changed the scheduling of the judge's processes"
            traces = {i: as_reward_hack(t, changed) for i, t in traces.items()}
        release_device_memory(self.device)
        self._decide_retirement()
        infrastructure = self._own_memory_failure(traces)
        if self.retire_reason is not None:
            facts.resident["retiring"] = 1.0  # the host must not send it another request
        if self.deadline is not None:
            self.deadline.cancel()
        write_result(result_path, request, traces, facts, key, infrastructure, complete=True)

    def _own_memory_failure(self, traces: dict[int, Trace]) -> str | None:
        """After its first request, a judge that ran out of memory for its own work (an
        INVALID_REFERENCE naming the infrastructure limit) may owe it to what it kept: it
        retires, and the result says so as a set-up failure, which the host reports as an
        infrastructure error (a fresh runner judges the candidate again), never as the
        candidate's. A first request's limit is the problem's size: its traces stand."""
        if self.served < 2:
            return None
        for trace in traces.values():
            evaluation = trace.evaluation
            if (
                evaluation is not None
                and evaluation.status == EvalStatus.INVALID_REFERENCE
                and evaluation.log.startswith(INFRASTRUCTURE_LIMIT)
            ):
                self.retire_reason = "it ran out of memory for its own work"
                if self.cache is not None:
                    self.cache.drop(self.retire_reason)
                return (
                    f"the resident judge (request {self.served}) ran out of memory for its own "
                    f"work; a fresh runner must judge this candidate: {evaluation.log[:500]}"
                )
        return None

    def _sweep(self) -> None:
        """Kill every process the last candidate left (the zygote is their subreaper)."""
        if self.zygote is None:
            return
        try:
            killed = self.zygote.sweep()
        except OSError as exc:
            killed = -1
            logger.warning("the worker zygote is gone: %s", exc)
        if killed < 0:
            self.retire_reason = "processes a candidate left could not be cleared"
        elif killed:
            logger.warning("killed %d processes the last candidate left behind", killed)
        if killed >= 0 and (removed := clear_private_shm()):
            logger.warning("removed %d entries the last candidate left in /dev/shm", removed)

    def _decide_retirement(self) -> None:
        """Retire after `max_requests` or at `CPU_SHARE_TO_RETIRE` of the CPU-time limit."""
        if self.retire_reason is None and self.served >= self.max_requests:
            self.retire_reason = f"served {self.served} requests (its maximum)"
        if self.retire_reason is None:
            spent, limit = cpu_time_spent()
            if limit is not None and spent > CPU_SHARE_TO_RETIRE * limit:
                self.retire_reason = f"used {spent:.0f} s of its {limit:.0f} s CPU-time limit"

    def _fork_ahead(self) -> None:
        """Fork the next candidate's worker now, while the current candidate's worker (still
        without its candidate) is the only other one: unless this request is the last, and
        with its scheduling read before any candidate code runs."""
        if self.retire_reason is not None or self.zygote is None:
            return
        if self.served >= self.max_requests or self.prestarted is not None:
            return
        self.prestarted = prestart_worker(self.zygote)
        if self.prestarted is not None and self.sched is not None:
            self.sched.add(AHEAD, self.prestarted.pid)

    def between_requests(self) -> None:
        """Fork the next worker unless one was forked ahead (or the judge retires)."""
        self._fork_ahead()

    def close(self) -> None:
        """Stop the pre-started worker and the zygote (which kills what is left of its own)."""
        if self.prestarted is not None:
            self.prestarted.stop()
        if self.zygote is not None:
            self.zygote.close()


def serve(
    request_path: Path,
    result_path: Path,
    root: Path,
    device: str,
    max_requests: int,
    deadline: threading.Timer | None = None,
    head: HeadStart | None = None,
) -> int:
    """Judge the request already announced by `go` (`deadline`: the timer its go line
    started; `head`: the zygote and worker the spare forked before it), then every later one
    (module docstring); 0 once it stops serving, 2 on a bad go line or an unreadable request."""
    judge = ResidentJudge(root, device, max_requests)
    judge.deadline = deadline
    if head is not None:
        judge.zygote, judge.prestarted = head.zygote, head.worker
    try:
        while True:
            try:
                request = EvalRequest.model_validate_json(request_path.read_text(encoding="utf-8"))
            except Exception:
                logger.error("cannot read the request:\n%s", traceback.format_exc())
                return 2
            if judge.sched is None:
                # The zygote must exist before any key is read (no worker may hold one).
                try:
                    apply_address_space(request)  # the judge's; each worker applies its own
                    if judge.zygote is None:
                        judge.zygote = start_zygote(device, root)
                    judge.sched = SchedWatch.of_judge(judge.zygote.pid)
                    if judge.prestarted is not None:
                        judge.sched.add(AHEAD, judge.prestarted.pid)
                except Exception:
                    logger.error("the worker zygote did not start:\n%s", traceback.format_exc())
                    return 2
            key = read_result_key(keep_stdin=True)
            judge.judge(request, result_path, key)
            judge.between_requests()
            if judge.retire_reason is not None:
                logger.info("resident judge retires: %s", judge.retire_reason)
                return 0
            try:
                go = wait_for_go()
            except (BadGoLine, OSError) as exc:
                logger.error("resident judge: %s", exc)
                return 2
            if go is None:
                return 0
            judge.deadline = None if go.deadline_s is None else start_deadline(go.deadline_s)
    finally:
        judge.close()
