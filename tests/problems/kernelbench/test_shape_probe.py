"""Shapes on the meta device and which dims each size constant controls (in-process, no data)."""

import pytest

from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.shape_probe import Probes, probe_constants, take_snapshot
from kernelarc.problems.kernelbench.source_scan import ConversionError, scan_source


def _probe(body: str) -> Probes:
    source = "import torch\nimport torch.nn as nn\n" + body
    scanned = scan_source(source, "sample.py")
    candidates = {c.axis: [(c.constant, c.index)] for c in scanned.constants}
    kb = KernelBenchSource(source, "sample.py", candidates)
    return probe_constants(kb, take_snapshot(kb, {}), list(scanned.constants))


EQUAL_VALUES = """
class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))
    def forward(self, x):
        return x * self.scale[None, :, None, None]

batch_size = 8
features = dim1 = dim2 = 32

def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]

def get_init_inputs():
    return [features]
"""


def test_equal_constants_are_told_apart_by_probing_each() -> None:
    probes = _probe(EQUAL_VALUES)
    assert [a.axis for a in probes.axes] == ["batch_size", "features", "dim1", "dim2"]
    assert [probes.owner[("forward", 0, d)] for d in range(4)] == [
        "batch_size",
        "features",
        "dim1",
        "dim2",
    ]
    assert probes.owner[("state", 0, 0)] == "features"
    assert probes.owner[("output", 0, 3)] == "dim2"


CONV = """
class Model(nn.Module):
    def __init__(self, cin, cout, k, layers):
        super().__init__()
        sizes = [cin] + [cout] * layers
        self.convs = nn.ModuleList(nn.Conv2d(a, b, k) for a, b in zip(sizes, sizes[1:]))
    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
        return x.sum(dim=1, keepdim=True).expand(-1, reps, -1, -1)

batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
num_layers = 2
reps = 5
height = width = 16

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_layers]
"""


def test_structural_and_output_only_constants_are_not_axes_and_conv_outputs_are_derived() -> None:
    probes = _probe(CONV)
    axes = [a.axis for a in probes.axes]
    # num_layers changes the parameters (structure); reps only sets an output dim.
    assert axes == ["batch_size", "in_channels", "out_channels", "kernel_size", "height", "width"]
    out_h, out_w = ("output", 0, 2), ("output", 0, 3)
    assert out_h not in probes.owner and out_w not in probes.owner
    assert {out_h, out_w, ("output", 0, 1)} <= probes.moved
    # height and width each move one output dim: two different derived dims
    assert probes.signature[out_h] != probes.signature[out_w]
    assert probes.owner[("state", 0, 2)] == "kernel_size"


TIED = """
class Model(nn.Module):
    def forward(self, a, b):
        return (a - b).abs().sum()

batch_size = 512
input_shape = (512,)

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.rand(batch_size)]

def get_init_inputs():
    return []
"""


def test_constants_that_only_move_together_are_one_tied_axis() -> None:
    probes = _probe(TIED)
    assert len(probes.axes) == 1
    axis = probes.axes[0]
    assert axis.axis == "batch_size"
    assert axis.targets == (("batch_size", None), ("input_shape", 0))
    assert {probes.owner[("forward", 0, d)] for d in (0, 1)} == {"batch_size"}


HUGE = """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

batch_size = 1 << 20
dim = 1 << 20

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
"""


def test_shapes_of_terabyte_inputs_cost_nothing_on_the_meta_device() -> None:
    probes = _probe(HUGE)  # 4 TiB per tensor: would fail at once if anything were allocated
    assert probes.base.forward[0].shape == (1 << 20, 1 << 20)
    assert [a.axis for a in probes.axes] == ["batch_size", "dim"]


@pytest.mark.parametrize(
    ("inputs", "forward", "cause", "words"),
    [
        (
            "[torch.randint(0, 255, (4, 4), dtype=torch.uint8)]",
            "x + 1",
            "unsupported_dtype",
            "uint8",
        ),
        ("[[1, 2, 3]]", "x", "unsupported_input", "list"),
        ("[torch.rand(4, 4)]", "{'out': x}", "unsupported_output", "dict"),
        ("[torch.rand(4, 4)]", "x.nonzero()", "forward_failed", "meta tensors"),
    ],
)
def test_unsupported_values_are_refused_with_a_cause(
    inputs: str, forward: str, cause: str, words: str
) -> None:
    body = (
        "class Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n"
        f"def get_inputs():\n    return {inputs}\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(ConversionError) as info:
        _probe(body)
    assert info.value.cause == FailureCause(cause)
    assert words in str(info.value)
