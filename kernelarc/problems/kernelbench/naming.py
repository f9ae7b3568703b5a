"""Names of a converted KernelBench problem: definition name, level and op_type, from its path.

Place in the flow: the host (`importer.py`) names each file before converting it (the name is
the output folder); the converter writes the op_type. KernelBench names files
`<number>_<Op>_<Op>....py` inside `level1/`, `level2/`, ...; level 1 files are single operators,
level 2 files are fusions. The op_type is a coarse family (`matmul`, `conv`, `norm`, ...) for
level 1 and `fused_gemm` / `fused_conv` / `fused` for level 2, read from the file name.
"""

import re
from pathlib import Path

_LEVEL = re.compile(r"^level(\d+)$", re.IGNORECASE)
# Checked in order against the lower-cased file stem; the first match wins.
_SINGLE_OP_TYPES: tuple[tuple[str, str], ...] = (
    (r"conv", "conv"),
    (r"attention", "attention"),
    (r"matmul|matrix_multiplication|matrix_vector|gemm|bmm", "matmul"),
    (r"matrix_scalar", "elementwise"),
    (r"loss", "loss"),
    (r"softmax", "softmax"),
    (r"norm", "norm"),
    (r"pool", "pooling"),
    (r"cumsum|cumprod|scan", "scan"),
    (r"reduction|argmax|argmin", "reduction"),
    (
        r"relu|sigmoid|tanh|swish|gelu|selu|softplus|softsign|elu|hardtanh|mish|silu",
        "activation",
    ),
)
_FUSED_OP_TYPES: tuple[tuple[str, str], ...] = (
    (r"^\d*_?(conv)", "fused_conv"),
    (r"^\d*_?(gemm|matmul|bmm|linear)", "fused_gemm"),
)


def level_dir(path: Path) -> Path | None:
    """The nearest `levelN` folder above the file, if any."""
    return next((parent for parent in path.parents if _LEVEL.match(parent.name)), None)


def level_of(path: Path) -> int | None:
    """The N of the nearest `levelN` folder above the file, if any."""
    folder = level_dir(path)
    match = _LEVEL.match(folder.name) if folder is not None else None
    return int(match.group(1)) if match else None


def problem_name(path: Path, level: int | None) -> str:
    """`kb_l1_36_rmsnorm` for level1/36_RMSNorm_.py (lower case, runs of other characters
    become one underscore); `kb_<stem>` when the level is unknown."""
    slug = re.sub(r"[^a-z0-9]+", "_", path.stem.lower()).strip("_") or "problem"
    return f"kb_l{level}_{slug}" if level is not None else f"kb_{slug}"


def op_type_of(path: Path, level: int | None) -> str | None:
    """A coarse operator family from the file name (None when nothing fits)."""
    stem = path.stem.lower()
    if level is not None and level >= 2:
        for pattern, op_type in _FUSED_OP_TYPES:
            if re.search(pattern, stem):
                return op_type
        return "fused"
    for pattern, op_type in _SINGLE_OP_TYPES:
        if re.search(pattern, stem):
            return op_type
    return None
