"""Read SOL-ExecBench files from disk into schema models, with errors naming file, line and field.

Nothing is half-loaded: a problem either loads whole or raises ProblemFormatError.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from kernelarc.errors import ProblemFormatError
from kernelarc.problems.unknown_keys import definition_key_notes, workload_key_notes
from kernelarc.schema import Definition, Solution, Workload

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    """A loaded problem directory."""

    path: Path
    """The directory (definition.json + workload file)."""
    definition: Definition
    """The definition."""
    workloads: tuple[Workload, ...]
    """The workloads, in file order."""
    warnings: tuple[str, ...] = ()
    """What loading found questionable but harmless (unknown keys), each naming file and key."""

    @property
    def name(self) -> str:
        """The definition's name."""
        return self.definition.name


def describe_validation_error(exc: ValidationError) -> str:
    """One line per pydantic error: `field.path: message (got value)`."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
        got = err.get("input")
        shown = repr(got)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg} (got {shown})" if err["type"] != "missing" else f"{loc}: {msg}")
    return "; ".join(lines)


def _parse_json(text: str, where: str, one_line: bool = False) -> object:
    """Parse JSON; the error names the line and column (only the column for one JSONL line,
    whose `where` names the line already)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if one_line else f"line {exc.lineno}, column {exc.colno}"
        msg = f"{where}: not valid JSON at {at} ({exc.msg}); fix the syntax"
        raise ProblemFormatError(msg) from exc


def _validate(model: type[M], data: object, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        msg = f"{where}: invalid {model.__name__}: {describe_validation_error(exc)}"
        raise ProblemFormatError(msg) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        msg = f"{path}: file not found"
        raise ProblemFormatError(msg) from exc
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read ({exc})"
        raise ProblemFormatError(msg) from exc


def load_definition(path: Path) -> Definition:
    """Load and validate a definition.json."""
    return _load_definition(path)[0]


def _load_definition(path: Path) -> tuple[Definition, list[str]]:
    data = _parse_json(_read(path), str(path))
    notes = definition_key_notes(data, str(path))
    return _validate(Definition, data, str(path)), notes


def load_solution(path: Path) -> Solution:
    """Load a solution.json; an empty `content` is filled from the file of that path beside it."""
    data = _parse_json(_read(path), str(path))
    if isinstance(data, dict) and isinstance(data.get("sources"), list):
        for source in data["sources"]:
            if isinstance(source, dict) and source.get("content") == "" and source.get("path"):
                sibling = path.parent / str(source["path"])
                if sibling.is_file() and sibling.resolve().is_relative_to(path.parent.resolve()):
                    source["content"] = _read(sibling)
    return _validate(Solution, data, str(path))


def load_workloads(path: Path, definition: Definition) -> tuple[Workload, ...]:
    """Load workload.jsonl and check every line against the definition."""
    return _load_workloads(path, definition)[0]


def _load_workloads(path: Path, definition: Definition) -> tuple[tuple[Workload, ...], list[str]]:
    workloads: list[Workload] = []
    notes: list[str] = []
    seen: set[str] = set()
    for lineno, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        data = _parse_json(line, where, one_line=True)
        notes += workload_key_notes(data, where)
        workload = _validate(Workload, data, where)
        if workload.uuid in seen:
            msg = f"{where}: duplicate workload uuid {workload.uuid!r}; uuids must be unique"
            raise ProblemFormatError(msg)
        seen.add(workload.uuid)
        check_workload(definition, workload, where)
        workloads.append(workload)
    if not workloads:
        msg = f"{path}: no workloads; add one JSON object per line"
        raise ProblemFormatError(msg)
    return tuple(workloads), notes


def check_workload(definition: Definition, workload: Workload, where: str) -> None:
    """Cross-check a workload against its definition (axes bound, inputs known)."""
    var_axes = {n for n, a in definition.axes.items() if a.type == "var"}
    missing = var_axes - set(workload.axes)
    if missing:
        msg = f"{where}: field axes: var axes {sorted(missing)} are not bound; add them"
        raise ProblemFormatError(msg)
    unknown_axes = set(workload.axes) - var_axes
    if unknown_axes:
        msg = (
            f"{where}: field axes: {sorted(unknown_axes)} are not var axes of "
            f"{definition.name!r} (var axes: {sorted(var_axes)})"
        )
        raise ProblemFormatError(msg)
    unknown = set(workload.inputs) - set(definition.inputs)
    if unknown:
        msg = (
            f"{where}: field inputs: {sorted(unknown)} are not inputs of {definition.name!r} "
            f"(inputs: {list(definition.inputs)})"
        )
        raise ProblemFormatError(msg)
    kinds = {spec.type for spec in workload.inputs.values()}
    if "custom" in kinds and definition.custom_inputs_entrypoint is None:
        msg = (
            f"{where}: field inputs: `custom` inputs need the definition's "
            "custom_inputs_entrypoint; set it or use `random`"
        )
        raise ProblemFormatError(msg)
    try:
        definition.resolve_axes(dict(workload.axes))
    except ValueError as exc:
        msg = f"{where}: field axes: {exc}"
        raise ProblemFormatError(msg) from exc


def load_problem(path: Path, workload_file: str = "workload.jsonl") -> Problem:
    """Load a problem directory (definition.json + workload file)."""
    if not path.is_dir():
        msg = f"{path}: not a problem directory (expected definition.json and {workload_file})"
        raise ProblemFormatError(msg)
    definition, notes = _load_definition(path / "definition.json")
    workloads, workload_notes = _load_workloads(path / workload_file, definition)
    return Problem(
        path=path,
        definition=definition,
        workloads=workloads,
        warnings=tuple(notes + workload_notes),
    )
