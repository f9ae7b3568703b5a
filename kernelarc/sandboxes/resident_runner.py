"""What both sandboxes share about resident judges (`kernelarc/runner/resident.py`): which
requests one may take, its default length of service, and the note an evaluation by one gets.

Place in the flow: `LocalSandbox` and `DockerSandbox` key the runner they keep after a request
by `problem_key`; a kept runner only takes a request of the same key (their `take_spare`).
"""

import hashlib
import json

from kernelarc.schema import EvalRequest

#: Requests a resident judge serves before a fresh runner replaces it (`resident_requests`).
DEFAULT_RESIDENT_REQUESTS = 64
#: EvalResult.sandbox_notes of an evaluation by a resident judge.
RESIDENT_NOTE = "resident judge"


def problem_key(request: EvalRequest) -> str:
    """The problem a request is for, as a resident judge holds it (definition, files, device)."""
    text = json.dumps(
        [request.definition.model_dump(mode="json"), request.problem_dir, request.device],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
