"""What both sandboxes share about resident judges (`kernelarc/runner/resident.py`): their
default length of service, the note an evaluation by one gets, and their dir's upkeep.

Place in the flow: `LocalSandbox` and `DockerSandbox` key the runner they keep after a request
by `kernelarc.problem_key`; a kept runner only takes a request of the same key (their
`take_spare`). Their runners (`local/runner_process.py`, `docker/exec_runner.py`) watch the
result file with `file_stamp` and empty their dir for the next request with `empty_dir_but`.
"""

import logging
import shutil
from pathlib import Path

logger = logging.getLogger(__name__)

#: Requests a resident judge serves before a fresh runner replaces it (`resident_requests`).
DEFAULT_RESIDENT_REQUESTS = 64
#: EvalResult.sandbox_notes of an evaluation by a resident judge.
RESIDENT_NOTE = "resident judge"


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime ns, size) of a file, or None when it does not exist: read the result again only
    when this changed."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def empty_dir_but(folder: Path, kept: frozenset[str]) -> bool:
    """Remove every entry of `folder` but the real (not symlinked) entries named in `kept`;
    False when something could not be removed (the runner must then not be reused)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    for entry in entries:
        if entry.name in kept and not entry.is_symlink():
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError as exc:
            logger.warning("cannot clear %s for the next request: %s", entry, exc)
            return False
    return True
