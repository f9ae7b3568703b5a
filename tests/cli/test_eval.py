"""`kernelarc eval` as a new user meets it: checking a new problem dir with --reference, a
solution that does not compile, a solution for another problem; run piped, as from a script."""

import json
from pathlib import Path

from tests.kernelarc_command import copy_vector_add, leftovers, run_kernelarc


def _solution(tmp_path: Path, definition: str, content: str) -> Path:
    path = tmp_path / "solution.json"
    spec = {
        "languages": ["pytorch"],
        "target_hardware": ["LOCAL"],
        "entry_point": "kern.py::run",
        "destination_passing_style": False,
    }
    data = {
        "name": "s",
        "definition": definition,
        "author": "me",
        "spec": spec,
        "sources": [{"path": "kern.py", "content": content}],
    }
    path.write_text(json.dumps(data))
    return path


def test_reference_checks_a_new_problem_dir_given_by_its_definition_json(
    tmp_path: Path, tmpdir_: Path
) -> None:
    folder = copy_vector_add(tmp_path)
    data = json.loads((folder / "definition.json").read_text())
    data["op_typ"] = "elementwise"
    (folder / "definition.json").write_text(json.dumps(data))
    args = ["eval", str(folder / "definition.json"), "--reference", "--device", "cpu"]
    proc = run_kernelarc(args, tmp_path, tmpdir_)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "unknown key 'op_typ' is ignored; did you mean op_type?" in proc.stderr
    lines = proc.stdout.splitlines()
    # Plain, complete lines off a terminal: no box drawing, nothing cut with an ellipsis.
    assert lines[0] == "kernelarc eval"
    assert lines[1].split() == [
        "workload", "status", "latency", "ms", "reference", "ms", "speedup", "[CI]", "max",
        "abs", "err",
    ]  # fmt: skip
    rows = [line.split() for line in lines[2:4]]
    assert [r[:2] for r in rows] == [["add-n16", "PASSED"], ["add-n1000", "PASSED"]]
    # each speedup carries its interval: "1.02x [0.98, 1.05]", or, when the official speedup is
    # outside the interleaved interval, "2.16x (interleaved 1.06x [0.97, 1.16])"
    assert all(
        r[4].endswith("x")
        and (r[5:7] if r[5].startswith("[") else r[7:9])[0].startswith("[")
        and (r[5:7] if r[5].startswith("[") else r[7:9])[1].rstrip(")").endswith("]")
        for r in rows
    )
    assert not any(ch in proc.stdout for ch in "…│┃━")
    assert "a pipeline check, not kernel performance" in lines[4]
    assert "[CI]: interleaved ABBA blocks (cpu_monotonic), bootstrap 95% CI" in proc.stdout
    # The eval's host lock and sandbox dirs are gone once it exits.
    assert leftovers(tmpdir_) == []


def test_a_syntax_error_is_one_compile_error_naming_the_solutions_file_and_line(
    tmp_path: Path, tmpdir_: Path
) -> None:
    folder = copy_vector_add(tmp_path)
    solution = _solution(
        tmp_path, "vector_add_f32", "import torch\n\ndef run(x, y):\n    z = = x\n"
    )
    proc = run_kernelarc(["eval", str(folder), "--solution", str(solution)], tmp_path, tmpdir_)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("COMPILE_ERROR") == 2  # the two workloads' rows
    assert out.count("kern.py line 4: SyntaxError: invalid syntax") == 1
    assert "2 workloads (add-n16, add-n1000): kern.py line 4" in out
    assert "z = = x" in out
    assert "Traceback" not in out + proc.stderr
    assert "kernelarc_eval_" not in out, "the staging path is not the user's file"


def test_a_solution_for_another_definition_is_refused_up_front(tmp_path: Path) -> None:
    folder = copy_vector_add(tmp_path)
    solution = _solution(tmp_path, "rmsnorm", "def run(x, y):\n    return x + y\n")
    proc = run_kernelarc(["eval", str(folder), "--solution", str(solution)], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is for definition 'rmsnorm' but the problem is 'vector_add_f32'" in proc.stderr
    assert proc.stdout == ""


def test_eval_help_documents_reference_and_device(tmp_path: Path) -> None:
    proc = run_kernelarc(["eval", "--help"], tmp_path)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--reference evaluate the definition's own reference as the solution" in text
    assert "--device {auto,cpu,cuda} where to run: cuda" in text
    assert "not performance" in text
