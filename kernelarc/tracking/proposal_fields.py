"""Coordination-era fields of proposals and run dirs, read so that older records still work.

Place in the flow: the MLflow tracker, `kernelarc sync` and `kernelarc report` read the LLM
usage, model, drafting flag and conclusions of an attempt through these functions. The fields
(`Proposal.model`, `.draft`, `.conclusions_seen`, `.llm` = LLMExchange list, and the run dir's
`conclusions.jsonl`) arrive with the coordination work; records written before it lack them, so
every reader falls back to "absent" rather than failing.
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelarc.rundir import CONCLUSIONS_FILE
from kernelarc.schema import Proposal

logger = logging.getLogger(__name__)

"""The run dir's append-only log of shared conclusions (one JSON object per line)."""


@dataclass(frozen=True)
class LLMUsage:
    """What the LLM requests behind one proposal cost."""

    calls: int = 0
    """Requests made (retries included); 0 for offline agents."""
    prompt_tokens: int = 0
    """Tokens sent."""
    completion_tokens: int = 0
    """Tokens received."""
    cost_usd: float = 0.0
    """Cost at the configured prices."""

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


def llm_usage(proposal: Proposal) -> LLMUsage:
    """Sum of the proposal's LLM exchanges (`Proposal.llm`); zeros when it has none."""
    exchanges = _exchanges(proposal)
    return LLMUsage(
        calls=len(exchanges),
        prompt_tokens=sum(int(_get(e, "prompt_tokens", 0) or 0) for e in exchanges),
        completion_tokens=sum(int(_get(e, "completion_tokens", 0) or 0) for e in exchanges),
        cost_usd=sum(float(_get(e, "cost_usd", 0.0) or 0.0) for e in exchanges),
    )


def proposal_model(proposal: Proposal) -> str | None:
    """The LLM model that wrote the proposal (None: an offline proposer)."""
    model = getattr(proposal, "model", None)
    if model:
        return str(model)
    exchanges = _exchanges(proposal)
    found = _get(exchanges[-1], "model", None) if exchanges else None
    return str(found) if found else None


def is_draft(proposal: Proposal) -> bool:
    """True when plateau-triggered drafting started the proposal's line."""
    return bool(getattr(proposal, "draft", False))


def conclusions_seen(proposal: Proposal) -> list[str]:
    """Ids of the shared conclusions the agent saw when it proposed this."""
    seen = getattr(proposal, "conclusions_seen", None) or []
    return [str(c) for c in seen]


def transcript_json(proposal: Proposal) -> str | None:
    """The proposal's LLM exchanges as indented JSON; None when it has none."""
    exchanges = _exchanges(proposal)
    if not exchanges:
        return None
    dumped = [e.model_dump(mode="json") if hasattr(e, "model_dump") else e for e in exchanges]
    return json.dumps(dumped, indent=2, default=str)


def read_conclusions(run_dir: Path) -> list[dict[str, Any]]:
    """The run dir's conclusions as JSON objects, in file order; [] when there is no file.

    A line that is not a JSON object is skipped with a warning (a crash can cut the last one).
    """
    path = run_dir / CONCLUSIONS_FILE
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    except OSError as exc:
        logger.warning("%s: unreadable (%s); no conclusions table", path, exc)
        return []
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            logger.warning("%s:%d: not JSON; skipped", path, number)
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _exchanges(proposal: Proposal) -> list[Any]:
    return list(getattr(proposal, "llm", None) or [])


def _get(item: Any, name: str, default: Any) -> Any:
    if isinstance(item, dict):
        return item.get(name, default)
    return getattr(item, name, default)
