"""Runs candidate solutions against a reference on random inputs, in a fresh process.

Used by the agent tests as `python kernel_check.py JOB.json RESULT.json`, with TRITON_INTERPRET=1
in the environment for CPU (the flag must be set before triton is imported, hence a subprocess).
It needs only torch (and triton for Triton candidates), so it also runs as-is on a GPU machine.

JOB.json: {"device": "cpu"|"cuda", "seed": int, "checks": [{"label", "reference", "source",
"cases": [{"inputs": {name: [shape, dtype]}, "outputs": {name: [shape, dtype]},
"atol", "rtol", "ratio"}]}]}. RESULT.json: {label: {"ok": bool, "detail": str}}.
"""

import importlib.util
import json
import sys
import tempfile
import traceback
from pathlib import Path

import torch


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make_input(shape, dtype, device):
    dt = getattr(torch, dtype)
    return torch.randn(shape, dtype=torch.float32, device=device).to(dt)


def as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def check_case(run, ref_run, case, device):
    inputs = [make_input(s, d, device) for s, d in case["inputs"].values()]
    expected = as_tuple(ref_run(*inputs))
    got = as_tuple(run(*inputs))
    if device == "cuda":
        torch.cuda.synchronize()
    if len(got) != len(case["outputs"]):
        return f"returned {len(got)} outputs, expected {len(case['outputs'])}"
    for (name, (shape, dtype)), out, ref in zip(
        case["outputs"].items(), got, expected, strict=True
    ):
        if tuple(out.shape) != tuple(shape) or out.dtype != getattr(torch, dtype):
            return f"{name}: got {tuple(out.shape)} {out.dtype}, expected {shape} {dtype}"
        x, y = out.float(), ref.float()
        if not torch.isfinite(x).all():
            return f"{name}: non-finite values"
        bad = (x - y).abs() > case["atol"] + case["rtol"] * y.abs()
        ratio = 1.0 - bad.sum().item() / max(bad.numel(), 1)
        if ratio < case["ratio"]:
            err = (x - y).abs().max().item()
            return f"{name}: matched ratio {ratio:.4f} < {case['ratio']} (max abs err {err:.3g})"
    return ""


def main(job_path, result_path):
    job = json.loads(Path(job_path).read_text())
    device = job["device"]
    torch.manual_seed(job["seed"])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, check in enumerate(job["checks"]):
            label = check["label"]
            try:
                ref_path = Path(tmp, f"_reference_{i}.py")
                ref_path.write_text(check["reference"])
                src_path = Path(tmp, f"_candidate_{i}.py")
                src_path.write_text(check["source"])
                ref_run = load_module(ref_path, f"_reference_{i}").run
                run = load_module(src_path, f"_candidate_{i}").run
                detail = ""
                for case in check["cases"]:
                    detail = check_case(run, ref_run, case, device)
                    if detail:
                        break
                results[label] = {"ok": not detail, "detail": detail}
            except Exception:  # a failing candidate is a result, not a crash
                results[label] = {"ok": False, "detail": traceback.format_exc()[-2000:]}
    Path(result_path).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
