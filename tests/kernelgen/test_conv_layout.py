"""Convolutions run channels-last (the LAYOUT_CONV knob): the strides the kernels are generated
for are torch's own, and only a convolution read by fused kernels alone is converted."""

from collections.abc import Callable
from typing import Any

import pytest
import torch
from reference_check import assert_match_reference

from kernelarc.kernelgen import Generated, default_knobs, generate, relevant_knobs
from kernelarc.kernelgen.conv_layout import (
    channels_last_convs,
    channels_last_strides,
    convertible_convs,
    memory_order,
    peel_conv_biases,
)
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import Kind, Ref
from kernelarc.kernelgen.knobs import launch_for
from kernelarc.kernelgen.schedule import KernelStep, schedule_graph
from kernelarc.kernelgen.space import Space

Traced = dict[str, Any]


@pytest.mark.parametrize(
    "shape", [(2, 4, 8, 8), (3, 5, 1, 7), (1, 1, 4, 4), (2, 3, 4, 5, 6), (2, 8, 1, 1, 3)]
)
def test_channels_last_strides_are_torchs(shape: tuple[int, ...]) -> None:
    form = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    assert (
        tuple(channels_last_strides(list(shape))) == torch.empty(shape, memory_format=form).stride()
    )


def test_a_convolution_read_in_its_planes_is_converted(gen_problems: Traced) -> None:
    def convertible(name: str) -> list[str]:
        op_graph = gen_problems[name][1].workloads[0].graph
        assert op_graph is not None
        graph = build_graph(op_graph)
        found = convertible_convs(graph)
        assert not any(n.channels_last for n in graph.nodes.values())  # tried, then undone
        return [graph.nodes[n].target for n in found]

    # Only reduced (in memory order), or an epilogue (and a pooling of it) writing NCHW: the
    # epilogue becomes a tile kernel; read across its channels through a reshape: not.
    assert convertible("conv_reductions") == ["aten.convolution.default"]
    assert convertible("conv_relu_scale") == ["aten.convolution.default"]
    assert convertible("conv_groups") == []
    op_graph = gen_problems["conv_reductions"][1].workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    [conv] = convertible_convs(graph)
    graph.outputs = [*graph.outputs, Ref(conv)]  # now also an output: keeps the traced layout
    assert convertible_convs(graph) == []

    problem, traces = gen_problems["conv_relu_scale"]
    on = generate(problem.definition, traces, default_knobs("cpu") | {"LAYOUT_CONV": 1}, "cpu", "x")
    off = generate(
        problem.definition, traces, default_knobs("cpu") | {"LAYOUT_CONV": 0}, "cpu", "x"
    )
    assert {"LAYOUT_CONV", "TILE_X", "TILE_R"} <= set(relevant_knobs(on))
    assert "memory_format=torch.channels_last" in on.source
    # The epilogue storing y is a tile kernel; the pooling reads y, stored NCHW, as usual.
    assert on.kinds == frozenset({"tile", "pointwise"}), on.summary()
    assert "channels_last" not in off.source and off.kinds == frozenset({"pointwise"})
    assert default_knobs("cuda")["LAYOUT_CONV"] == 1  # as torch.compile runs convolutions


def test_reductions_of_a_channels_last_convolution_walk_memory_order(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    problem, traces = gen_problems["conv_reductions"]
    variants = {
        "off": {"LAYOUT_CONV": 0},
        "on": {"LAYOUT_CONV": 1},
        "on-split": {"LAYOUT_CONV": 1, "SPLIT_COL": 8, "SPLIT_R": 8},
        "on-looped": {"LAYOUT_CONV": 1, "PERSISTENT_MAX": 16, "BLOCK_R": 16, "ROWS": 4},
    }
    generated = {
        label: generate(problem.definition, traces, default_knobs("cpu") | knobs, "cpu", label)
        for label, knobs in variants.items()
    }
    assert "memory_format=torch.channels_last" in generated["on"].source
    assert generated["on-split"].split, generated["on-split"].summary()
    sources = {("conv_reductions", label): g.source for label, g in generated.items()}
    assert_match_reference(gen_problems, run_checks, "cpu", sources)


def _kernel_spaces(traced: Traced, name: str, layout: bool) -> list[Space]:
    """The spaces of the kernels of the problem's first workload, LAYOUT_CONV on or off."""
    op_graph = traced[name][1].workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    if layout:
        channels_last_convs(graph, convertible_convs(graph))
    knobs = default_knobs("cpu")
    sched = schedule_graph(graph, lambda space: launch_for(space, knobs, "cpu"))
    spaces = [s.space for s in sched.steps if isinstance(s, KernelStep)]
    return [s for s in spaces if isinstance(s, Space)]


def test_the_walk_follows_a_channels_last_convolution(gen_problems: Traced) -> None:
    def reductions(layout: bool) -> dict[tuple[str, tuple[int, ...]], Space]:
        """Each reduction's (op, dims): the space of the kernel that computes it."""
        spaces = _kernel_spaces(gen_problems, "conv_reductions", layout)
        op_graph = gen_problems["conv_reductions"][1].workloads[0].graph
        assert op_graph is not None
        graph = build_graph(op_graph)
        return {
            (node.reduce_op, node.dims): next(
                s
                for s in spaces
                if (s.shape, s.dims) == (tuple(graph.meta(node.args[0]).shape), node.dims)
            )
            for node in graph.nodes.values()
            if node.kind == Kind.REDUCTION
        }

    nchw, nhwc = reductions(False), reductions(True)
    # NCHW: the mean over H, W is the row plan, the logsumexp over C the column plan (its
    # columns the H * W positions); walked channels-last they swap, so the fast axis of each
    # tile is the contiguous one: the channels (6) for the mean, the row itself for the max.
    mean, amax, total, best = ("sum", (2, 3)), ("max", (1,)), ("sum", (1, 2, 3)), ("argmax", (1,))
    assert (nchw[mean].column, nchw[amax].column) == (False, True)
    assert (nhwc[mean].column, nhwc[mean].inner, nhwc[mean].order) == (True, 6, (0, 2, 3, 1))
    assert (nhwc[amax].column, nhwc[amax].order) == (False, (0, 2, 3, 1))
    assert nhwc[total].order == (0, 2, 3, 1)  # over C, H, W: any order sums the same
    assert nhwc[best].order == (0, 2, 3, 1)  # over C alone: its index is unchanged
    assert all(space.order == () for space in nchw.values())
    # A pointwise node over the channels-last output (the GELU the mean reads) would read it
    # in memory order too; an epilogue is a tile kernel: x over (N, C), r over (H, W).
    op_graph = gen_problems["conv_reductions"][1].workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    channels_last_convs(graph, convertible_convs(graph))
    gelu = next(n for n in graph.nodes.values() if n.target == "aten.erf.default")
    assert memory_order(graph, gelu.name) == (0, 2, 3, 1)
    tiles = [s for s in _kernel_spaces(gen_problems, "conv_relu_scale", True) if s.tiled]
    assert tiles and all(s.dims == (2, 3) for s in tiles)
    assert not any(s.tiled for s in _kernel_spaces(gen_problems, "conv_relu_scale", False))


def test_tile_kernels_match_the_reference(
    gen_problems: Traced, run_checks: Callable[[list[dict[str, Any]], str], dict[str, Any]]
) -> None:
    problem, traces = gen_problems["conv_relu_scale"]
    variants = {
        "tile": {"LAYOUT_CONV": 1},
        "small-tiles": {"LAYOUT_CONV": 1, "TILE_X": 16, "TILE_R": 16},  # ragged tiles: masks
    }
    sources = {
        ("conv_relu_scale", label): generate(
            problem.definition, traces, default_knobs("cpu") | knobs, "cpu", label
        ).source
        for label, knobs in variants.items()
    }
    assert all("tl.arange(0, XBLOCK)[:, None]" in source for source in sources.values())
    assert_match_reference(gen_problems, run_checks, "cpu", sources)


def test_a_convolutions_bias_is_added_in_the_kernels_that_read_it(gen_problems: Traced) -> None:
    problem, traces = gen_problems["conv_relu_scale"]

    def call(knobs: dict[str, int]) -> tuple[str, Generated]:
        generated = generate(problem.definition, traces, default_knobs("cpu") | knobs, "cpu", "x")
        [line] = [line for line in generated.source.splitlines() if "aten.convolution" in line][:1]
        return line, generated

    peeled, on = call({"FUSE_CONV_BIAS": 1})
    kept, _ = call({"FUSE_CONV_BIAS": 0})
    assert "None, [1, 1]" in peeled and "None, [1, 1]" not in kept
    assert "FUSE_CONV_BIAS" in relevant_knobs(on)
    # Graph outputs and convolutions without a bias keep the call as it was.
    op_graph = traces.workloads[0].graph
    assert op_graph is not None
    graph = build_graph(op_graph)
    [conv] = [n.name for n in graph.nodes.values() if n.target == "aten.convolution.default"]
    graph.outputs = [*graph.outputs, Ref(conv)]
    assert peel_conv_biases(graph) == []
    groups = gen_problems["conv_groups"][1].workloads[0].graph
    assert groups is not None
    assert peel_conv_biases(build_graph(groups)) == []
