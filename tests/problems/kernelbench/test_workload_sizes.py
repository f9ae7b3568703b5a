"""Workload sizes: KernelBench's own for the GPU, shrunk by halving constants for the CPU."""

import pytest

from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.shape_probe import probe_constants, take_snapshot
from kernelarc.problems.kernelbench.source_scan import ConversionError, scan_source
from kernelarc.problems.kernelbench.workload_sizes import (
    CPU_BYTES,
    CPU_MAX_BYTES,
    WorkloadPlan,
    plan_workloads,
)


def _plan(body: str) -> WorkloadPlan:
    source = "import torch\nimport torch.nn as nn\n" + body
    scanned = scan_source(source, "sample.py")
    candidates = {c.axis: [(c.constant, c.index)] for c in scanned.constants}
    probing = KernelBenchSource(source, "sample.py", candidates)
    probes = probe_constants(probing, take_snapshot(probing, {}), list(scanned.constants))
    sized = KernelBenchSource(source, "sample.py", {a.axis: a.targets for a in probes.axes})
    return plan_workloads(sized, probes)


CONV_GROUPNORM = """
class Model(nn.Module):
    def __init__(self, cin, cout, k, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.norm = nn.GroupNorm(groups, cout)
    def forward(self, x):
        return self.norm(self.conv(x))

batch_size = 64
in_channels = 8
out_channels = 64
kernel_size = 5
num_groups = 16
height = width = 128

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
"""


def test_cpu_sizes_shrink_constants_and_keep_the_problem_valid() -> None:
    plan = _plan(CONV_GROUPNORM)
    kernelbench = plan.gpu[0].sizes
    assert kernelbench == {
        "batch_size": 64,
        "in_channels": 8,
        "out_channels": 64,
        "kernel_size": 5,
        "height": 128,
        "width": 128,
    }
    assert len(plan.gpu) == 2
    assert plan.gpu[1].snapshot.nbytes() <= plan.gpu[0].snapshot.nbytes() / 4
    assert len(plan.cpu) == 2
    assert plan.cpu[0].snapshot.nbytes() <= max(CPU_BYTES)
    assert plan.cpu[1].snapshot.nbytes() <= min(CPU_BYTES)
    for sizing in plan.cpu:
        assert sizing.sizes["kernel_size"] == 5  # never scaled
        assert sizing.sizes["out_channels"] % 16 == 0  # GroupNorm(16, C) must still build
        assert sizing.sizes["height"] > 5  # the convolution still has an output
        # the shapes follow the constants: the weight's in-channels equal the input's
        x, weight = sizing.snapshot.forward[0].shape, sizing.snapshot.state[0].shape
        assert x is not None and weight is not None
        assert x[1] == weight[1] == sizing.sizes["in_channels"]


def test_literal_sizes_that_cannot_shrink_are_refused() -> None:
    body = """
class Model(nn.Module):
    def forward(self, x):
        return x.relu()

def get_inputs():
    return [torch.rand(4096, 4096)]

def get_init_inputs():
    return []
"""
    with pytest.raises(ConversionError) as info:
        _plan(body)
    assert info.value.cause == FailureCause.NOT_SCALABLE
    assert f"{CPU_MAX_BYTES >> 20} MiB" in str(info.value)


LINEAR_GROUPNORM = """
class Model(nn.Module):
    def __init__(self, fin, fout, groups):
        super().__init__()
        self.fc = nn.Linear(fin, fout)
        self.norm = nn.GroupNorm(groups, fout)
    def forward(self, x):
        return self.norm(self.fc(x))

batch_size = 2048
in_features = 2048
out_features = 4096
num_groups = 256

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, num_groups]
"""


def test_an_axis_a_group_count_divides_keeps_two_members_per_group() -> None:
    """GroupNorm(256, C) over (N, C): at C = 256 every group is one value, normalised to 0, and
    a CPU workload of zeros passes a kernel that writes zeros. The batch, which 256 divides by
    chance only, still shrinks as far as the bytes ask."""
    plan = _plan(LINEAR_GROUPNORM)
    assert plan.cpu
    for sizing in plan.cpu:
        assert sizing.sizes["out_features"] >= 512, sizing.sizes
        assert sizing.snapshot.nbytes() <= max(CPU_BYTES)
    assert min(s.sizes["batch_size"] for s in plan.cpu) < 512
