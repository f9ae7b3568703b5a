"""Reading a KernelBench file without running it: refusals and candidate size constants."""

import pytest

from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.source_scan import ConversionError, scan_source

HEAD = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Doubles its input.

    More text.
    """
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_size_constants_are_literal_integers_and_literal_tuple_entries() -> None:
    source = HEAD + (
        "batch_size = 16\n"
        "N = 2048 * 2\n"
        "depth, height, width = 8, 16, 32\n"
        "rows = cols = 64\n"
        "input_shape = (4096, 3)\n"
        "bias_shape = (batch_size, 1, 1)\n"  # computed from another constant: follows it
        "hidden = N * 4\n"
        "scale = 2.0\n"
        "flag = True\n"
    )
    scanned = scan_source(source, "x.py")
    found = {(c.axis, c.constant, c.index, c.value) for c in scanned.constants}
    assert found == {
        ("batch_size", "batch_size", None, 16),
        ("N", "N", None, 4096),
        ("depth", "depth", None, 8),
        ("height", "height", None, 16),
        ("width", "width", None, 32),
        ("rows", "rows", None, 64),
        ("cols", "cols", None, 64),
        ("input_shape_0", "input_shape", 0, 4096),
        ("input_shape_1", "input_shape", 1, 3),
    }
    assert scanned.docstring is not None
    assert scanned.docstring.startswith("Doubles its input.")


def test_a_syntax_error_is_refused_with_its_line() -> None:
    with pytest.raises(ConversionError) as info:
        scan_source(HEAD + "def broken(:\n", "x.py")
    assert info.value.cause == FailureCause.SYNTAX_ERROR
    assert f"line {HEAD.count(chr(10)) + 1}" in str(info.value)


def test_a_file_without_get_init_inputs_is_not_kernelbench() -> None:
    source = HEAD.replace("def get_init_inputs", "def something_else")
    with pytest.raises(ConversionError) as info:
        scan_source(source, "x.py")
    assert info.value.cause == FailureCause.NOT_KERNELBENCH
    assert "get_init_inputs" in str(info.value)
