"""Convolutions run channels-last (the LAYOUT_CONV knob): the strides the kernels are generated
for are torch's own, and only a convolution read by fused kernels alone is converted."""

from typing import Any

import pytest
import torch

from kernelarc.kernelgen import default_knobs, generate, relevant_knobs
from kernelarc.kernelgen.conv_layout import channels_last_strides, convertible_convs
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import Ref

Traced = dict[str, Any]


@pytest.mark.parametrize(
    "shape", [(2, 4, 8, 8), (3, 5, 1, 7), (1, 1, 4, 4), (2, 3, 4, 5, 6), (2, 8, 1, 1, 3)]
)
def test_channels_last_strides_are_torchs(shape: tuple[int, ...]) -> None:
    form = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    assert (
        tuple(channels_last_strides(list(shape))) == torch.empty(shape, memory_format=form).stride()
    )


def test_a_convolution_read_by_kernels_is_converted_an_output_is_not(
    gen_problems: Traced,
) -> None:
    problem, traces = gen_problems["conv_relu_scale"]
    op_graph = traces.workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    [conv] = convertible_convs(graph)
    assert graph.nodes[conv].target == "aten.convolution.default"
    graph.outputs = [*graph.outputs, Ref(conv)]  # now also an output: keeps the traced layout
    assert convertible_convs(graph) == []

    on = generate(problem.definition, traces, default_knobs("cpu") | {"LAYOUT_CONV": 1}, "cpu", "x")
    off = generate(
        problem.definition, traces, default_knobs("cpu") | {"LAYOUT_CONV": 0}, "cpu", "x"
    )
    assert "LAYOUT_CONV" in relevant_knobs(on)
    assert "memory_format=torch.channels_last" in on.source
    assert "channels_last" not in off.source
    assert default_knobs("cuda")["LAYOUT_CONV"] == 1  # as torch.compile runs convolutions
