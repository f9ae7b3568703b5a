"""The built-in problem set: every problem loads, its reference runs, and names resolve."""

import shutil
from pathlib import Path

import pytest
import torch

from kernelarc.errors import ConfigError, ProblemFormatError
from kernelarc.problems.builtin_set import builtin_dir, builtin_names, resolve_problem
from kernelarc.problems.files import Problem

EXPECTED = {
    "silu_and_mul": "activation",
    "rmsnorm": "rmsnorm",
    "add_layernorm": "layernorm",
    "softmax": "softmax",
    "gemm_bias_gelu": "gemm",
    "rope": "rope",
    "rmsnorm_backward": "rmsnorm_backward",
}
NAMES = sorted(EXPECTED)


def test_builtin_names_are_the_seven_problems() -> None:
    assert builtin_names() == NAMES
    assert all((builtin_dir() / n / "definition.json").is_file() for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("workload_file", ["workload.jsonl", "workload_gpu.jsonl"])
def test_problem_loads_with_both_workload_files(name: str, workload_file: str) -> None:
    problem = resolve_problem(name, workload_file)
    definition = problem.definition
    assert problem.name == name
    assert definition.op_type == EXPECTED[name]
    assert definition.description
    assert len(problem.workloads) >= 3
    assert len({w.uuid for w in problem.workloads}) == len(problem.workloads)
    for workload in problem.workloads:
        assert workload.tolerance.max_atol > 0
        assert workload.tolerance.max_rtol > 0


def _input_elements(problem: Problem) -> list[int]:
    definition = problem.definition
    sizes = []
    for workload in problem.workloads:
        axes = definition.resolve_axes(dict(workload.axes))
        total = 0
        for spec in definition.inputs.values():
            shape = definition.shape_of(spec, axes) or ()
            total += int(torch.Size(shape).numel())
        sizes.append(total)
    return sizes


@pytest.mark.parametrize("name", NAMES)
def test_cpu_workloads_are_small_and_gpu_workloads_large(name: str) -> None:
    cpu = _input_elements(resolve_problem(name))
    gpu = _input_elements(resolve_problem(name, "workload_gpu.jsonl"))
    assert max(cpu) <= 2_000_000
    assert min(gpu) >= 10 * max(cpu)


def _run_reference(problem: Problem, axes_values: dict[str, int]) -> None:
    """Run the reference on random inputs and check outputs against the declared specs."""
    definition = problem.definition
    axes = definition.resolve_axes(axes_values)
    namespace: dict[str, object] = {}
    exec(compile(definition.reference, f"<{definition.name} reference>", "exec"), namespace)
    gen = torch.Generator().manual_seed(0)
    inputs = []
    for spec in definition.inputs.values():
        shape = definition.shape_of(spec, axes)
        assert shape is not None
        dtype = getattr(torch, spec.dtype.value)
        inputs.append(torch.randn(shape, generator=gen).to(dtype))
    result = namespace["run"](*inputs)  # type: ignore[operator]
    outputs = result if isinstance(result, tuple) else (result,)
    assert len(outputs) == len(definition.outputs)
    for (out_name, spec), out in zip(definition.outputs.items(), outputs, strict=True):
        assert tuple(out.shape) == definition.shape_of(spec, axes), out_name
        assert out.dtype == getattr(torch, spec.dtype.value), out_name
        assert torch.isfinite(out.float()).all(), out_name


@pytest.mark.parametrize("name", NAMES)
def test_reference_runs_on_every_cpu_workload(name: str) -> None:
    problem = resolve_problem(name)
    for workload in problem.workloads:
        _run_reference(problem, dict(workload.axes))


def test_references_compute_what_the_descriptions_say() -> None:
    """Spot-check the math of a few references against independent formulas."""
    ns: dict[str, dict[str, object]] = {}
    for name in NAMES:
        ns[name] = {}
        exec(resolve_problem(name).definition.reference, ns[name])
    x = torch.randn(4, 2 * 2048).to(torch.bfloat16)
    out = ns["silu_and_mul"]["run"](x)  # type: ignore[operator]
    gate, up = x.float()[:, :2048], x.float()[:, 2048:]
    torch.testing.assert_close(
        out.float(), gate / (1 + torch.exp(-gate)) * up, atol=2e-2, rtol=2e-2
    )

    q = torch.randn(3, 32, 128).to(torch.bfloat16)
    k = torch.randn(3, 8, 128).to(torch.bfloat16)
    ang = torch.rand(3, 64)
    q_out, _ = ns["rope"]["run"](q, k, ang.cos(), ang.sin())  # type: ignore[operator]
    # Rotating a (x1, x2) pair by angle a keeps its norm.
    pair_in = q.float()[..., :64] ** 2 + q.float()[..., 64:] ** 2
    pair_out = q_out.float()[..., :64] ** 2 + q_out.float()[..., 64:] ** 2
    torch.testing.assert_close(pair_out, pair_in, atol=5e-2, rtol=2e-2)

    a, w, b = (t.bfloat16() for t in (torch.randn(5, 16), torch.randn(7, 16), torch.randn(7)))
    y = a.float() @ w.float().T + b.float()
    tanh_gelu = 0.5 * y * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (y + 0.044715 * y**3)))
    got = ns["gemm_bias_gelu"]["run"](a, w, b)  # type: ignore[operator]
    torch.testing.assert_close(got.float(), tanh_gelu, atol=2e-2, rtol=2e-2)

    # The backward equals autograd through the forward reference, computed in float32.
    x = torch.randn(6, 256).to(torch.bfloat16)
    weight = torch.randn(256).to(torch.bfloat16)
    grad = torch.randn(6, 256).to(torch.bfloat16)
    xf = x.float().requires_grad_()
    wf = weight.float().requires_grad_()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * wf
    y.backward(grad.float())
    assert xf.grad is not None and wf.grad is not None
    dx, dw = ns["rmsnorm_backward"]["run"](grad, x, weight)  # type: ignore[operator]
    torch.testing.assert_close(dx.float(), xf.grad, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(dw.float(), wf.grad, atol=2e-2, rtol=2e-2)


def test_resolve_by_path(tmp_path: Path) -> None:
    copy = tmp_path / "my_rmsnorm"
    shutil.copytree(builtin_dir() / "rmsnorm", copy)
    problem = resolve_problem(str(copy))
    assert problem.path == copy
    assert problem.name == "rmsnorm"
    gpu = resolve_problem(str(copy), "workload_gpu.jsonl")
    assert gpu.workloads != problem.workloads


def test_a_directory_wins_over_a_builtin_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(builtin_dir() / "softmax", tmp_path / "rmsnorm")
    monkeypatch.chdir(tmp_path)
    assert resolve_problem("rmsnorm").name == "softmax"


def test_unknown_name_lists_builtins_and_mentions_paths() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_problem("no_such_problem")
    text = str(info.value)
    assert "no_such_problem" in text
    assert all(name in text for name in NAMES)
    assert "path" in text


def test_a_broken_problem_dir_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "definition.json").write_text("{}")
    with pytest.raises(ProblemFormatError):
        resolve_problem(str(tmp_path))
