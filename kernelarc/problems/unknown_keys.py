"""Keys of a problem file that no field reads: a warning that names the nearest valid key, or an
error where the typo would change a verdict.

Place in the flow: `problems.files` runs these checks on the raw JSON of `definition.json` and of
every `workload.jsonl` line before validating them. The wire models ignore unknown keys on
purpose (official files carry keys the official models ignore, e.g. a definition's
`constraints`; docs/architecture.md), so without this a typo such as `requried_matched_ratio`
would be dropped silently and the default tolerance would decide the verdict. Keys that
SOL-ExecBench documents but does not read stay silent (`HARMLESS`); any other unknown key is
named with the closest valid one. Inside `tolerance`, and for a top-level workload key that is a
near miss of `tolerance` or `inputs`, the check refuses the file: the default that would apply
instead changes what PASSES.
"""

import difflib
from collections.abc import Mapping

from pydantic import BaseModel

from kernelarc.errors import ProblemFormatError
from kernelarc.schema.definition import AxisConst, AxisExpr, AxisVar, Definition, TensorSpec
from kernelarc.schema.workload import (
    CustomInput,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    ToleranceSpec,
    Workload,
)

HARMLESS: Mapping[str, frozenset[str]] = {
    "definition": frozenset({"constraints"}),
    "workload": frozenset({"schema_version"}),
}
"""Keys of the format that neither the official evaluator nor KernelArc reads, by file kind."""

_AXES: Mapping[str, type[BaseModel]] = {"const": AxisConst, "var": AxisVar, "expr": AxisExpr}
_INPUTS: Mapping[str, type[BaseModel]] = {
    "random": RandomInput,
    "scalar": ScalarInput,
    "safetensors": SafetensorsInput,
    "custom": CustomInput,
}
#: Top-level workload fields whose default (no entry) decides correctness differently.
_VERDICT_FIELDS = frozenset({"tolerance", "inputs"})


def definition_key_notes(data: object, where: str) -> list[str]:
    """Warnings for the unknown keys of a raw definition (nothing there changes a verdict)."""
    if not isinstance(data, dict):
        return []
    notes = _unknown(data, Definition, "", HARMLESS["definition"])
    for name, axis in _items(data.get("axes")):
        model = _AXES.get(str(axis.get("type")))
        if model is not None:
            notes += _unknown(axis, model, f"axes.{name}.")
    for group in ("inputs", "outputs"):
        for name, spec in _items(data.get(group)):
            notes += _unknown(spec, TensorSpec, f"{group}.{name}.")
    return [f"{where}: {note}" for note in notes]


def workload_key_notes(data: object, where: str) -> list[str]:
    """Warnings for the unknown keys of a raw workload line.

    Raises:
        ProblemFormatError: an unknown key inside `tolerance`, or a near miss of `tolerance` or
            `inputs` at the top level: the default in force instead would decide the verdict.
    """
    if not isinstance(data, dict):
        return []
    notes: list[str] = []
    for key in _extra(data, Workload, HARMLESS["workload"]):
        near = _nearest(key, Workload)
        if near in _VERDICT_FIELDS:
            msg = (
                f"{where}: unknown key {key!r}: did you mean {near!r}? Without {near!r} the "
                f"default {near} would decide the verdict; fix the key"
            )
            raise ProblemFormatError(msg)
        notes.append(_note(key, "", near))
    tolerance = data.get("tolerance")
    if isinstance(tolerance, dict):
        for key in _extra(tolerance, ToleranceSpec):
            near = _nearest(key, ToleranceSpec)
            hint = f"did you mean {near!r}? " if near else ""
            known = ", ".join(ToleranceSpec.model_fields)
            msg = (
                f"{where}: unknown key 'tolerance.{key}': {hint}An unknown tolerance key would "
                f"leave the default in force and could change the verdict; tolerance keys: {known}"
            )
            raise ProblemFormatError(msg)
    for name, spec in _items(data.get("inputs")):
        model = _INPUTS.get(str(spec.get("type")))
        if model is not None:
            notes += _unknown(spec, model, f"inputs.{name}.")
    return [f"{where}: {note}" for note in notes]


def _items(value: object) -> list[tuple[str, dict[str, object]]]:
    """The (name, mapping) entries of a mapping of mappings; others are the validator's job."""
    if not isinstance(value, dict):
        return []
    return [(str(k), v) for k, v in value.items() if isinstance(v, dict)]


def _extra(
    data: Mapping[str, object], model: type[BaseModel], harmless: frozenset[str] = frozenset()
) -> list[str]:
    fields = set(model.model_fields)
    return [str(k) for k in data if str(k) not in fields and str(k) not in harmless]


def _unknown(
    data: Mapping[str, object],
    model: type[BaseModel],
    prefix: str,
    harmless: frozenset[str] = frozenset(),
) -> list[str]:
    return [_note(key, prefix, _nearest(key, model)) for key in _extra(data, model, harmless)]


def _nearest(key: str, model: type[BaseModel]) -> str | None:
    found = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.7)
    return found[0] if found else None


def _note(key: str, prefix: str, near: str | None) -> str:
    hint = f"; did you mean {prefix}{near}?" if near else ""
    return f"unknown key '{prefix}{key}' is ignored{hint}"
