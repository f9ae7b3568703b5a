"""`kernelarc problems import kernelbench` end to end, on KernelBench-style samples written for
KernelArc: what converts, what is refused and why, and that each converted reference is the
KernelBench model itself and passes as its own solution in `kernelarc eval` on the CPU."""

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from conftest import SAMPLES, Imported, run_kernelarc

from kernelarc.guard.static_rules import blocking, scan_solution
from kernelarc.problems.files import Problem, load_problem
from kernelarc.problems.reference import reference_solution
from kernelarc.runner.inputs import generate_inputs, seed_everything
from kernelarc.runner.staging import load_reference

CONVERTED = {
    "kb_l1_1_leakyrelu": "level1/1_LeakyReLU.py",
    "kb_l1_2_rmsnorm_over_features": "level1/2_RMSNorm_over_features.py",
    "kb_l1_5_hinge_style_loss": "level1/5_Hinge_style_loss.py",
    "kb_l2_1_linear_scale_tanh": "level2/1_Linear_Scale_Tanh.py",
    "kb_l2_2_conv2d_batchnorm_biasadd": "level2/2_Conv2d_BatchNorm_BiasAdd.py",
}
FAILED = {
    "syntax_error": ["level1/3_Broken_syntax.py"],
    "init_failed": ["level1/4_Raises_in_init.py"],
    "nondeterministic": ["level2/3_Linear_Dropout.py"],
}


def test_samples_convert_and_failures_are_listed_with_reasons(imported: Imported) -> None:
    assert imported.proc.returncode == 0, imported.proc.stderr
    report = imported.report
    assert report["converted"] == len(CONVERTED) and report["failed"] == 3
    assert {f["name"]: f["source"] for f in report["files"] if f["converted"]} == CONVERTED
    assert report["failures_by_cause"] == FAILED
    assert sorted(p.name for p in imported.out.iterdir()) == sorted(
        [*CONVERTED, "import_report.json"]
    )
    reasons = {f["source"]: f["reason"] for f in report["files"] if not f["converted"]}
    assert "line 12" in reasons["level1/3_Broken_syntax.py"]
    assert "features must be a multiple of 3" in reasons["level1/4_Raises_in_init.py"]
    assert "dropout (p=0.5)" in reasons["level2/3_Linear_Dropout.py"]
    out = imported.proc.stdout
    assert "[nondeterministic]" in out and "converted 5 of 8 file(s)" in out


def _problem(imported: Imported, name: str, workloads: str = "workload.jsonl") -> Problem:
    return load_problem(imported.out / name, workloads)


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_converted_problems_load_with_cpu_and_gpu_workloads(imported: Imported, name: str) -> None:
    cpu, gpu = _problem(imported, name), _problem(imported, name, "workload_gpu.jsonl")
    definition = cpu.definition
    assert definition.custom_inputs_entrypoint == "make_inputs"
    assert CONVERTED[name] in (definition.description or "")
    for workload in (*cpu.workloads, *gpu.workloads):
        assert {spec.type for spec in workload.inputs.values()} == {"custom"}
        assert set(workload.inputs) == set(definition.inputs)
    assert gpu.workloads[0].uuid.startswith(f"{name}-kernelbench")
    assert 1 <= len(cpu.workloads) <= 3


def test_equal_size_constants_become_separate_axes(imported: Imported) -> None:
    problem = _problem(imported, "kb_l1_2_rmsnorm_over_features", "workload_gpu.jsonl")
    definition = problem.definition
    assert definition.op_type == "norm"
    assert definition.inputs["x"].shape == ["batch_size", "features", "dim1", "dim2"]
    assert definition.outputs["output"].shape == ["batch_size", "features", "dim1", "dim2"]
    assert definition.resolve_axes(dict(problem.workloads[0].axes)) == {
        "batch_size": 8,
        "features": 32,
        "dim1": 32,
        "dim2": 32,
    }


def test_conv_parameters_are_inputs_and_output_sizes_are_bound_per_workload(
    imported: Imported,
) -> None:
    definition = _problem(imported, "kb_l2_2_conv2d_batchnorm_biasadd").definition
    assert definition.op_type == "fused_conv"
    assert list(definition.inputs) == [
        "x",
        "bias",
        "conv_weight",
        "conv_bias",
        "bn_weight",
        "bn_bias",
        "bn_running_mean",
        "bn_running_var",
        "bn_num_batches_tracked",
    ]
    assert definition.inputs["conv_weight"].shape == [
        "out_channels",
        "in_channels",
        "kernel_size",
        "kernel_size",
    ]
    assert definition.inputs["bias"].shape == ["out_channels", "1", "1"]
    assert definition.inputs["bn_num_batches_tracked"].shape == []
    assert definition.inputs["bn_num_batches_tracked"].dtype == "int64"
    assert definition.outputs["output"].shape == [
        "batch_size",
        "out_channels",
        "output_dim2",
        "output_dim3",
    ]
    for file in ("workload.jsonl", "workload_gpu.jsonl"):
        for workload in _problem(imported, "kb_l2_2_conv2d_batchnorm_biasadd", file).workloads:
            axes = definition.resolve_axes(dict(workload.axes))
            assert axes["output_dim2"] == axes["height"] - 2
            assert axes["output_dim3"] == axes["width"] - 2
            assert axes["kernel_size"] == 3


def test_tied_constants_and_a_0d_output(imported: Imported) -> None:
    definition = _problem(imported, "kb_l1_5_hinge_style_loss").definition
    assert list(definition.axes) == ["batch_size"]
    assert definition.inputs["scores"].shape == ["batch_size", "batch_size"]
    assert definition.inputs["signs"].shape == ["batch_size"]
    assert definition.outputs["output"].shape == []


def test_cpu_workloads_are_small(imported: Imported) -> None:
    for name in CONVERTED:
        problem = _problem(imported, name)
        for workload in problem.workloads:
            axes = problem.definition.resolve_axes(dict(workload.axes))
            specs = [*problem.definition.inputs.values(), *problem.definition.outputs.values()]
            elements = sum(math.prod(problem.definition.shape_of(s, axes) or ()) for s in specs)
            assert elements * 4 <= 4 << 20, (name, workload.uuid)


def _import_sample(label: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kb_sample_{abs(hash(label))}", SAMPLES / label)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference_inputs(
    problem: Problem, tmp_path: Path, workload_index: int = 0
) -> tuple[ModuleType, list[Any]]:
    reference = load_reference(problem.definition, tmp_path)
    seed_everything(200)
    inputs = generate_inputs(
        problem.definition, problem.workloads[workload_index], "cpu", custom=reference.make_inputs
    )
    return reference, inputs


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_reference_equals_the_kernelbench_model_with_the_same_parameters(
    imported: Imported, name: str, tmp_path: Path
) -> None:
    # The GPU file's first workload is the sample's own sizes, so the sample module can be run
    # exactly as KernelBench runs it: Model(*get_init_inputs())(*get_inputs()).
    problem = _problem(imported, name, "workload_gpu.jsonl")
    reference, inputs = _reference_inputs(problem, tmp_path)
    torch.manual_seed(0)
    expected_out = reference.run(*[v.clone() for v in inputs])
    sample = _import_sample(CONVERTED[name])
    model = sample.Model(*sample.get_init_inputs())
    state = [*model.parameters(), *model.buffers()]
    forward = inputs[: len(inputs) - len(state)]
    assert len(forward) == len(sample.get_inputs())
    with torch.no_grad():
        for tensor, value in zip(state, inputs[len(forward) :], strict=True):
            tensor.copy_(value)
        direct = model(*[v.clone() for v in forward])
    assert torch.equal(expected_out, direct)


def test_torch_compile_of_a_converted_reference_runs_and_agrees(
    imported: Imported, tmp_path: Path
) -> None:
    # The compiler agent and every torch.compile baseline compile the reference's run(); Dynamo
    # resolves the KernelBench model's module by name, so the file must live in a real module.
    problem = _problem(imported, "kb_l2_1_linear_scale_tanh")
    reference, inputs = _reference_inputs(problem, tmp_path)
    expected = reference.run(*[v.clone() for v in inputs])
    torch._dynamo.reset()
    compiled = torch.compile(reference.run, backend="eager", fullgraph=False)
    assert torch.equal(compiled(*[v.clone() for v in inputs]), expected)


def test_inputs_keep_kernelbench_distributions(imported: Imported, tmp_path: Path) -> None:
    _, (x,) = _reference_inputs(_problem(imported, "kb_l1_1_leakyrelu"), tmp_path / "a")
    assert x.min() < 0  # torch.randn in get_inputs
    _, (x,) = _reference_inputs(_problem(imported, "kb_l1_2_rmsnorm_over_features"), tmp_path / "b")
    assert x.min() >= 0 and x.max() < 1  # torch.rand
    problem = _problem(imported, "kb_l2_1_linear_scale_tanh")
    _, (x, weight, _bias) = _reference_inputs(problem, tmp_path / "c")
    in_features = weight.shape[1]
    assert weight.abs().max() <= 1 / math.sqrt(in_features)  # nn.Linear's kaiming-uniform init
    assert weight.std() > 0.25 / math.sqrt(in_features)
    problem = _problem(imported, "kb_l2_2_conv2d_batchnorm_biasadd")
    _, values = _reference_inputs(problem, tmp_path / "d")
    named = dict(zip(problem.definition.inputs, values, strict=True))
    assert torch.equal(named["bn_running_var"], torch.ones_like(named["bn_running_var"]))
    assert torch.equal(named["bn_weight"], torch.ones_like(named["bn_weight"]))
    assert named["bn_num_batches_tracked"].item() == 0


def test_make_inputs_draws_from_the_evaluators_rng_without_reseeding(
    imported: Imported, tmp_path: Path
) -> None:
    problem = _problem(imported, "kb_l2_1_linear_scale_tanh")
    reference, first = _reference_inputs(problem, tmp_path)
    again = generate_inputs(
        problem.definition, problem.workloads[0], "cpu", custom=reference.make_inputs
    )
    assert not torch.equal(first[0], again[0])  # the stream moved on
    seed_everything(200)
    replay = generate_inputs(
        problem.definition, problem.workloads[0], "cpu", custom=reference.make_inputs
    )
    assert all(torch.equal(a, b) for a, b in zip(first, replay, strict=True))


def _solution(problem: Problem, path: Path, source: str) -> Path:
    solution = {
        "name": f"{problem.name}_candidate",
        "definition": problem.name,
        "author": "kernelarc-tests",
        "spec": {
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "destination_passing_style": False,
        },
        "sources": [{"path": "kernel.py", "content": source}],
    }
    path.write_text(json.dumps(solution))
    return path


def _eval_statuses(problem: Problem, solution: Path, cwd: Path) -> tuple[list[str], str]:
    proc = run_kernelarc(
        ["eval", str(problem.path), "--solution", str(solution), "--device", "cpu", "--json"], cwd
    )
    traces = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return [t["evaluation"]["status"] for t in traces], proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_reference_passes_as_its_own_solution_in_kernelarc_eval(
    imported: Imported, name: str, tmp_path: Path
) -> None:
    problem = _problem(imported, name)
    solution = _solution(problem, tmp_path / "solution.json", problem.definition.reference)
    statuses, stderr = _eval_statuses(problem, solution, tmp_path)
    assert statuses == ["PASSED"] * len(problem.workloads), (statuses, stderr)


HAND_WRITTEN = """
import torch


def run(x, linear_weight, linear_bias):
    return torch.tanh(torch.nn.functional.linear(x, linear_weight, linear_bias) * SCALE)
"""


@pytest.mark.slow
def test_a_hand_written_kernel_is_judged_on_the_converted_problem(
    imported: Imported, tmp_path: Path
) -> None:
    # What a candidate sees: plain tensors named as in the definition, KernelBench's numerics.
    problem = _problem(imported, "kb_l2_1_linear_scale_tanh")
    right = _solution(problem, tmp_path / "right.json", HAND_WRITTEN.replace("SCALE", "0.5"))
    statuses, stderr = _eval_statuses(problem, right, tmp_path)
    assert statuses == ["PASSED"] * len(problem.workloads), (statuses, stderr)
    wrong = _solution(problem, tmp_path / "wrong.json", HAND_WRITTEN.replace("SCALE", "0.6"))
    statuses, _ = _eval_statuses(problem, wrong, tmp_path)
    assert statuses == ["INCORRECT_NUMERICAL"] * len(problem.workloads)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    cases = [
        ([str(tmp_path / "missing")], "no such file or folder"),
        ([str(SAMPLES), "--levels", "one"], "--levels"),
        ([str(SAMPLES), "--only", "nothing-matches-this"], "no KernelBench .py files"),
    ]
    for args, words in cases:
        proc = run_kernelarc(
            ["problems", "import", "kernelbench", *args, "--out", str(tmp_path / "o")], tmp_path
        )
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert words in proc.stderr
    proc = run_kernelarc(["problems", "import", "kernelbench", str(SAMPLES)], tmp_path)
    assert proc.returncode == 2 and "--out" in proc.stderr


def test_nothing_converted_exits_1_with_a_report(tmp_path: Path) -> None:
    out = tmp_path / "o"
    proc = run_kernelarc(
        [
            "problems",
            "import",
            "kernelbench",
            str(SAMPLES / "level1" / "3_Broken_syntax.py"),
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads((out / "import_report.json").read_text())
    assert report["converted"] == 0 and report["failures_by_cause"] == {
        "syntax_error": ["level1/3_Broken_syntax.py"]
    }


def test_cli_help_and_import_stay_light(tmp_path: Path) -> None:
    proc = run_kernelarc(["problems", "import", "kernelbench", "--help"], tmp_path)
    assert proc.returncode == 0 and "examples:" in proc.stdout
    code = (
        "import sys, kernelarc.cli\n"
        "kernelarc.cli.build_parser()\n"
        "import kernelarc.problems.kernelbench.importer\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    check = __import__("subprocess").run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_converted_reference_passes_the_guards_static_scan(imported: Imported, name: str) -> None:
    # Every candidate derived from the reference (torch.compile wrappers, rewrites, generated
    # kernels with the reference as fallback) carries its text: a blocking finding in it would
    # reject them all before evaluation.
    definition = _problem(imported, name).definition
    findings = scan_solution(reference_solution(definition))
    assert blocking(findings) == [], findings
    assert "exec(" not in definition.reference and "sys.modules" not in definition.reference


def test_the_model_class_lives_in_the_reference_module(imported: Imported, tmp_path: Path) -> None:
    # torch.compile (Dynamo) looks the model's module up by name: it must be the reference's.
    problem = _problem(imported, "kb_l1_1_leakyrelu")
    reference, inputs = _reference_inputs(problem, tmp_path)
    reference.run(*inputs)
    (model,) = reference._KERNELBENCH._models.values()
    assert type(model).__module__ == reference.__name__
    assert sys.modules[reference.__name__] is reference
