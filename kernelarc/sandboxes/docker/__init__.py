"""The Docker sandbox: the runner in a warm, locked-down container per device slot."""

from kernelarc.sandboxes.docker.sandbox import DockerSandbox

__all__ = ["DockerSandbox"]
