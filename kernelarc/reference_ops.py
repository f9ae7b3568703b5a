"""Which kinds of operation a reference's code calls, read from its syntax tree.

Place in the flow: the roofline (`guard/roofline.py`: memory- or compute-bound), the library and
precision agents (`agents/strategy/torch_variants.py`: do their settings apply) and the GEMM
template's matcher (`agents/triton/template_matchers.py`) ask whether a reference multiplies
matrices. They used to search the source text with regular expressions, which also matched
words in docstrings and comments ("converted" matched a `conv...d` pattern, so every converted
KernelBench norm looked like a convolution and got library/precision candidates that can only
equal the reference).
Here only code counts: the `@` operator, and calls or attributes named like a matrix product
(`torch.matmul`, `x.mm`, `nn.Linear`, `F.conv2d`, ...), never strings or comments.
"""

import ast
import re
from collections.abc import Iterable

from kernelarc.python_ast import parse_module

MATMUL_NAMES = frozenset(
    {
        "matmul",
        "mm",
        "bmm",
        "linear",
        "Linear",
        "einsum",
        "addmm",
        "addbmm",
        "baddbmm",
        "tensordot",
        "bilinear",
        "Bilinear",
        "scaled_dot_product_attention",
    }
)
"""Names of matrix products (functions, methods and modules)."""
CONV_NAMES = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convolution",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
    }
)
"""Names of convolutions."""


def uses_operations(source: str, names: Iterable[str], *, matmul_operator: bool = True) -> bool:
    """Whether the code of `source` uses an identifier in `names` (as a name or an attribute)
    or, with `matmul_operator`, the `@` operator. Source that does not parse is searched as
    text for the names as whole words (a definition's reference is checked for syntax
    elsewhere; this only must not crash)."""
    wanted = frozenset(names)
    try:
        tree = parse_module(source)
    except (SyntaxError, ValueError):
        words = "|".join(re.escape(n) for n in sorted(wanted))
        pattern = rf"\b(?:{words})\b" + (r"|@(?![A-Za-z_])" if matmul_operator else "")
        return re.search(pattern, source) is not None
    for node in ast.walk(tree):
        matmul = isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult)
        if matmul_operator and matmul:
            return True
        if isinstance(node, ast.Name) and node.id in wanted:
            return True
        if isinstance(node, ast.Attribute) and node.attr in wanted:
            return True
    return False
