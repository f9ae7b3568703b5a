"""Host side of sandboxes: run a candidate's evaluation out of process and read back traces.

`make_sandbox(kind, **options)` builds one; every sandbox implements `Sandbox.evaluate`, which
never raises for a candidate's misbehaviour (that is a status in the traces) and raises
`kernelarc.errors.SandboxError` only when the sandbox itself cannot run. Kinds: `local`
(`LocalSandbox`, a hardened subprocess) and `docker` (`docker_sandbox.DockerSandbox`, imported
only when asked for; it holds containers). Both keep a spare runner between evaluations
(`warm_spare`): call `close()` when done with a sandbox (or use it as a context manager).
"""

from typing import Any, Protocol

from kernelarc.errors import ConfigError
from kernelarc.execution.local_sandbox import LocalSandbox
from kernelarc.schema import EvalRequest, EvalResult

__all__ = ["SANDBOX_KINDS", "LocalSandbox", "Sandbox", "make_sandbox"]

SANDBOX_KINDS = ("local", "docker")


class Sandbox(Protocol):
    """Evaluates one request in isolation and returns one trace per requested workload."""

    def evaluate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Run the request; a wall-clock overrun gives TIMEOUT traces, not an exception."""
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
        from kernelarc.execution.docker_sandbox import DockerSandbox  # docker SDK: only here

        cls = DockerSandbox
    try:
        sandbox: Sandbox = cls(**options)
    except TypeError as exc:
        msg = f"sandbox kind {kind!r}: bad options {sorted(options)}: {exc}"
        raise ConfigError(msg) from exc
    return sandbox
