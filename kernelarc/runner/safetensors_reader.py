"""A minimal reader of the safetensors format, for `safetensors` workload inputs.

The format is an 8-byte little-endian header length, a JSON header of
`{key: {dtype, shape, data_offsets}}` and the raw bytes. Reading it ourselves keeps the runner
free of a dependency the sandbox may not have.
"""

import json
import struct
from pathlib import Path

import torch

_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def load_tensor(path: Path, key: str) -> torch.Tensor:
    """Load one tensor (on the CPU) from a safetensors file; raise ValueError naming the problem."""
    data = path.read_bytes()
    if len(data) < 8:
        msg = f"{path}: too short to be a safetensors file"
        raise ValueError(msg)
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    if key not in header or key == "__metadata__":
        keys = sorted(k for k in header if k != "__metadata__")
        msg = f"{path}: no tensor {key!r} (keys: {keys})"
        raise ValueError(msg)
    entry = header[key]
    dtype = _DTYPES.get(entry["dtype"])
    if dtype is None:
        msg = f"{path}: tensor {key!r} has unsupported dtype {entry['dtype']!r}"
        raise ValueError(msg)
    start, end = entry["data_offsets"]
    raw = bytearray(data[8 + header_len + start : 8 + header_len + end])
    shape = [int(d) for d in entry["shape"]]
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(raw, dtype=dtype).reshape(shape).clone()
