"""The Triton template library: matching from the definition, the knob-space API, rendering,
and every template's kernels checked against their references (interpreter on CPU, CUDA on a GPU).

Correctness on CPU runs in two ways: one candidate per built-in problem through the real
LocalSandbox and runner (the campaign's path), and more knob settings per template (the CUDA
default, a persistent/chunked variant) through the kernel checker in one subprocess, on each
problem's smallest workload, to keep the interpreter's cost small.
"""

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agent_checks import (
    FAMILY,
    SAMPLE_NAMES,
    SAMPLES,
    case_for,
    check_entry,
    edited_problem,
    run_checker,
    smallest_workload,
)

from kernelarc.agents import AgentContext, TritonTemplateAgent
from kernelarc.agents.triton.template_library import (
    TEMPLATES,
    KernelTemplate,
    Knobs,
    TemplateMatch,
    match_template,
    probe_shapes,
    render_source,
    template_named,
)
from kernelarc.guard import blocking, scan_solution
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.problems.files import Problem, load_problem
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalRequest, EvalStatus, TimingConfig

#: Module fixtures run every template variant through the interpreter and the runner.
pytestmark = pytest.mark.slow


def _problem(name: str, workloads: str = "workload.jsonl") -> Problem:
    if name in SAMPLE_NAMES:
        return load_problem(SAMPLES / name)
    return resolve_problem(name, workloads)


def _bound(problem: Problem) -> tuple[KernelTemplate, TemplateMatch]:
    found = match_template(problem)
    assert not isinstance(found, list), found
    return found


def _stress(template: KernelTemplate) -> Knobs:
    """A CPU setting off the default path: persistent grid, and chunked rows where there are."""
    partial = {"PERSISTENT": 2}
    if "BLOCK_H" in template.knob_names:
        partial |= {"BLOCK_H": 128, "ROWS": 4}
    if "ROWS" in template.knob_names and "BLOCK_H" not in template.knob_names:
        partial |= {"ROWS": 4}
    if template.family == "gemm_epilogue":
        partial = {"PERSISTENT": 1, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}
    return template.complete(partial, "cpu")


def _variants(template: KernelTemplate) -> dict[str, Knobs]:
    """The settings checked per problem: the CUDA default (run by the interpreter) and a stress
    variant."""
    return {"cuda-default": template.default_knobs("cuda"), "stress": _stress(template)}


# --- matching from the definition -----------------------------------------------------------


@pytest.mark.parametrize("name", [*builtin_names(), *SAMPLE_NAMES])
def test_exactly_one_template_applies_to_each_problem(name: str) -> None:
    definition = _problem(name).definition
    fits = [t.family for t in TEMPLATES if t.applies(definition) is None]
    assert fits == [FAMILY[name]]
    for template in TEMPLATES:
        why = template.applies(definition)
        assert why is None or (isinstance(why, str) and why), template.family


def test_probe_shapes_resolve_expression_axes_without_workloads() -> None:
    probes = probe_shapes(resolve_problem("silu_and_mul").definition)
    assert len(probes) == 2
    for shapes in probes:
        assert shapes["x"][1] == 2 * shapes["out"][1] == 2 * 2048
    assert probes[0]["x"][0] != probes[1]["x"][0]


def test_constants_and_roles_come_from_the_definition() -> None:
    template, match = _bound(_problem("add_rmsnorm"))
    assert template.family == "rmsnorm"
    constants = dict(match.constants)
    assert constants["HAS_RESIDUAL"] == "True" and constants["EPS"] == "1e-05"
    assert [r for r, _ in match.input_roles] == ["x", "residual", "weight"]
    _, match = _bound(_problem("linear_relu_kn"))
    constants = dict(match.constants)
    assert constants["B_IS_NK"] == "False" and constants["HAS_BIAS"] == "False"
    assert constants["ACTIVATION"] == "4" and constants["OUT_DTYPE"] == "torch.float16"
    _, match = _bound(_problem("gemm_bias_gelu"))
    assert dict(match.constants)["B_IS_NK"] == "True"
    assert dict(match.constants)["ACTIVATION"] == "2"
    _, match = _bound(_problem("geglu"))
    assert dict(match.constants)["ACTIVATION"] == "1"


@pytest.mark.parametrize(
    ("name", "family", "edit", "reason"),
    [
        (
            "rope",
            "rope",
            {
                "reference": "import torch\n\ndef run(q, k, cos, sin):\n"
                "    return q[..., ::2], k[..., ::2]\n"
            },
            "interleaved",
        ),
        (
            "rmsnorm",
            "rmsnorm",
            {
                "reference": "import torch\nEPS = 1e-6\n\ndef run(x, weight):\n"
                "    xf = x.float()\n    inv = torch.rsqrt(xf.pow(2).mean(-1,"
                " keepdim=True) + EPS)\n    return (xf * inv * (1 + weight."
                "float())).to(torch.bfloat16)\n"
            },
            "Gemma",
        ),
        (
            "gemm_bias_gelu",
            "gemm_epilogue",
            {
                "reference": "import torch\n\n"
                "def run(a, weight, bias):\n    return torch."
                "tanh(a @ weight.T + bias)\n"
            },
            "'tanh'",
        ),
        ("softmax", "softmax", {"op_type": "layernorm"}, "op_type 'layernorm'"),
        (
            "rmsnorm_backward",
            "rmsnorm_backward",
            {
                "reference": "import torch\n\ndef run("
                "grad_out, x, weight):\n    return "
                "torch.rsqrt(x), weight\n"
            },
            "eps",
        ),
    ],
)
def test_a_template_that_does_not_apply_says_why(
    tmp_path: Path, name: str, family: str, edit: dict, reason: str
) -> None:
    problem = edited_problem(tmp_path, name, edit)
    why = template_named(family).applies(problem.definition)
    assert why is not None and reason in why
    assert TritonTemplateAgent().propose(AgentContext(problem=problem)) is None


def test_a_definition_without_op_type_is_matched_on_structure(tmp_path: Path) -> None:
    problem = edited_problem(tmp_path, "softmax", {"op_type": None})
    template, _ = _bound(problem)
    assert template.family == "softmax"


# --- the knob-space API ---------------------------------------------------------------------


def test_knob_space_is_data_with_groups_and_docs() -> None:
    for template in TEMPLATES:
        for device in ("cpu", "cuda"):
            space = template.knob_space(device)
            assert list(space) == list(template.knob_names)
            assert all(values for values in space.values())
            default = template.default_knobs(device)
            assert set(default) == set(space)
            assert template.check_knobs(default, device) is None
        assert {d.group for d in template.dims} <= {"tile", "launch", "schedule", "precision"}
        assert all(d.doc for d in template.dims)
        assert {"NUM_WARPS", "PERSISTENT"} <= set(template.knob_names), template.family


def test_check_knobs_names_the_problem() -> None:
    gemm = template_named("gemm_epilogue")
    default = gemm.default_knobs("cuda")
    assert "missing knobs ['BLOCK_K']" in (
        gemm.check_knobs({k: v for k, v in default.items() if k != "BLOCK_K"}) or ""
    )
    assert "unknown knobs ['TILE']" in (gemm.check_knobs(default | {"TILE": 4}) or "")
    assert "power of two" in (gemm.check_knobs(default | {"BLOCK_M": 96}) or "")
    huge = default | {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "NUM_STAGES": 5}
    assert "B" in (gemm.check_knobs(huge, "cuda") or "")
    assert gemm.check_knobs(huge, "cpu") is None  # the interpreter has no shared-memory limit


def test_complete_fills_missing_knobs_from_the_default() -> None:
    template = template_named("rmsnorm")
    knobs = template.complete({"NUM_WARPS": 16}, "cuda")
    assert knobs == template.default_knobs("cuda") | {"NUM_WARPS": 16}


def test_render_refuses_a_bad_setting_and_a_foreign_match() -> None:
    template, match = _bound(resolve_problem("rmsnorm"))
    with pytest.raises(ValueError, match="power of two"):
        template.render(match, template.default_knobs("cuda") | {"ROWS": 3}, "x")
    _, other = _bound(resolve_problem("softmax"))
    with pytest.raises(ValueError, match="softmax match"):
        template.render(other, template.default_knobs("cuda"), "x")


@pytest.mark.parametrize("name", [*builtin_names(), *SAMPLE_NAMES])
def test_rendered_sources_parse_and_pass_the_static_rules(name: str) -> None:
    problem = _problem(name)
    template, match = _bound(problem)
    agent = TritonTemplateAgent()
    for knobs in [*template.priors("cuda"), *_variants(template).values()]:
        source = template.render(match, knobs, "header")
        assert source == render_source(match, knobs, "header")
        tree = ast.parse(source)
        run = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
        assert [a.arg for a in run[0].args.args] == list(problem.definition.inputs)
        proposal = agent.build(problem, match, knobs)
        assert not blocking(scan_solution(proposal.solution)), name


# --- correctness ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Checker results (interpreter) of every problem's variants, smallest workload."""
    checks = []
    agent = TritonTemplateAgent()
    for name in [*builtin_names(), *SAMPLE_NAMES]:
        problem = _problem(name)
        template, match = _bound(problem)
        cases = [case_for(problem, smallest_workload(problem))]
        for label, knobs in _variants(template).items():
            proposal = agent.build(problem, match, knobs)
            checks.append(check_entry(f"{name}/{label}", problem, proposal, cases))
    return run_checker(checks, "cpu", tmp_path_factory.mktemp("templates"), interpret=True)


@pytest.mark.parametrize("name", [*builtin_names(), *SAMPLE_NAMES])
@pytest.mark.parametrize("variant", ["cuda-default", "stress"])
def test_template_variants_match_the_reference_under_the_interpreter(
    checked: dict[str, dict], name: str, variant: str
) -> None:
    result = checked[f"{name}/{variant}"]
    assert result["ok"], result["detail"]


@pytest.fixture(scope="module")
def sandboxed() -> dict[str, list[str]]:
    """Per built-in problem, the statuses of its CPU-default candidate evaluated by the real
    LocalSandbox and runner (1 correctness round, smallest workload)."""

    def evaluate(name: str) -> list[str]:
        problem = resolve_problem(name)
        template, match = _bound(problem)
        proposal = TritonTemplateAgent().build(problem, match, template.default_knobs("cpu"))
        request = EvalRequest(
            definition=problem.definition,
            workloads=[smallest_workload(problem)],
            solution=proposal.solution,
            device="cpu",
            correctness_rounds=1,
            timing=TimingConfig(warmup=0, iterations=1),
            problem_dir=str(problem.path.resolve()),
        )
        # One evaluation per sandbox: no spare runner to pre-start for a next one.
        result = LocalSandbox(warm_spare=False).evaluate(request, timeout_s=240)
        return [
            f"{t.evaluation.status}: {t.evaluation.log[-800:]}" if t.evaluation else "none"
            for t in result.traces
        ]

    names = builtin_names()
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(evaluate, names), strict=True))


@pytest.mark.parametrize("name", builtin_names())
def test_template_passes_the_runner_on_cpu(sandboxed: dict[str, list[str]], name: str) -> None:
    statuses = sandboxed[name]
    assert statuses and all(s.startswith(EvalStatus.PASSED) for s in statuses), statuses


@pytest.mark.gpu
@pytest.mark.parametrize("name", [*builtin_names(), *SAMPLE_NAMES])
def test_priors_and_variants_match_the_reference_on_cuda(name: str, tmp_path: Path) -> None:
    """The first priors (what a campaign tries first) and the stress variant, on CUDA at the
    smallest GPU-sized workload (CPU-sized for the test problems)."""
    workloads = "workload.jsonl" if name in SAMPLE_NAMES else "workload_gpu.jsonl"
    problem = _problem(name, workloads)
    template, match = _bound(problem)
    settings = {f"prior{i}": k for i, k in enumerate(template.priors("cuda")[:4])}
    settings["stress"] = _stress(template)
    cases = [case_for(problem, smallest_workload(problem))]
    agent = TritonTemplateAgent()
    checks = [
        check_entry(f"{name}/{label}", problem, agent.build(problem, match, knobs), cases)
        for label, knobs in settings.items()
    ]
    results = run_checker(checks, "cuda", tmp_path, interpret=False, timeout=600)
    failed = {label: r["detail"] for label, r in results.items() if not r["ok"]}
    assert not failed
