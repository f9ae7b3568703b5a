"""What runs in a pool container after an evaluation, and whether the next candidate may use it.

Place in the flow: `containers.py` lists a new container's processes once (its baseline: init
and `sleep infinity`); after every evaluation `DockerSandbox` asks `replace_reason`, before the
next runner is exec'd or given `go`. The container is replaced after a timeout, a runner crash,
a log that reports a CUDA error (a possibly poisoned context), processes that outlived the
runner, or (with a spare exec'd beside the candidate) forks the pids limit refused meanwhile.
The runner returns only once the killed worker's whole tree is reaped, so a fork bomb's
processes do not count as leftovers; the listing reads how many forks the container's pids
limit refused, since the spare's own forks or threads may have been among them.

The listing runs inside the container (`docker top` filters the host's `ps` by the container's
cgroup: on a host whose cgroup or /proc view does not match the engine's it lists nothing, and
leftovers went unseen).
"""

import re
from dataclasses import dataclass
from typing import Any

from kernelarc.sandboxes.docker.accounts import numeric
from kernelarc.sandboxes.docker.engine import DOCKER_ERRORS
from kernelarc.sandboxes.docker.exec_runner import exec_exit_code
from kernelarc.sandboxes.docker.slot import Slot
from kernelarc.sandboxes.runner_lifecycle import RunEnd
from kernelarc.schema import Trace

#: Runner log lines that mean the GPU context may be poisoned for whoever comes next.
POISONED_CUDA = re.compile(r"illegal memory access|CUDA error|unspecified launch failure")
#: Exec'd in a pool container as root (uid 0 there, with no capabilities: /proc/<pid>/status is
#: world-readable): one `pid uid` line (the real uid) per process but itself; a process that
#: ends mid-walk is skipped, any other error exits non-zero. Then, where the container's pids
#: cgroup shows its events file (v2 at the cgroup root, v1 under pids/), `limit-hits N`: how many
#: forks (or threads) the pids limit has refused in the container so far.
_LIST_PROCESSES = """
import os
me = str(os.getpid())
lines = []
for path in ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"):
    try:
        with open(path) as events:
            hits = [line.split()[1] for line in events if line.startswith("max ")]
    except OSError:
        continue
    lines += ["limit-hits " + hit for hit in hits[:1]]
    break
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid == me:
        continue
    try:
        with open("/proc/" + pid + "/status") as status:
            uid = next(line.split()[1] for line in status if line.startswith("Uid:"))
    except (FileNotFoundError, ProcessLookupError):
        continue
    lines.append(pid + " " + uid)
print("\\n".join(lines))
"""


class ListingError(Exception):
    """The in-container process listing failed, or said something impossible."""


@dataclass(frozen=True)
class Listing:
    """What the in-container listing saw."""

    processes: dict[str, str]
    """pid -> real uid of every process but the listing's own (the container's pid numbers)."""
    limit_hits: int | None
    """Forks the container's pids limit refused so far (None: its cgroup file is not visible)."""


#: What the process listing can raise: its caller then cannot trust the container.
LISTING_ERRORS = (*DOCKER_ERRORS, ListingError)


def list_processes(api: Any, container: Any, python: str) -> Listing:
    """pid -> uid of every process of `container`, as the container sees them (its pid
    namespace, its uids: the runners' numeric users), listed from inside with the image's
    `python`, and the count of forks its pids limit refused (`Listing`). The baseline and
    every later listing are taken this way, so their pids compare.

    Raises:
        docker.errors.DockerException, OSError: the exec failed.
        ListingError: the listing failed or came back empty (init and `sleep infinity`
            always run, so an empty listing is a blind one, never "no leftovers").
    """
    command = [python, "-I", "-S", "-c", _LIST_PROCESSES]
    exec_id = api.exec_create(container.id, command, user="0", workdir="/")["Id"]
    out, err = api.exec_start(exec_id, demux=True)
    code = exec_exit_code(api, exec_id)
    if code != 0:
        tail = ((out or b"") + (err or b"")).decode(errors="replace").strip()[-300:]
        msg = f"the process listing exited with {code}: {tail}"
        raise ListingError(msg)
    processes: dict[str, str] = {}
    limit_hits = None
    for line in (out or b"").decode(errors="replace").splitlines():
        pid, _, uid = line.partition(" ")
        if pid == "limit-hits" and uid.isdigit():
            limit_hits = int(uid)
            continue
        if not (pid.isdigit() and uid.isdigit()):
            msg = f"the process listing printed {line[:100]!r}"
            raise ListingError(msg)
        processes[pid] = uid
    if not processes:
        msg = "the process listing is empty (blind: init and the keep-alive always run)"
        raise ListingError(msg)
    return Listing(processes, limit_hits)


def replace_reason(
    api: Any, python: str, slot: Slot, run: RunEnd, problem: str | None, traces: list[Trace]
) -> str | None:
    """Why the slot's container must be replaced after this run (None: it may serve the next
    candidate); updates the slot's pids-limit count."""
    if run.timed_out:
        return "timeout"
    if run.returncode != 0 or problem is not None:
        return f"runner crashed (exit {run.returncode}, {problem or 'result written'})"
    logs = [run.log_tail, *(t.evaluation.log for t in traces if t.evaluation is not None)]
    if any(POISONED_CUDA.search(log) for log in logs):
        return "the log reports a CUDA error (possibly a poisoned context)"
    try:
        listing = list_processes(api, slot.container, python)
    except LISTING_ERRORS as exc:
        return f"cannot list its processes ({exc})"
    hits_before, slot.limit_hits = slot.limit_hits, listing.limit_hits
    # The spare exec'd beside the candidate runs as the other uid, which the candidate's
    # processes can never have.
    spare = numeric(slot.spare.user) if slot.spare is not None else None
    spare_uid = str(spare[0]) if spare is not None else None
    leftovers = {
        pid
        for pid, uid in listing.processes.items()
        if pid not in slot.baseline_pids and uid != spare_uid
    }
    if leftovers:
        return f"{len(leftovers)} process(es) outlived the runner"
    # The limit is the container's, not the uid's: a candidate that spent it (a fork bomb)
    # may have had the spare's own forks or threads refused while it imported torch.
    hit = None not in (hits_before, listing.limit_hits) and listing.limit_hits != hits_before
    if hit and slot.spare is not None:
        return "the candidate hit the pids limit while a spare runner started beside it"
    return None
