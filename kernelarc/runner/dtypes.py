"""SOL-ExecBench dtype names to torch dtypes, and the packed FP4 (E2M1) encoding.

FP4 E2M1 has 16 codes: bit 3 is the sign, bits 0-2 index the magnitudes
0, 0.5, 1, 1.5, 2, 3, 4, 6. Two codes share a byte; along the last dim, the element with the
even index sits in the low nibble and the odd one in the high nibble, so a packed tensor's last
dim is half the logical one. Quantisation rounds to the nearest magnitude with ties going to the
even code and saturates at 6 (the official generator's ranges).
"""

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

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The value of magnitude code 0..7."""

# Midpoints between neighbouring magnitudes, and whether a value exactly on the midpoint rounds
# up (to an even code) or stays down (the lower code is the even one).
_E2M1_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False))
_E2M1_MIDPOINTS_HIGH = ((3.5, True), (5.0, False))


def fp4_dtype() -> torch.dtype:
    """torch's packed fp4x2 dtype; TypeError on a torch without it."""
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4 is None:
        msg = f"this torch ({torch.__version__}) has no float4_e2m1fn_x2 dtype"
        raise TypeError(msg)
    return fp4  # type: ignore[no-any-return]


def torch_dtype(dtype: DType) -> torch.dtype:
    """The torch dtype of a definition dtype; both fp4 names map to the packed fp4x2 type."""
    if is_fp4(dtype):
        return fp4_dtype()
    return _TORCH_DTYPES[dtype]


def is_fp4(dtype: DType) -> bool:
    """Packed fp4: two values per byte along the last dim, so that dim is halved in memory."""
    return dtype in (DType.FLOAT4_E2M1, DType.FLOAT4_E2M1FN_X2)


def is_fp4_torch(dtype: torch.dtype) -> bool:
    """Whether a torch dtype is the packed fp4x2 type (False on a torch without it)."""
    return dtype == getattr(torch, "float4_e2m1fn_x2", None)


def e2m1_codes(values: torch.Tensor) -> torch.Tensor:
    """Nearest E2M1 code (uint8 in 0..15) of every element; NaN gives 0, -0.0 gives +0."""
    x = values.to(torch.float32)
    mag = x.abs()
    code = torch.zeros(x.shape, dtype=torch.uint8, device=x.device)
    for threshold, tie_up in _E2M1_MIDPOINTS + _E2M1_MIDPOINTS_HIGH:
        above = mag >= threshold if tie_up else mag > threshold
        code += above.to(torch.uint8)
    code += (x < 0).to(torch.uint8) * 8
    return code


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Pack uint8 codes two per byte along the last dim (even index low nibble), as fp4x2."""
    if codes.dim() == 0 or codes.shape[-1] % 2:
        msg = f"packing fp4 needs an even last dim, got shape {tuple(codes.shape)}"
        raise ValueError(msg)
    low = codes[..., 0::2]
    high = codes[..., 1::2]
    return (low | (high << 4)).contiguous().view(fp4_dtype())


def quantize_fp4x2(values: torch.Tensor) -> torch.Tensor:
    """Quantise a float tensor to E2M1 and pack it: shape (..., n) -> fp4x2 (..., n // 2)."""
    return pack_e2m1(e2m1_codes(values))


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Codes (uint8, 0..15) of a packed fp4x2 (or uint8) tensor: last dim doubles."""
    raw = packed.view(torch.uint8)
    codes = torch.stack((raw & 0x0F, raw >> 4), dim=-1)
    return codes.reshape(*raw.shape[:-1], raw.shape[-1] * 2)


def e2m1_to_float(codes: torch.Tensor) -> torch.Tensor:
    """float32 values of E2M1 codes."""
    table = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=codes.device)
    mag = table[(codes & 0x07).long()]
    return torch.where((codes & 0x08) != 0, -mag, mag)


def fp4x2_to_float(packed: torch.Tensor) -> torch.Tensor:
    """Unpacked float32 values of a packed fp4x2 tensor (the last dim doubles)."""
    return e2m1_to_float(unpack_e2m1(packed))
