"""Checks generated solutions against their problem's reference, in a fresh process.

`python gen_check.py JOB.json RESULT.json`, with TRITON_INTERPRET=1 in the environment on the
CPU (Triton reads it at import). JOB.json: {"device": "cpu"|"cuda", "checks": [{"label",
"problem", "source"}]}; every workload of the problem is checked with the evaluator's own input
generator and correctness rule. RESULT.json: {label: {"ok", "detail", "planned"}}, where planned
counts the workloads a generated plan (not the reference fallback) served.
"""

import importlib.util
import json
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import torch

from kernelarc.problems.files import load_problem
from kernelarc.runner.correctness import collect_outputs, compare
from kernelarc.runner.inputs import generate_inputs, seed_everything
from kernelarc.runner.interpreter_rounding import install as install_interpreter_rounding
from kernelarc.runner.staging import load_reference


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check(problem_dir: str, source: str, device: str, index: int) -> dict:
    problem = load_problem(Path(problem_dir))
    definition = problem.definition
    with tempfile.TemporaryDirectory() as tmp:
        reference = load_reference(definition, Path(tmp))
        path = Path(tmp, f"_generated_{index}.py")
        path.write_text(source)
        module = _load(path, f"_generated_{index}")
        custom = getattr(reference, definition.custom_inputs_entrypoint or "", None)
        planned = 0
        for workload in problem.workloads:
            seed_everything(1234)
            inputs = generate_inputs(definition, workload, device, problem_dir, custom)
            key = module._kg_key(tuple(inputs), module._KG_BAKED)
            planned += key in module._KG_PLANS
            expected = collect_outputs(reference.run(*inputs), definition, device)
            got = collect_outputs(module.run(*inputs), definition, device)
            for name, out, ref in zip(definition.outputs, got, expected, strict=True):
                if out.shape != ref.shape or out.dtype != ref.dtype:
                    got_type, want = f"{out.shape} {out.dtype}", f"{ref.shape} {ref.dtype}"
                    detail = f"{workload.uuid} {name}: {got_type} vs {want}"
                    return {"ok": False, "detail": detail, "planned": planned}
                result = compare(out, ref, workload.tolerance, name)
                if not result.ok:
                    return {
                        "ok": False,
                        "detail": f"{workload.uuid}: {result.reason}",
                        "planned": planned,
                    }
    return {"ok": True, "detail": "", "planned": planned}


def main(job_path: str, result_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    # Deprecated in Triton and an error in later releases: a generated condition must be a bool.
    warnings.filterwarnings("error", message="tl.where with a non-boolean condition")
    if job["device"] == "cpu":
        install_interpreter_rounding()  # bfloat16 casts round as on a GPU, as in the runner
    results = {}
    for index, item in enumerate(job["checks"]):
        try:
            results[item["label"]] = check(item["problem"], item["source"], job["device"], index)
        except Exception:  # reported per check
            results[item["label"]] = {
                "ok": False,
                "detail": traceback.format_exc()[-1500:],
                "planned": 0,
            }
    Path(result_path).write_text(json.dumps(results))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2])
