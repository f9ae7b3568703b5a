"""What every module of the Docker sandbox shares about the engine: its errors, the labels and
mount points of the pool containers, and removing a container.

Place in the flow: the pool containers (`containers.py`) and the image-reading container
(`accounts.py`) carry `OWNER` (the DockerSandbox instance) and `HOST_OWNER` (the host process,
`owned_dirs` owner) labels; `close()` removes a sandbox's containers by the first, a new
DockerSandbox those of a killed host by the second. Removal is retried, since a loaded engine
can give up waiting for the kill.
"""

import logging
import time
from typing import Any

import docker.errors

logger = logging.getLogger(__name__)

#: What an engine call can raise: the SDK's errors, and OSError (the socket, the host lock).
DOCKER_ERRORS = (docker.errors.DockerException, OSError)
_REMOVE_ATTEMPTS = 4
#: Where a pool container mounts its pool dir (read-write: one eval dir per runner) and the
#: problem dir (read-only).
EVAL_MOUNT = "/work/eval"
PROBLEM_MOUNT = "/work/problem"
#: Label naming the DockerSandbox instance a pool container belongs to.
OWNER = "kernelarc.sandbox_owner"
#: Label naming the host process (`owned_dirs` owner) whose sandbox started a pool container.
HOST_OWNER = "kernelarc.host_owner"


def remove_container(container: Any) -> None:
    """Force-remove, retried: on a loaded host the engine can give up waiting for the kill."""
    for attempt in range(_REMOVE_ATTEMPTS):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            return
        except DOCKER_ERRORS as exc:
            if attempt + 1 == _REMOVE_ATTEMPTS:
                logger.warning("cannot remove sandbox container %s: %s", container.short_id, exc)
                return
            time.sleep(1.0 + attempt)
        else:
            return
