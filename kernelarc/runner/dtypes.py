"""Mapping from the SOL-ExecBench dtype names to torch dtypes (used for inputs and DPS outputs)."""

import torch

from kernelarc.schema import DType

_TORCH_DTYPES: dict[DType, torch.dtype] = {
    DType.FLOAT64: torch.float64,
    DType.FLOAT32: torch.float32,
    DType.FLOAT16: torch.float16,
    DType.BFLOAT16: torch.bfloat16,
    DType.FLOAT8_E4M3FN: torch.float8_e4m3fn,
    DType.FLOAT8_E5M2: torch.float8_e5m2,
    DType.INT64: torch.int64,
    DType.INT32: torch.int32,
    DType.INT16: torch.int16,
    DType.INT8: torch.int8,
    DType.BOOL: torch.bool,
}

FP8_DTYPES = frozenset({torch.float8_e4m3fn, torch.float8_e5m2})


def torch_dtype(dtype: DType) -> torch.dtype:
    """The torch dtype of a definition dtype; both fp4 names map to the packed fp4x2 type."""
    if dtype in (DType.FLOAT4_E2M1, DType.FLOAT4_E2M1FN_X2):
        fp4 = getattr(torch, "float4_e2m1fn_x2", None)
        if fp4 is None:
            msg = f"this torch ({torch.__version__}) has no float4_e2m1fn_x2 dtype"
            raise TypeError(msg)
        return fp4  # type: ignore[no-any-return]
    return _TORCH_DTYPES[dtype]


def is_fp4(dtype: DType) -> bool:
    """Packed fp4: two values per byte along the last dim, so that dim is halved in memory."""
    return dtype in (DType.FLOAT4_E2M1, DType.FLOAT4_E2M1FN_X2)
