"""Which problem an evaluation request is for, as one key: what a resident judge holds.

Place in the flow: the judge (`runner/resident.py`) drops its cache when a request's key differs
from its problem's; the sandboxes (`sandboxes/resident_runner.py`'s users) give a kept resident
judge only requests of its key. One function, so the two sides can never disagree.
"""

import hashlib
import json

from kernelarc.schema import EvalRequest


def problem_key(request: EvalRequest) -> str:
    """The problem a request is for: its definition, where its files are, its device."""
    text = json.dumps(
        [request.definition.model_dump(mode="json"), request.problem_dir, request.device],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
