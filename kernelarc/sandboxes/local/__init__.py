"""The local sandbox: the runner as a hardened subprocess of this host (`LocalSandbox`).

Modules, in the order an evaluation meets them: `sandbox.py` (options, spare slot, memory fit,
its side of the shared lifecycle, `../runner_lifecycle.py`), `spawn_thread.py` (where runners
are forked), `runner_identities.py` (the two uids runners alternate between), `runner_start.py`
(temp dir, environment and command line of one runner: `network.py`'s namespaces, the jail),
`process_limits.py` (its environment allowlist and rlimits), `runner_limits.py` (the limits a
runner and its request get), `runner_process.py` (the process from `go` to its kill, or to the
next request of a resident judge).

Per evaluate(): a private temp dir (the runner's cwd, HOME and TMPDIR, removed afterwards), a
new session/process group, a scrubbed environment, rlimits, a network namespace where `unshare`
works, stdout/stderr to files read back only by their tail, and a wall-clock timeout that kills
the whole group. A fresh random key goes to the runner on stdin; only a result file signed with
it is read (candidate code, which runs in the runner's worker processes, never sees the key).
Whatever happens to the candidate, the result has one trace per workload.

When the host runs as root and a mount namespace works, the runner also starts inside the jail
(`../jail.py`): the whole filesystem read-only except the temp dir and the identity's compile
cache dir, a private /dev/shm, the runner as an unprivileged user (`user`, default nobody)
without capabilities, and a supervisor that kills every process the candidate leaves behind,
setsid'd daemons included. Every runner user is a complete account (USER/LOGNAME, and passwd
and group entries the jail adds where the host has none: `runner_accounts.py`), and each
identity keeps its compile caches for the candidates after it (`runner_cache.py`). A runner
that could not set itself up (`runner/self_check.py`, the jail's set-up) is a SandboxError.
Where the jail cannot be used (not root, no mount namespace, its probe fails) the sandbox says so
in `EvalResult.sandbox_notes` and runs as before.

With `warm_spare` (the default) the sandbox keeps one spare runner (`spare_slot.py`) that
imports torch in its own fresh temp dir and process, then waits for its request. The next
evaluation that fits it (same device and timeout) writes the request and the key into it and
starts the clock there, so the import is off the candidate's path; otherwise it starts a runner
itself, exactly as a spare but at once (a cold start). When the next spare starts
(`spare_start`): on `cuda` as soon as an evaluation has its runner, so that candidates arriving
back to back find it ready (one CPU core importing torch does not disturb GPU timing); on `cpu`
only when the evaluation has ended, so the import never competes with a candidate's CPU timing.
A spare that coexists with a candidate runs in the jail as the other of two users (`user`,
`spare_user`; `runner_identities.py`): a capability-less process of one uid can neither signal
nor ptrace the other's, nor enter its temp dir (0700). Without the jail, or with one user, the
spare waits for the end. Runners are forked from one long-lived thread (`spawn_thread.py`), so
their parent-death signal ties them to the host process, not to the thread of the evaluation
that started them. `close()` (or leaving a `with` block, or garbage collection of the sandbox)
ends the spare and removes its temp dir. `prepare()` starts the first spare before the first
evaluation (on cpu too: nothing of this sandbox is being timed yet).

With `resident_requests` > 0 (the default, 64; needs `warm_spare`) each runner is a resident
judge (`kernelarc/runner/resident.py`): after a request whose result is complete it stays
alive, its dir is emptied (but the judge's `ref/` and logs), and it goes back to the spare slot
for the next request of the same problem, which sends a fresh request, go line and key on the
stdin it kept open. It keeps the problem's inputs, reference outputs and reference latency;
candidates still run only in workers it forks, and the zygote kills everything a candidate
left before the result is marked complete. A request for another problem discards it (a fresh
runner takes the request); it retires after `resident_requests` requests or half its CPU-time
limit, and anything that goes wrong (a timeout, a crash, a dir it cannot empty) ends it as a
one-off runner ends.

Temp dirs are named for the host process (`owned_dirs.py`); creating a sandbox removes those
a host killed with SIGKILL left in the temp root (never a live host's).

With `build_cache` (a directory; campaigns use `~/.cache/kernelarc/builds`) C++ solutions
already built on this host are not compiled again, and a candidate's JIT-compiled kernels
(torch.compile, Triton) are kept for its later evaluations (`host_caches.py`; `build_cache.py`
and `jit_cache.py` have the checks and the threat model).
"""

from kernelarc.sandboxes.local.sandbox import LocalSandbox

__all__ = ["LocalSandbox"]
