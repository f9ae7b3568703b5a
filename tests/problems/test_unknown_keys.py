"""Problem files with keys no field reads, and malformed files: named errors and warnings.

The wire models ignore unknown keys (official files carry keys nobody reads), so without these
checks a typo in `tolerance` left the default in force and a workload PASSED that should not.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelarc.errors import ProblemFormatError
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.problems.files import load_problem

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"


def _problem(
    tmp_path: Path, definition: dict[str, Any] | None = None, lines: tuple[str, ...] = ()
) -> Path:
    folder = tmp_path / "prob"
    shutil.copytree(SAMPLE, folder)
    if definition is not None:
        (folder / "definition.json").write_text(json.dumps(definition, indent=2))
    if lines:
        (folder / "workload.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def _definition() -> dict[str, Any]:
    data = json.loads((SAMPLE / "definition.json").read_text())
    assert isinstance(data, dict)
    return data


def test_unknown_definition_keys_are_named_with_the_nearest_valid_key(tmp_path: Path) -> None:
    data = _definition()
    data["op_typ"] = "elementwise"
    data["constraints"] = ["N <= 4096"]  # documented upstream, read by nobody: silent
    axis = next(iter(data["axes"]))
    data["axes"][axis]["descripton"] = "length"
    problem = load_problem(_problem(tmp_path, data))
    where = str(tmp_path / "prob" / "definition.json")
    assert problem.warnings == (
        f"{where}: unknown key 'op_typ' is ignored; did you mean op_type?",
        f"{where}: unknown key 'axes.{axis}.descripton' is ignored; "
        f"did you mean axes.{axis}.description?",
    )


def test_a_typo_inside_tolerance_is_refused(tmp_path: Path) -> None:
    line = json.dumps(
        {"uuid": "w", "axes": {"N": 16}, "tolerance": {"requried_matched_ratio": 0.5}}
    )
    folder = _problem(tmp_path, lines=(line,))
    with pytest.raises(ProblemFormatError) as err:
        load_problem(folder)
    message = str(err.value)
    assert f"{folder / 'workload.jsonl'}:1" in message
    assert "'tolerance.requried_matched_ratio'" in message
    assert "did you mean 'required_matched_ratio'?" in message


def test_a_misspelt_tolerance_or_inputs_key_is_refused_others_warned(tmp_path: Path) -> None:
    line = json.dumps({"uuid": "w", "axes": {"N": 16}, "tolerence": {}})
    with pytest.raises(ProblemFormatError, match="'tolerence': did you mean 'tolerance'"):
        load_problem(_problem(tmp_path, lines=(line,)))
    line = json.dumps({"uuid": "w", "axes": {"N": 16}, "schema_version": "v1", "axis": {}})
    problem = load_problem(_problem(tmp_path / "b", lines=(line,)))
    assert problem.warnings == (
        f"{tmp_path / 'b' / 'prob' / 'workload.jsonl'}:1: unknown key 'axis' is ignored; "
        "did you mean axes?",
    )


def test_json_errors_name_line_and_column(tmp_path: Path) -> None:
    folder = _problem(tmp_path)
    text = json.dumps(_definition(), indent=2)
    lines = text.splitlines()
    assert lines[1].startswith('  "name": ')
    lines[1] += ","  # two commas after the name: the error is on line 2
    (folder / "definition.json").write_text("\n".join(lines))
    with pytest.raises(
        ProblemFormatError, match=r"definition.json: not valid JSON at line 2, column 28"
    ):
        load_problem(folder)
    lines = ('{"uuid": "a", "axes": {"N": 16}}', '{"uuid": "b",, }')
    folder = _problem(tmp_path / "w", lines=lines)
    with pytest.raises(ProblemFormatError, match=r"workload.jsonl:2: not valid JSON at column 14"):
        load_problem(folder)


def test_a_workload_binding_an_unknown_axis_names_it(tmp_path: Path) -> None:
    folder = _problem(tmp_path, lines=(json.dumps({"uuid": "w", "axes": {"N": 16, "M": 3}}),))
    with pytest.raises(ProblemFormatError, match=r"\['M'\] are not var axes"):
        load_problem(folder)


def test_a_definition_json_path_means_its_folder(tmp_path: Path) -> None:
    folder = _problem(tmp_path)
    problem = resolve_problem(str(folder / "definition.json"))
    assert problem.path == folder
    assert problem.warnings == ()
