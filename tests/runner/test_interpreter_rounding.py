"""bfloat16 casts under Triton's interpreter round to nearest even once the runner's patch is
installed, as on a GPU; without it they truncate (the fault the patch exists for)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import json, sys
import torch, triton, triton.language as tl
from kernelarc.runner.interpreter_rounding import install

@triton.jit
def cast(x, out, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out + i, tl.load(x + i).to(tl.bfloat16))

def agreement():
    torch.manual_seed(0)
    x = torch.randn(1024) * 100
    x[:4] = torch.tensor([float("inf"), -float("inf"), 3.0e38, 1.0e-40])
    out = torch.empty(1024, dtype=torch.bfloat16)
    cast[(1,)](x, out, 1024)
    return float((out.view(torch.int16) == x.bfloat16().view(torch.int16)).float().mean())

before = agreement()
installed = install()
print(json.dumps({"before": before, "installed": installed, "again": install(),
                  "after": agreement()}))
"""


def test_bfloat16_casts_round_to_nearest_even_after_install() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"] < 0.9  # the interpreter's own cast truncates: about half differ
    assert result["installed"] is True and result["again"] is True
    assert result["after"] == 1.0
