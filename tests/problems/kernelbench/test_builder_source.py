"""The builder function a converted reference carries in place of the KernelBench file: the
file's top-level code run with size constants replaced, as plain Python the guard accepts."""

import re

import pytest
import torch

from kernelarc.guard.static_rules import RULES_BY_ID
from kernelarc.guard.static_scan import scan_python_source
from kernelarc.problems.kernelbench.builder_source import (
    KernelBenchSource,
    SizeConstants,
    builder_source,
)
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.source_scan import ConversionError

SOURCE = '''"""A KernelBench-style file written for this test."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a bias.
        This line keeps its eight spaces.
    """

    def __init__(self, shape):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return x + self.bias


batch_size = 16  # the batch
features = 8; scaled = features * 2
input_shape = (4096, 32)
bias_shape = (input_shape[1],)


def get_inputs():
    return [torch.rand(batch_size, scaled, *input_shape)]


def get_init_inputs():
    return [bias_shape]
# a trailing comment
'''

CONSTANTS: SizeConstants = {
    "batch_size": [("batch_size", None)],
    "features": [("features", None)],
    "input_shape_0": [("input_shape", 0)],
    "tied": [("input_shape", 1)],
}


def _shapes(source: KernelBenchSource, sizes: dict[str, int]) -> tuple[list[int], list[int]]:
    ns = source.namespace(sizes)
    (x,) = source.forward_inputs(ns, "meta")
    model = source.build_model(ns, "meta")
    bias = model.get_parameter("bias")
    return list(x.shape), list(bias.shape)


def test_constants_are_replaced_where_assigned_and_derived_ones_follow() -> None:
    source = KernelBenchSource(SOURCE, "sample.py", CONSTANTS)
    assert _shapes(source, {}) == ([16, 16, 4096, 32], [32])
    sizes = {"batch_size": 2, "features": 3, "input_shape_0": 5, "tied": 7}
    # `scaled` (same line as `features`) and `bias_shape` (a tuple entry) follow the new values
    assert _shapes(source, sizes) == ([2, 6, 5, 7], [7])


def test_unknown_axis_is_a_key_error_naming_the_file() -> None:
    source = KernelBenchSource(SOURCE, "sample.py", CONSTANTS)
    with pytest.raises(KeyError, match=r"sample.py: no size constant for \['depth'\]"):
        source.namespace({"depth": 3})


def test_builder_keeps_the_files_text_strings_and_comments() -> None:
    built = builder_source(SOURCE, "sample.py", CONSTANTS)
    text = built.function
    assert text.startswith("def _kb_namespace(_kb_sizes):")
    assert (
        "    batch_size = 16  # the batch\n"
        "    batch_size = _kb_sizes.apply(batch_size, 'batch_size')\n" in text
    )
    assert "input_shape = _kb_sizes.apply(input_shape, 'tied', 1)" in text
    assert "# a trailing comment" in text
    ns = KernelBenchSource(SOURCE, "sample.py", CONSTANTS).namespace({})
    assert ns["Model"].__doc__ == "Adds a bias.\n        This line keeps its eight spaces.\n    "


def test_builder_passes_the_guards_static_scan() -> None:
    text = builder_source(SOURCE, "sample.py", CONSTANTS).function
    blocking = [
        m for m in scan_python_source(text, None) if RULES_BY_ID[m.rule].severity == "block"
    ]
    assert blocking == []
    assert "exec" not in text and "sys" not in text


def test_a_name_of_the_file_is_never_taken_for_the_sizes() -> None:
    source = SOURCE.replace("batch_size = 16", "_kb_sizes = 1\nbatch_size = 16")
    text = builder_source(source, "sample.py", CONSTANTS).function
    assert text.startswith("def _kb_namespace(_kb_sizes_2):")
    assert _shapes(KernelBenchSource(source, "sample.py", CONSTANTS), {"batch_size": 3})[0][0] == 3


def test_future_imports_go_above_the_builder() -> None:
    source = "from __future__ import annotations\n" + SOURCE
    built = builder_source(source, "sample.py", CONSTANTS)
    assert built.future_imports == "from __future__ import annotations"
    assert "__future__" not in built.function
    assert _shapes(KernelBenchSource(source, "sample.py", CONSTANTS), {})[1] == [32]


def test_a_tab_indented_function_still_builds() -> None:
    source = SOURCE.replace("    return [bias_shape]", "\treturn [bias_shape]")
    source = source.replace("    return [torch.rand(", "\treturn [torch.rand(")
    kb = KernelBenchSource(source, "sample.py", CONSTANTS)
    assert _shapes(kb, {"batch_size": 4}) == ([4, 16, 4096, 32], [32])


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("from math import *\n", "`from math import *` cannot run inside"),
        ("def bump():\n    global batch_size\n    batch_size += 1\n", "`global batch_size`"),
    ],
)
def test_code_that_cannot_run_in_a_function_is_refused(extra: str, reason: str) -> None:
    with pytest.raises(ConversionError, match=re.escape(reason)) as info:
        KernelBenchSource(SOURCE + extra, "sample.py", CONSTANTS)
    assert info.value.cause == FailureCause.UNSUPPORTED_SOURCE


def test_models_are_built_per_call_with_their_own_sizes() -> None:
    source = KernelBenchSource(SOURCE, "sample.py", CONSTANTS)
    small = source.build_model(source.namespace({"tied": 3}), "cpu")
    large = source.build_model(source.namespace({"tied": 9}), "cpu")
    assert small.get_parameter("bias").shape == torch.Size([3])
    assert large.get_parameter("bias").shape == torch.Size([9])
