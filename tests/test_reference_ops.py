"""Whether a reference multiplies matrices is read from its code, never from its words
(kernelarc/reference_ops.py). The converted-KernelBench case is the one that misled the regex
this replaced: a docstring saying "converted" made every norm look like a convolution."""

from kernelarc.reference_ops import CONV_NAMES, MATMUL_NAMES, uses_operations

_NORM = '''
import torch


class KernelBenchProblem:
    """The converted problem: a matmul-free RMS norm (see nn.Linear docs for contrast)."""


# einsum would be the wrong tool here
@torch.no_grad()
def run(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
'''


def test_words_in_docstrings_comments_and_decorators_do_not_count() -> None:
    assert not uses_operations(_NORM, MATMUL_NAMES | CONV_NAMES)


def test_matrix_products_in_code_count() -> None:
    assert uses_operations("def run(a, b):\n    return a @ b\n", MATMUL_NAMES)
    assert uses_operations("def run(a, b):\n    a @= b\n    return a\n", MATMUL_NAMES)
    assert uses_operations("import torch\nrun = lambda a, b: torch.matmul(a, b)\n", MATMUL_NAMES)
    assert uses_operations("import torch.nn as nn\nlayer = nn.Linear(4, 4)\n", MATMUL_NAMES)
    conv = "import torch.nn.functional as F\ndef run(x, w):\n    return F.conv2d(x, w)\n"
    assert uses_operations(conv, CONV_NAMES) and not uses_operations(conv, MATMUL_NAMES)
    # The operator alone can be left out (a template that serves named calls only).
    assert not uses_operations("def run(a, b):\n    return a @ b\n", {"mm"}, matmul_operator=False)


def test_source_that_does_not_parse_is_searched_as_text() -> None:
    broken = "def run(a, b:\n    return torch.matmul(a, b)\n"
    assert uses_operations(broken, MATMUL_NAMES)
    assert not uses_operations("def run(x:\n    return x  # converted\n", CONV_NAMES)
