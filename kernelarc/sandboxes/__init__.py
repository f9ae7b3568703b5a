"""Host side of sandboxes: run a candidate's evaluation out of process and read back traces.

`make_sandbox(kind, **options)` builds one; every sandbox implements `Sandbox.evaluate`, which
never raises for a candidate's misbehaviour (that is a status in the traces) and raises
`kernelarc.errors.SandboxError` only when the sandbox itself cannot run. Kinds: `local`
(`local.LocalSandbox`, a hardened subprocess) and `docker` (`docker.DockerSandbox`, imported
only when asked for; it holds containers). Both run every evaluation through one lifecycle
(`runner_lifecycle.py`): a spare runner kept between evaluations (`warm_spare`), a fresh runner
per candidate or, locally, a resident judge per problem (`resident_requests`), a signed result
read back (`result_file.py`). `prepare()` starts the first spare
(and Docker's container) before the first evaluation, so that one is not cold either. Call
`close()` when done with a sandbox (or use it as a context manager). Each sandbox's temp dirs
are named for its host process, and a new sandbox removes those of hosts that died without
closing theirs (`owned_dirs.py`).

The modules here are what both sandboxes share: the lifecycle and its spare slot
(`spare_slot.py`), the request's limits (`request_limits.py`, `memory_need.py`), the result
file, the runner users' accounts and compile caches (`runner_accounts.py`, `runner_cache.py`),
temp dirs (`owned_dirs.py`), the host's build and JIT caches (`host_caches.py`,
`build_cache.py`, `jit_cache.py`, `safe_files.py`; the local sandbox uses them so far) and the
jail (`jail.py`, run as a script by the local sandbox; `result_file.py` reads its set-up exit
code).
"""

from typing import Any, Protocol

from kernelarc.errors import ConfigError
from kernelarc.sandboxes.local import LocalSandbox
from kernelarc.schema import EvalRequest, EvalResult

__all__ = ["SANDBOX_KINDS", "LocalSandbox", "Sandbox", "make_sandbox"]

SANDBOX_KINDS = ("local", "docker")


class Sandbox(Protocol):
    """Evaluates one request in isolation and returns one trace per requested workload."""

    def evaluate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Run the request; a wall-clock overrun gives TIMEOUT traces, not an exception."""
        ...

    def prepare(self, device: str, timeout_s: float, problem_dir: str | None = None) -> None:
        """Get ready for evaluations of `device` with `timeout_s` (and `problem_dir`, which a
        Docker container mounts) before the first one arrives: start the spare runner (and
        the container), without waiting for it. Never raises: what fails here is tried again
        by `evaluate`, which then raises."""
        ...

    def close(self) -> None:
        """Release what the sandbox holds between evaluations (spare runner, containers)."""
        ...


def make_sandbox(kind: str, **options: Any) -> Sandbox:
    """Build a sandbox of `kind` with its options (see the class for each kind's options).

    Raises:
        ConfigError: unknown kind or bad options.
        SandboxError: `docker` and no engine can be reached.
    """
    if kind not in SANDBOX_KINDS:
        msg = f"unknown sandbox kind {kind!r}; valid kinds: {', '.join(SANDBOX_KINDS)}"
        raise ConfigError(msg)
    cls: Any = LocalSandbox
    if kind == "docker":
        from kernelarc.sandboxes.docker import DockerSandbox  # docker SDK: only there

        cls = DockerSandbox
    try:
        sandbox: Sandbox = cls(**options)
    except TypeError as exc:
        msg = f"sandbox kind {kind!r}: bad options {sorted(options)}: {exc}"
        raise ConfigError(msg) from exc
    return sandbox
