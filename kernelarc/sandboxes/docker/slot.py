"""One device slot of a DockerSandbox (`cuda:<gpu>` or `cpu`): what it holds while warm.

Place in the flow: `DockerSandbox` keeps one `Slot` per device key; its lock makes evaluations
of the slot run one at a time (and `prepare` finish first). `containers.py` fills in the pool
container, its pool dir, baseline pids and memory limit (and `drop_container` empties them
again); `processes.py` compares later listings with the baseline; the sandbox keeps the spare
runner and the user that ran last here (runners alternate).
"""

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelarc.sandboxes.docker.exec_runner import ExecRunner
from kernelarc.sandboxes.runner_accounts import Account


@dataclass
class Slot:
    """One device slot: its lock and (while warm) its pool container and spare runner."""

    key: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    container: Any = None
    problem_dir: str | None = None
    pool_dir: Path | None = None
    image_id: str = ""
    baseline_pids: frozenset[str] = frozenset()
    """Pids (the container's own) of its init and `sleep infinity`, listed at its start."""
    limit_hits: int | None = None
    """The pids limit's refusal count at the last listing (None: not visible)."""
    memory_bytes: int | None = None
    """The container's memory limit now (raised for a problem that needs more)."""
    spare: ExecRunner | None = None
    last_user: str | None = None
    """The user of the runner exec'd last (the next one alternates)."""
    accounts: dict[str, Account] = field(default_factory=dict)
    """Numeric runner user (`uid:gid`) -> its account in the container."""
