"""The Docker sandbox: the runner in a warm, locked-down container per device slot (GPU hosts).

The only package that imports `docker` (the SDK). Its modules, in the order an evaluation meets
them: `sandbox.py` (`DockerSandbox`: options, slots, its side of the shared lifecycle,
`../runner_lifecycle.py`), `slot.py` (one slot's state), `containers.py` (a pool container's
options, start, memory limit, removal), `accounts.py` (the runner users, their accounts in the
image, their caches), `exec_runner.py` (one runner exec'd in the container; `attach_stream.py`
reads its output), `processes.py` (the leftover check), `engine.py` (errors, labels, mounts).

Per slot (`cuda:<gpu>` or `cpu`) one long-lived container runs `sleep infinity` under docker's
init: no network, read-only root, a tmpfs /tmp, no capabilities, no-new-privileges, pids/memory/CPU
limits, a non-root user; the problem dir is mounted read-only at /work/problem, a host temp dir
read-write at /work/eval. Each evaluation is a fresh `python -P -m kernelarc.runner --device D
request.json result.json` exec'd in its own /work/eval/<id> with stdin attached; the host writes
request.json there, then `go <timeout>` and the result key on stdin: the runner SIGKILLs its own
process group at that deadline (it cannot run under `timeout -s KILL`: see below), and the host
still gives up `exec_runner.HOST_GRACE_S` later. The signed result is read back on the host side of
the mount with `result_file`, as LocalSandbox does. The container is replaced after a timeout, a
runner crash, a poisoned CUDA context or leftover processes, so container start-up is paid once and
no candidate can affect the next: the leftover check lists the container's processes from inside
after every evaluation, before the next runner is exec'd or given `go`. The runner returns only
once the killed worker's whole tree is reaped, so a fork bomb's processes do not count there; the
listing also reads how many forks the container's pids limit refused, and a candidate that hit that
limit while a spare was exec'd beside it (`spare_start`) has the container replaced too, since the
spare's own forks or threads may have been refused while it imported torch.

With `resident_requests` (the default, 64) the runner is a resident judge
(`kernelarc/runner/resident.py`): after a request whose result is complete it runs on, its eval
dir is emptied but the judge's `ref/`, and it is kept as the slot's spare for the next request
of the same problem (go line, deadline and key per request on the stdin it keeps; its output
stream read per request). It kills everything the candidate left (its zygote is the workers'
subreaper) before the result is complete, so the leftover check after it ignores its uid as it
ignores a spare's; a judge that cannot clear them retires, and the check then sees them.

With `warm_spare` (the default) the slot keeps the next runner exec'd ahead, in its own fresh eval
dir: it imports torch and waits for `go`, so the next evaluation skips the import (as LocalSandbox's
spare; `spare_slot.py`). On `cuda` (`spare_start` auto) it is exec'd as soon as the current
evaluation has its runner, so back-to-back candidates find it ready; on `cpu` only when an
evaluation ends, after the leftover check, so its import never competes with CPU timing. Runners
alternate between two numeric users (`user`, `spare_user`): with no capabilities in the container,
the running candidate's uid can neither signal nor ptrace the spare, nor enter its eval dir (chowned
to the spare's uid, mode 0700); the leftover check ignores the spare's uid. Without a second user (a
non-root host cannot chown the eval dirs) the spare waits for the end. A spare that died is replaced
by a runner exec'd at once (a cold start); a replaced container takes its spare along. Every runner
user is a complete account (`runner_accounts.py`): USER and LOGNAME name it, and where the image
lacks a passwd or group entry for a numeric user, the pool container gets copies of the image's
/etc/passwd and /etc/group with the entries added, mounted read-only over them. Each numeric user
keeps its compile caches in its own dir of the pool dir (`cache/<uid>-<gid>`, mode 0700:
`runner_cache.py`) for the candidates that follow in that container. A runner that reports (or shows
by its exit code) that it could not set itself up is a SandboxError, not a candidate failure.
`prepare()` starts a slot's container and its first spare on a thread of its own before the first
evaluation, which then waits for it (the slot's lock) and finds both ready. Pool dirs are named for
the host process (`owned_dirs.py`) and containers labelled with it: a new DockerSandbox removes the
pool dirs and containers (on its engine) of a host that was killed without closing its sandboxes.
"""

from kernelarc.sandboxes.docker.sandbox import DockerSandbox

__all__ = ["DockerSandbox"]
