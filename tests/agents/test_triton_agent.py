"""The Triton template agent: matching, proposal records, search order, and kernel correctness."""

import ast
import json
import shutil
from pathlib import Path

import pytest
from agent_checks import (
    FAMILY,
    TRITON_PER_PROBLEM,
    case_for,
    check_entry,
    edited_problem,
    first_proposals,
    run_checker,
)

from kernelarc.agents import AgentContext, TritonTemplateAgent
from kernelarc.agents.triton.template_library import (
    TEMPLATES,
    find_eps,
    find_gelu_tanh,
    match_template,
)
from kernelarc.problems.builtin_set import builtin_dir, builtin_names, resolve_problem
from kernelarc.problems.files import Problem, load_problem
from kernelarc.schema import Language, TargetHardware

NAMES = builtin_names()


def _ids(agent: TritonTemplateAgent, problem: Problem, device: str = "cpu") -> list[str]:
    ctx = AgentContext(problem=problem, device=device)  # type: ignore[arg-type]
    ids = []
    while (proposal := agent.propose(ctx)) is not None:
        ids.append(proposal.id)
    return ids


@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_problem_has_a_template(name: str) -> None:
    found = match_template(resolve_problem(name))
    assert not isinstance(found, list), found
    template, match = found
    assert template.family == FAMILY[name]
    assert [n for _, n in match.input_roles] == list(resolve_problem(name).definition.inputs)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("index", range(TRITON_PER_PROBLEM))
def test_first_proposals_match_the_reference_under_the_interpreter(
    cpu_results: dict[str, dict], name: str, index: int
) -> None:
    result = cpu_results[f"{name}/triton/{index}"]
    assert result["ok"], result["detail"]


@pytest.mark.parametrize("name", NAMES)
def test_proposal_record(name: str) -> None:
    problem = resolve_problem(name)
    proposal = TritonTemplateAgent(seed=3).propose(AgentContext(problem=problem))
    assert proposal is not None
    solution = proposal.solution
    assert proposal.id.startswith("p-") and proposal.agent == "triton_template"
    assert proposal.strategy == "triton_template"
    assert proposal.knobs["template"] == FAMILY[name]
    assert proposal.rationale and "\n" not in proposal.rationale
    assert solution.name.startswith(f"{name}-triton_template-{FAMILY[name]}-")
    assert solution.definition == name and solution.author == "triton_template"
    assert solution.spec.languages == [Language.TRITON]
    assert solution.spec.target_hardware == [TargetHardware.LOCAL]
    assert solution.spec.entry_point == "kernel.py::run"
    assert solution.spec.destination_passing_style is False
    tree = ast.parse(solution.sources[0].content)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assert [a.arg for a in run.args.args] == list(problem.definition.inputs)


def test_same_seed_same_sequence_different_seed_different_order() -> None:
    problem = resolve_problem("rmsnorm")
    first = _ids(TritonTemplateAgent(seed=0), problem, "cuda")
    assert first == _ids(TritonTemplateAgent(seed=0), problem, "cuda")
    other = _ids(TritonTemplateAgent(seed=1), problem, "cuda")
    assert sorted(other) == sorted(first) and other != first
    renamed = _ids(TritonTemplateAgent(name="triton_template-2", seed=0), problem, "cuda")
    assert renamed != first


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_walks_the_whole_grid_once_then_returns_none(device: str) -> None:
    problem = resolve_problem("rope")
    template = next(t for t in TEMPLATES if t.family == "rope")
    ids = _ids(TritonTemplateAgent(seed=5), problem, device)
    assert len(ids) == len(set(ids)) == len(template.knob_settings(device))


def test_cuda_grid_is_valid_and_starts_with_the_priors() -> None:
    for template in TEMPLATES:
        settings = template.knob_settings("cuda")
        assert len(settings) >= 8, template.family
        assert all(template.check_knobs(k, "cuda") is None for k in settings)
        priors = template.priors("cuda")
        assert settings[: len(priors)] == priors
        assert settings[0] == template.default_knobs("cuda")


def test_agent_tries_the_priors_first_whatever_its_seed() -> None:
    problem = resolve_problem("rmsnorm")
    template = next(t for t in TEMPLATES if t.family == "rmsnorm")
    ctx = AgentContext(problem=problem, device="cuda")
    n = len(template.priors("cuda"))
    for seed in (0, 1):
        agent = TritonTemplateAgent(seed=seed)
        tried = [agent.propose(ctx) for _ in range(n)]
        assert [p.knobs for p in tried if p is not None] == [
            {"template": "rmsnorm", **k} for k in template.priors("cuda")
        ]


def test_seen_ids_are_skipped() -> None:
    problem = resolve_problem("gemm_bias_gelu")
    order = _ids(TritonTemplateAgent(seed=0), problem)
    seen = frozenset(order[:2])
    proposal = TritonTemplateAgent(seed=0).propose(AgentContext(problem=problem, seen_ids=seen))
    assert proposal is not None and proposal.id == order[2]
    everything = frozenset(order)
    ctx = AgentContext(problem=problem, seen_ids=everything)
    assert TritonTemplateAgent(seed=0).propose(ctx) is None


def test_no_template_for_an_unknown_op_type(tmp_path: Path) -> None:
    problem = edited_problem(tmp_path, "softmax", {"op_type": "sort"})
    assert TritonTemplateAgent().propose(AgentContext(problem=problem)) is None
    reasons = match_template(problem)
    assert isinstance(reasons, list) and any("'sort'" in r for r in reasons)


def test_no_template_when_eps_is_missing(tmp_path: Path) -> None:
    reference = (
        "import torch\n\ndef run(x, weight):\n"
        "    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True))"
        " * weight.float()).to(torch.bfloat16)\n"
    )
    problem = edited_problem(tmp_path, "rmsnorm", {"reference": reference})
    reasons = match_template(problem)
    assert isinstance(reasons, list) and any("eps" in r for r in reasons)
    assert TritonTemplateAgent().propose(AgentContext(problem=problem)) is None


def test_no_template_when_the_structure_differs(tmp_path: Path) -> None:
    # A softmax over the first axis, and a "gemm" followed by a softmax, are not served.
    ref = "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=0)\n"
    assert isinstance(match_template(edited_problem(tmp_path, "softmax", {"reference": ref})), list)
    ref = (
        "import torch\n\ndef run(a, weight, bias):\n    return (a @ weight.T + bias).softmax(-1)\n"
    )
    assert isinstance(
        match_template(edited_problem(tmp_path, "gemm_bias_gelu", {"reference": ref})), list
    )


def test_constant_parsers() -> None:
    assert find_eps("EPS = 1e-6") == 1e-6
    assert find_eps("F.layer_norm(x, s, w, b, eps=1e-05)") == 1e-5
    assert find_eps("variance_epsilon = 0.001") == 0.001
    assert find_eps("layer_norm_eps: float = 1e-12") == 1e-12
    assert find_eps("steps = 3\nreturn x * 2") is None
    assert find_gelu_tanh('F.gelu(y, approximate="tanh")') is True
    assert find_gelu_tanh("torch.nn.functional.gelu(y)") is False
    assert find_gelu_tanh("torch.relu(y)") is None


def test_renamed_and_reordered_definitions_still_match(tmp_path: Path) -> None:
    """Parameter names come from the definition; outputs are returned in its order."""
    definition = json.loads((builtin_dir() / "add_layernorm" / "definition.json").read_text())
    definition["inputs"] = {
        "hidden": definition["inputs"]["x"],
        "resid": definition["inputs"]["residual"],
        "gamma": definition["inputs"]["weight"],
        "beta": definition["inputs"]["bias"],
    }
    definition["outputs"] = {
        "residual_sum": definition["outputs"]["residual_out"],
        "normed": definition["outputs"]["out"],
    }
    definition["reference"] = (
        "import torch\nimport torch.nn.functional as F\n\nEPS = 1e-5\n\n\n"
        "def run(hidden, resid, gamma, beta):\n"
        "    h = hidden + resid\n"
        "    out = F.layer_norm(h.float(), (h.shape[-1],), gamma.float(), beta.float(), EPS)\n"
        "    return h, out.to(torch.bfloat16)\n"
    )
    target = tmp_path / "renamed"
    target.mkdir()
    (target / "definition.json").write_text(json.dumps(definition))
    shutil.copy(builtin_dir() / "add_layernorm" / "workload.jsonl", target)
    problem = load_problem(target)
    proposal = TritonTemplateAgent().propose(AgentContext(problem=problem))
    assert proposal is not None
    assert "def run(hidden, resid, gamma, beta):" in proposal.solution.sources[0].content
    cases = [case_for(problem, problem.workloads[0])]
    result = run_checker(
        [check_entry("renamed", problem, proposal, cases)], "cpu", tmp_path, interpret=True
    )
    assert result["renamed"]["ok"], result["renamed"]["detail"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_kernels_match_the_reference_on_cuda_gpu_shapes(name: str, tmp_path: Path) -> None:
    problem = resolve_problem(name, "workload_gpu.jsonl")
    cases = [case_for(problem, w) for w in problem.workloads]
    proposals = first_proposals(
        TritonTemplateAgent(seed=0), AgentContext(problem=problem, device="cuda"), 2
    )
    checks = [check_entry(f"{name}/{i}", problem, p, cases) for i, p in enumerate(proposals)]
    results = run_checker(checks, "cuda", tmp_path, interpret=False, timeout=600)
    failed = {label: r["detail"] for label, r in results.items() if not r["ok"]}
    assert not failed
