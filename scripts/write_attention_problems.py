"""Write three attention problems (SOL-ExecBench format, written for KernelArc) for the kernel
benchmark: the generator's attention kernel (`kernelarc/kernelgen/attention.py`) at GPU sizes.

KernelBench levels 1-2 have one attention problem (float32, head dim 1024, over the attention
kernel's tile), so these stand in for the attention layers of real models: causal attention
written out by hand in bfloat16, `scaled_dot_product_attention` with `is_causal` in float16, and
without a mask in bfloat16. Each dir gets workload.jsonl (small, for the CPU) and
workload_gpu.jsonl (model sizes).

    python scripts/write_attention_problems.py .kb
"""

import argparse
import json
from pathlib import Path

_MANUAL = (
    "import math\nimport torch\n\n"
    "def run(q, k, v):\n"
    "    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])\n"
    "    n = q.shape[-2]\n"
    "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
    "    s = s.masked_fill(~keep, float('-inf'))\n"
    "    p = torch.softmax(s.float(), dim=-1).to(q.dtype)\n"
    "    return p @ v\n"
)
_SDPA = (
    "import torch\nimport torch.nn.functional as F\n\n"
    "def run(q, k, v):\n"
    "    return F.scaled_dot_product_attention(q, k, v, is_causal={causal})\n"
)
#: name -> (reference, dtype, heads, head dim, CPU sizes (B, L), GPU sizes (B, L))
PROBLEMS = {
    "own_attention_causal_bf16": (_MANUAL, "bfloat16", 16, 128, [(1, 40)], [(4, 2048), (8, 1024)]),
    "own_sdpa_causal_f16": (
        _SDPA.format(causal=True),
        "float16",
        16,
        64,
        [(1, 40)],
        [(4, 2048), (16, 512)],
    ),
    "own_sdpa_bf16": (_SDPA.format(causal=False), "bfloat16", 16, 128, [(1, 40)], [(8, 1024)]),
}


def _workloads(name: str, sizes: list[tuple[int, int]]) -> str:
    rows = [{"uuid": f"{name}-b{b}-l{n}", "axes": {"B": b, "L": n}, "inputs": {}} for b, n in sizes]
    for row in rows:
        row["inputs"] = {t: {"type": "random"} for t in ("q", "k", "v")}
    return "".join(json.dumps(r) + "\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="dir to write the problem dirs into")
    args = parser.parse_args()
    for name, (reference, dtype, heads, dim, cpu, gpu) in PROBLEMS.items():
        tensor = {"shape": ["B", "H", "L", "D"], "dtype": dtype}
        definition = {
            "name": name,
            "op_type": "attention",
            "description": f"Attention written for KernelArc's kernel benchmark ({dtype}).",
            "axes": {
                "B": {"type": "var"},
                "H": {"type": "const", "value": heads},
                "L": {"type": "var"},
                "D": {"type": "const", "value": dim},
            },
            "inputs": {"q": tensor, "k": tensor, "v": tensor},
            "outputs": {"o": tensor},
            "reference": reference,
        }
        target = args.out / name
        target.mkdir(parents=True, exist_ok=True)
        (target / "definition.json").write_text(json.dumps(definition, indent=1) + "\n")
        (target / "workload.jsonl").write_text(_workloads(name, cpu))
        (target / "workload_gpu.jsonl").write_text(_workloads(name, gpu))
        print(target)


if __name__ == "__main__":
    main()
