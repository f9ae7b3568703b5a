"""SOL-ExecBench files: valid ones round-trip; each kind of malformed file gets a named error."""

import json
from pathlib import Path
from typing import Any

import pytest

from kernelarc.errors import ProblemFormatError
from kernelarc.problems.files import load_definition, load_problem, load_solution, load_workloads
from kernelarc.schema import Definition, Solution, Workload

AXPBY: dict[str, Any] = {
    "name": "axpby_h64",
    "op_type": "elementwise",
    "axes": {
        "B": {"type": "var"},
        "H": {"type": "const", "value": 64},
        "N": {"type": "expr", "expression": "B * H"},
    },
    "inputs": {
        "x": {"shape": ["B", "H"], "dtype": "bfloat16"},
        "y": {"shape": ["B", "H"], "dtype": "bfloat16"},
        "alpha": {"shape": None, "dtype": "float32"},
    },
    "outputs": {
        "out": {"shape": ["B", "H"], "dtype": "bfloat16"},
        "flat": {"shape": ["N"], "dtype": "float32"},
    },
    "reference": (
        "import torch\n\ndef run(x, y, alpha):\n"
        "    o = alpha * x.float() + y.float()\n    return o.to(torch.bfloat16), o.reshape(-1)\n"
    ),
    "constraints": ["B <= 4096"],  # documented upstream but not modelled: ignored, as upstream
}

WORKLOADS = [
    {"uuid": "w1", "axes": {"B": 8}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}}},
    {
        "uuid": "w2",
        "axes": {"B": 32},
        "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 2}},
        "tolerance": {"max_atol": 0.02, "required_matched_ratio": 0.999},
    },
]

SOLUTION: dict[str, Any] = {
    "name": "axpby_v1",
    "definition": "axpby_h64",
    "author": "tests",
    "spec": {
        "languages": ["pytorch"],
        "target_hardware": ["LOCAL"],
        "entry_point": "kernel.py::run",
        "destination_passing_style": False,
    },
    "sources": [{"path": "kernel.py", "content": "def run(x, y, alpha):\n    return x, y\n"}],
}


def _write_problem(root: Path, definition: dict[str, Any], workloads: list[Any]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition))
    (root / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return root


def test_valid_problem_round_trips(tmp_path: Path) -> None:
    problem = load_problem(_write_problem(tmp_path / "p", AXPBY, WORKLOADS))
    assert problem.name == "axpby_h64"
    assert [w.uuid for w in problem.workloads] == ["w1", "w2"]
    assert problem.workloads[0].tolerance.max_atol == 0.01  # default applied
    assert problem.workloads[1].tolerance.required_matched_ratio == 0.999
    again = Definition.model_validate_json(problem.definition.model_dump_json())
    assert again == problem.definition
    assert problem.definition.resolve_axes({"B": 3}) == {"B": 3, "H": 64, "N": 192}
    wl = Workload.model_validate_json(problem.workloads[1].model_dump_json())
    assert wl == problem.workloads[1]


def test_valid_solution_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(SOLUTION))
    solution = load_solution(path)
    assert Solution.model_validate_json(solution.model_dump_json()) == solution
    assert solution.spec.entry_symbol == "run"


def test_solution_empty_content_is_read_from_sibling_file(tmp_path: Path) -> None:
    data = json.loads(json.dumps(SOLUTION))
    data["sources"][0]["content"] = ""
    (tmp_path / "kernel.py").write_text("def run(x, y, alpha):\n    return x\n")
    (tmp_path / "solution.json").write_text(json.dumps(data))
    assert "return x" in load_solution(tmp_path / "solution.json").sources[0].content


def _mutated(base: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        pytest.param(["name"], _DELETE, "name: Field required", id="missing-name"),
        pytest.param(["inputs", "x", "dtype"], "uint8", "inputs.x.dtype", id="unknown-dtype"),
        pytest.param(["axes", "N", "expression"], "B *", "not valid arithmetic", id="bad-expr"),
        pytest.param(
            ["axes", "N", "expression"], "B * Q", "undefined axes ['Q']", id="expr-unknown-axis"
        ),
        pytest.param(["axes", "H", "value"], -1, "axes.H.const.value", id="negative-const"),
        pytest.param(["axes", "H", "type"], "fixed", "axes.H", id="unknown-axis-type"),
        pytest.param(["inputs", "x", "shape"], ["B", "Z"], "'Z', which is not an axis", id="shape"),
        pytest.param(
            ["reference"], "def run(y, x, alpha):\n    pass\n", "must equal the input", id="params"
        ),
        pytest.param(
            ["reference"], "def main():\n    pass\n", "top-level function `run`", id="no-run"
        ),
        pytest.param(["reference"], "def run(x, y, alpha:\n", "does not parse", id="syntax"),
        pytest.param(["custom_inputs_entrypoint"], "make", "not a top-level function", id="custom"),
        pytest.param(
            ["outputs", "x"],
            {"shape": ["B"], "dtype": "float32"},
            "both input and output",
            id="overlap",
        ),
    ],
)
def test_malformed_definition_names_file_and_field(
    tmp_path: Path, path: list[Any], value: Any, expected: str
) -> None:
    target = tmp_path / "definition.json"
    target.write_text(json.dumps(_mutated(AXPBY, path, value)))
    with pytest.raises(ProblemFormatError) as info:
        load_definition(target)
    text = str(info.value)
    assert str(target) in text
    assert expected in text


def test_bad_json_gives_position(tmp_path: Path) -> None:
    target = tmp_path / "definition.json"
    target.write_text('{"name": "x",, }')
    with pytest.raises(ProblemFormatError, match=r"definition\.json: not valid JSON .* column"):
        load_definition(target)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProblemFormatError, match=r"definition\.json: file not found"):
        load_problem(tmp_path)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            '{"uuid": "w9", "axes": {}}', "var axes ['B'] are not bound", id="unbound-axis"
        ),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1, "Q": 2}}', "['Q'] are not var axes", id="extra"
        ),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1}, "inputs": {"z": {"type": "random"}}}',
            "['z'] are not inputs",
            id="input",
        ),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1}, "inputs": {"x": {"type": "magic"}}}',
            "inputs.x",
            id="kind",
        ),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1}, '
            '"inputs": {"x": {"type": "custom"}, "y": {"type": "random"}}}',
            "either all `custom`",
            id="mixed",
        ),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1}, "inputs": {"x": {"type": "custom"}}}',
            "need the definition's custom_inputs_entrypoint",
            id="custom-no-entry",
        ),
        pytest.param('{"uuid": "w1", "axes": {"B": 1}}', "duplicate workload uuid", id="dup"),
        pytest.param('{"uuid": "w9" "axes": {}}', "not valid JSON", id="json"),
        pytest.param('{"axes": {"B": 1}}', "uuid: Field required", id="no-uuid"),
        pytest.param(
            '{"uuid": "w9", "axes": {"B": 1}, "tolerance": {"max_atol": -1}}',
            "tolerance.max_atol",
            id="tol",
        ),
    ],
)
def test_malformed_workload_names_line(tmp_path: Path, line: str, expected: str) -> None:
    definition = Definition.model_validate(AXPBY)
    target = tmp_path / "workload.jsonl"
    target.write_text(json.dumps(WORKLOADS[0]) + "\n\n" + line + "\n")
    with pytest.raises(ProblemFormatError) as info:
        load_workloads(target, definition)
    assert f"{target}:3:" in str(info.value)
    assert expected in str(info.value)


def test_empty_workload_file(tmp_path: Path) -> None:
    target = tmp_path / "workload.jsonl"
    target.write_text("\n")
    with pytest.raises(ProblemFormatError, match="no workloads"):
        load_workloads(target, Definition.model_validate(AXPBY))


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        pytest.param(
            ["spec", "entry_point"], "main.py::run", "not among the sources", id="entry-missing"
        ),
        pytest.param(
            ["spec", "entry_point"], "kernel.py", "must look like 'file.py::run'", id="entry-form"
        ),
        pytest.param(
            ["spec", "entry_point"], "kernel.cu::run", "must be a .py file", id="entry-suffix"
        ),
        pytest.param(["sources", 0, "path"], "/etc/kernel.py", "is absolute", id="absolute"),
        pytest.param(["sources", 0, "path"], "../kernel.py", "contains '..'", id="dotdot"),
        pytest.param(
            ["sources", 0, "path"], "a/../../kernel.py", "contains '..'", id="dotdot-inner"
        ),
        pytest.param(["sources", 0, "content"], "", "sources.0.content", id="empty-content"),
        pytest.param(
            ["spec", "languages"], ["pytorch", "cuda_cpp"], "mixes Python", id="mixed-langs"
        ),
        pytest.param(["spec", "languages"], ["fortran"], "spec.languages.0", id="unknown-lang"),
        pytest.param(
            ["spec", "target_hardware"], ["local"], "spec.target_hardware.0", id="lowercase-hw"
        ),
        pytest.param(["sources"], [], "sources", id="no-sources"),
    ],
)
def test_malformed_solution_names_field(
    tmp_path: Path, path: list[Any], value: Any, expected: str
) -> None:
    target = tmp_path / "solution.json"
    target.write_text(json.dumps(_mutated(SOLUTION, path, value)))
    with pytest.raises(ProblemFormatError) as info:
        load_solution(target)
    assert str(target) in str(info.value)
    assert expected in str(info.value)


def test_duplicate_source_paths_rejected(tmp_path: Path) -> None:
    data = json.loads(json.dumps(SOLUTION))
    data["sources"].append(dict(data["sources"][0]))
    target = tmp_path / "solution.json"
    target.write_text(json.dumps(data))
    with pytest.raises(ProblemFormatError, match="duplicate source paths"):
        load_solution(target)


def test_content_hash_ignores_cosmetic_whitespace() -> None:
    base = Solution.model_validate(SOLUTION)
    spaced = _mutated(
        SOLUTION, ["sources", 0, "content"], "def run(x, y, alpha):   \n\n    return x, y\n\n"
    )
    changed = _mutated(
        SOLUTION, ["sources", 0, "content"], "def run(x, y, alpha):\n    return y, x\n"
    )
    assert Solution.model_validate(spaced).content_hash() == base.content_hash()
    assert Solution.model_validate(changed).content_hash() != base.content_hash()
