"""The kernel generator's knob space as the Triton strategy agents see it: a reference whose
every operator stays a torch call gets no generated space (H200 suite run, 2026-12-04: a
max_pool2d problem got a "generated" candidate with no Triton kernel, which cost a timed run and
a guard challenge and counted as a PASSED generated kernel)."""

import json
from pathlib import Path

from kernelarc.agents.triton.generated_space import FAMILY, generated_space
from kernelarc.problems.files import load_problem


def _write(directory: Path, name: str, reference: str) -> Path:
    directory.mkdir()
    definition = {
        "name": name,
        "axes": {"B": {"type": "var"}, "C": {"type": "const", "value": 3}},
        "inputs": {"x": {"shape": ["B", "C", 8, 8], "dtype": "float32"}},
        "outputs": {"y": {"shape": None, "dtype": "float32"}},
        "reference": reference,
    }
    (directory / "definition.json").write_text(json.dumps(definition))
    workload = {"uuid": "b2", "axes": {"B": 2}, "inputs": {"x": {"type": "random"}}}
    (directory / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    return directory


def test_no_space_when_every_operator_stays_a_torch_call(tmp_path: Path) -> None:
    # An 8x8 window (64 taps) stays a torch call; small windows are fused taps now.
    pooling = _write(
        tmp_path / "pool",
        "pool",
        "import torch.nn.functional as F\n\n"
        "def run(x):\n    return F.avg_pool2d(x, kernel_size=8)\n",
    )
    fused = _write(
        tmp_path / "scale",
        "scale",
        "import torch\n\ndef run(x):\n    return torch.relu(x) * 2.0 + 1.0\n",
    )
    reason = generated_space(load_problem(pooling), "cpu")
    assert isinstance(reason, str)
    assert "every operator runs as a torch call" in reason
    assert "avg_pool2d" in reason
    space = generated_space(load_problem(fused), "cpu")
    assert not isinstance(space, str), space
    assert space[0].family == FAMILY
    assert space[1].probe.kernels >= 1
