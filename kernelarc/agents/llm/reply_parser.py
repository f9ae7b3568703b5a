"""Turn an LLM reply into a SOL-ExecBench Solution (and the conclusions the model attached).

Place in the flow: `LLMAgent.propose` parses every reply here; a `ReplyFormatError` carries a
precise message that goes back to the model in the re-ask (`prompt_builder.reask_message`).

The reply layout (taught by prompts/system.md): one fenced `json` block holding
`{"rationale", "solution": {name, spec, sources: [{path, content?}]}, "conclusions"?}`, then one
fenced block per source file whose info string carries `path=<path>`. A source may instead carry
its text inline as `"content"`. `definition` and `author` are always set by KernelArc (the problem
and the agent), never taken from the model. Malformed conclusions are dropped (with a note), not
re-asked: they are optional and the candidate is still worth evaluating.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kernelarc.problems.files import describe_validation_error
from kernelarc.schema import Attempt, EvalStatus, Solution
from kernelarc.schema.coordination import ConclusionDraft, Evidence

MAX_CONCLUSIONS = 3
"""Conclusions kept from one reply."""
MAX_RATIONALE_CHARS = 300
_CLAIM_CHARS = 400

_FENCE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_PATH = re.compile(r"""(?:path|file)=(?:"([^"]+)"|'([^']+)'|(\S+))""")
_FORMAT_HINT = (
    "start the reply with one ```json block holding "
    '{"rationale": ..., "solution": {"name", "spec", "sources"}}, then one block per source '
    "file tagged ```python path=kernel.py"
)


class ReplyFormatError(ValueError):
    """The reply holds no usable solution; the message says exactly what is wrong."""


@dataclass(frozen=True)
class ParsedReply:
    """A usable reply."""

    solution: Solution
    """The candidate (definition and author set by KernelArc)."""
    rationale: str
    """The model's one-line rationale."""
    conclusions: tuple[ConclusionDraft, ...] = ()
    """Conclusions the model attached, with evidence resolved against the prompt's attempts."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Why some conclusions were dropped."""


@dataclass(frozen=True)
class _Block:
    info: str
    body: str


def parse_reply(
    text: str,
    *,
    problem: str,
    author: str,
    op_family: str = "",
    evidence_pool: Mapping[int, Attempt] | None = None,
) -> ParsedReply:
    """The solution and conclusions in `text`.

    `evidence_pool` holds the attempts the prompt showed, by index; a conclusion may cite only
    those.

    Raises:
        ReplyFormatError: no valid solution; the message names the problem and the fix.
    """
    if not text.strip():
        msg = f"the reply was empty; {_FORMAT_HINT}"
        raise ReplyFormatError(msg)
    blocks = [_Block(m["info"].strip(), m["body"]) for m in _FENCE.finditer(text)]
    leftover = _FENCE.sub("", text)
    if _OPEN_FENCE.search(leftover):
        msg = (
            "a fenced block is opened but never closed (was the reply cut off by the token "
            "limit? keep the code shorter)"
        )
        raise ReplyFormatError(msg)
    payload = _payload(text, blocks)
    solution_data = payload.get("solution")
    if solution_data is None and "spec" in payload:
        solution_data = payload
    if not isinstance(solution_data, dict):
        msg = 'the JSON object has no "solution" object; ' + _FORMAT_HINT
        raise ReplyFormatError(msg)
    rationale = _one_line(payload.get("rationale") or solution_data.get("description") or "")
    data = _normalize(solution_data, _files(blocks), problem=problem, author=author)
    data.setdefault("description", rationale or None)
    try:
        solution = Solution.model_validate(data)
    except ValidationError as exc:
        msg = f"the solution does not validate: {describe_validation_error(exc)}"
        raise ReplyFormatError(msg) from exc
    conclusions, notes = _conclusions(payload.get("conclusions"), op_family, evidence_pool or {})
    return ParsedReply(solution, rationale, conclusions, notes)


def _payload(text: str, blocks: list[_Block]) -> dict[str, Any]:
    """The one JSON object of the reply."""
    json_blocks = [b for b in blocks if b.info.split(" ")[0].lower() in ("json", "jsonc")]
    if len(json_blocks) > 1:
        msg = f"found {len(json_blocks)} ```json blocks; send exactly one"
        raise ReplyFormatError(msg)
    if json_blocks:
        raw = json_blocks[0].body
    elif not blocks and text.strip().startswith("{"):
        raw = text.strip()  # a bare JSON reply (e.g. from a JSON response mode)
    else:
        msg = f"found no ```json block; {_FORMAT_HINT}"
        raise ReplyFormatError(msg)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        msg = (
            f"the json block is not valid JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno} (put source code in fenced blocks, not in JSON strings)"
        )
        raise ReplyFormatError(msg) from exc
    if not isinstance(value, dict):
        msg = f"the json block holds a {type(value).__name__}, not an object; " + _FORMAT_HINT
        raise ReplyFormatError(msg)
    return value


def _files(blocks: list[_Block]) -> dict[str, str]:
    """Source blocks by the path in their info string."""
    files: dict[str, str] = {}
    for block in blocks:
        found = _PATH.search(block.info)
        if found is None:
            continue
        path = next(g for g in found.groups() if g)
        if path in files:
            msg = f"two fenced blocks carry path={path}; send each file once"
            raise ReplyFormatError(msg)
        files[path] = block.body
    return files


def _normalize(
    solution: dict[str, Any], files: dict[str, str], *, problem: str, author: str
) -> dict[str, Any]:
    """Fill sources from the file blocks; KernelArc's fields and harmless case fixes."""
    data = dict(solution)
    data["definition"], data["author"] = problem, author
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        data["name"] = f"{problem}-{author}"
    spec = data.get("spec")
    if isinstance(spec, dict):
        spec = dict(spec)
        if isinstance(spec.get("languages"), list):
            spec["languages"] = [str(x).lower() for x in spec["languages"]]
        hardware = spec.get("target_hardware")
        spec["target_hardware"] = (
            [str(x).upper() for x in hardware] if isinstance(hardware, list) else ["LOCAL"]
        )
        data["spec"] = spec
    data["sources"] = _sources(data.get("sources"), files)
    return data


def _sources(listed: object, files: dict[str, str]) -> list[dict[str, str]]:
    if listed is None:
        listed = []
    if not isinstance(listed, list):
        msg = 'solution.sources must be a list of {"path": ...} objects'
        raise ReplyFormatError(msg)
    sources: list[dict[str, str]] = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            msg = f'solution.sources[{i}] must be an object with a "path" string'
            raise ReplyFormatError(msg)
        path = item["path"]
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            content = files.get(path)
        if content is None or not content.strip():
            msg = (
                f"source {path!r} has no content: add a fenced block tagged path={path} "
                f'(or a "content" string); blocks found for {sorted(files) or "no paths"}'
            )
            raise ReplyFormatError(msg)
        sources.append({"path": path, "content": content})
    listed_paths = {s["path"] for s in sources}
    sources.extend({"path": p, "content": c} for p, c in files.items() if p not in listed_paths)
    if not sources:
        msg = "the solution has no sources; list them and send one fenced block per file"
        raise ReplyFormatError(msg)
    return sources


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:MAX_RATIONALE_CHARS]


def _conclusions(
    raw: object, op_family: str, pool: Mapping[int, Attempt]
) -> tuple[tuple[ConclusionDraft, ...], tuple[str, ...]]:
    """Valid conclusions and notes on the dropped ones (never an error: they are optional)."""
    if raw is None:
        return (), ()
    if not isinstance(raw, list):
        return (), ('"conclusions" is not a list; ignored',)
    drafts: list[ConclusionDraft] = []
    notes: list[str] = []
    for i, item in enumerate(raw[:MAX_CONCLUSIONS]):
        draft, note = _conclusion(item, op_family, pool)
        if draft is not None:
            drafts.append(draft)
        else:
            notes.append(f"conclusion {i} dropped: {note}")
    if len(raw) > MAX_CONCLUSIONS:
        notes.append(f"{len(raw) - MAX_CONCLUSIONS} conclusions beyond {MAX_CONCLUSIONS} ignored")
    return tuple(drafts), tuple(notes)


def _conclusion(
    item: object, op_family: str, pool: Mapping[int, Attempt]
) -> tuple[ConclusionDraft | None, str]:
    if not isinstance(item, dict):
        return None, "not an object"
    claim = " ".join(str(item.get("claim") or "").split())[:_CLAIM_CHARS]
    if not claim:
        return None, "no claim"
    cited = item.get("evidence")
    cited_list = cited if isinstance(cited, list) else [cited]
    indices = [_as_index(i) for i in cited_list]
    evidence = [_evidence(pool[i]) for i in indices if i is not None and i in pool]
    if not evidence:
        return None, f"evidence {cited!r} cites no attempt shown in the prompt"
    try:
        confidence = min(max(float(item.get("confidence", 0.5)), 0.0), 1.0)
    except (TypeError, ValueError):
        confidence = 0.5
    family = op_family if item.get("applies_to_op_family") is True else ""
    return ConclusionDraft(
        claim=claim, evidence=evidence, confidence=confidence, op_family=family
    ), ""


def _as_index(value: object) -> int | None:
    """An attempt number given as an int or a digit string (`4`, `"4"`); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _evidence(attempt: Attempt) -> Evidence:
    if attempt.status == EvalStatus.PASSED and attempt.speedup is not None:
        return Evidence(
            attempt_index=attempt.index,
            proposal_id=attempt.proposal.id,
            metric="speedup",
            value=attempt.speedup,
        )
    return Evidence(attempt_index=attempt.index, proposal_id=attempt.proposal.id, metric="status")
