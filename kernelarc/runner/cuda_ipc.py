"""CUDA tensors between the judge and a solution worker by IPC handle instead of by copy.

On the GPU a correctness round used to move every input from the judge to the worker and every
output back as `torch.save` bytes over the socket: GPU -> host -> socket -> host -> GPU, ~1 s per
direction for a 512 MiB tensor, several times per workload. Here only a small descriptor per
tensor travels (`SharedValue`, in the JSON header); the receiver maps the sender's device memory
(`cudaIpcOpenMemHandle`, through torch's own storage sharing) and reads it in place.

Who can reach what:
- judge -> worker: the judge first copies the inputs into a private memory pool that holds
  nothing else (`StagingPool`), because an IPC handle opens the whole allocation segment, not
  just one tensor. The worker can read and write only those copies; the judge keeps and checks
  its own originals, so scribbling on them hurts nobody but the candidate.
- worker -> judge: the worker shares its outputs; the judge clones them into its own memory at
  once and never runs anything on the mapped memory. A descriptor is validated before use
  (dtype, shape, strides, offsets within the claimed storage). A worker that lies about the size
  of its own allocation can at worst make the judge's copy fault, which ends this candidate's
  evaluation as a RUNTIME_ERROR; it can never turn a failure into a pass.

Everything here is an optimisation with a fallback: where sharing is not possible (no
`torch.cuda.MemPool`, a zero-sized storage, an output that is itself a mapped input, or any
error) the values travel as before (`channel.pack_values`).
"""

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

_MAX_DIMS = 16
_HANDLE_HEX = 4096

#: dtypes a value may have on the wire (the format's dtypes, in torch's names).
DTYPES: dict[str, torch.dtype] = {
    name: dtype
    for name, dtype in {
        "float64": torch.float64,
        "float32": torch.float32,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
        "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None),
        "float8_e5m2": getattr(torch, "float8_e5m2", None),
        "float4_e2m1fn_x2": getattr(torch, "float4_e2m1fn_x2", None),
        "int64": torch.int64,
        "int32": torch.int32,
        "int16": torch.int16,
        "int8": torch.int8,
        "uint8": torch.uint8,
        "bool": torch.bool,
    }.items()
    if dtype is not None
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}


class SharingUnavailable(Exception):
    """These values cannot be shared by IPC here; send them by copy."""


class SharedValue(BaseModel):
    """One value on the wire: a Python scalar, or a CUDA tensor as an IPC descriptor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["tensor", "int", "float", "bool"]
    scalar: int | float | bool | None = None
    """The value of a scalar (kind != tensor)."""
    dtype: str = ""
    shape: list[int] = Field(default_factory=list, max_length=_MAX_DIMS)
    stride: list[int] = Field(default_factory=list, max_length=_MAX_DIMS)
    offset: int = Field(default=0, ge=0)
    """The tensor's storage offset, in elements."""
    storage: list[Any] = Field(default_factory=list, max_length=8)
    """`UntypedStorage._share_cuda_()` as JSON: bytes fields as hex strings."""


def sharing_supported() -> bool:
    """Whether this torch can stage values in a private CUDA memory pool and share them."""
    return (
        torch.cuda.is_available()
        and hasattr(torch.cuda, "MemPool")
        and hasattr(torch.cuda, "use_mem_pool")
        and hasattr(torch.UntypedStorage, "_share_cuda_")
        and hasattr(torch.UntypedStorage, "_new_shared_cuda")
    )


def _json_field(value: Any) -> Any:
    return {"hex": value.hex()} if isinstance(value, bytes) else value


def _bytes_field(value: Any) -> Any:
    if isinstance(value, dict):
        text = value.get("hex")
        if not isinstance(text, str) or len(text) > _HANDLE_HEX:
            msg = "malformed handle in a shared tensor"
            raise ValueError(msg)
        return bytes.fromhex(text)
    return value


def describe(values: Sequence[Any]) -> list[SharedValue]:
    """Descriptors of `values` (CUDA tensors this process owns, or scalars).

    Raises:
        SharingUnavailable: a value cannot be shared (not a plain CUDA tensor, empty storage,
            memory this process itself mapped from another one, ...).
    """
    out: list[SharedValue] = []
    for value in values:
        if type(value) is bool:
            out.append(SharedValue(kind="bool", scalar=value))
        elif type(value) is int:
            out.append(SharedValue(kind="int", scalar=value))
        elif type(value) is float:
            out.append(SharedValue(kind="float", scalar=value))
        elif type(value) is torch.Tensor and value.is_cuda and value.dtype in _NAMES:
            storage = value.untyped_storage()
            if storage.nbytes() == 0:
                msg = "an empty storage has no IPC handle"
                raise SharingUnavailable(msg)
            try:
                shared = storage._share_cuda_()  # type: ignore[no-untyped-call, unused-ignore]
            except Exception as exc:  # e.g. a storage received from another process
                raise SharingUnavailable(str(exc)) from exc
            out.append(
                SharedValue(
                    kind="tensor",
                    dtype=_NAMES[value.dtype],
                    shape=list(value.shape),
                    stride=list(value.stride()),
                    offset=value.storage_offset(),
                    storage=[_json_field(v) for v in shared],
                )
            )
        else:
            msg = f"a {type(value).__name__} cannot be shared by IPC"
            raise SharingUnavailable(msg)
    return out


def _check_view(desc: SharedValue, storage_bytes: int) -> torch.dtype:
    """The descriptor's dtype, once its view is known to lie inside `storage_bytes`."""
    dtype = DTYPES.get(desc.dtype)
    if dtype is None:
        msg = f"unknown dtype {desc.dtype!r}"
        raise ValueError(msg)
    if len(desc.shape) != len(desc.stride):
        msg = "shape and stride differ in length"
        raise ValueError(msg)
    if any(s < 0 for s in desc.shape) or any(s < 0 for s in desc.stride):
        msg = "negative size or stride"
        raise ValueError(msg)
    item = torch.empty((), dtype=dtype).element_size()
    if 0 not in desc.shape:
        last = desc.offset + sum((n - 1) * s for n, s in zip(desc.shape, desc.stride, strict=True))
        if (last + 1) * item > storage_bytes:
            msg = f"view ends at byte {(last + 1) * item}, past its {storage_bytes}-byte storage"
            raise ValueError(msg)
    return dtype


def open_values(descs: Sequence[SharedValue], *, copy: bool) -> list[Any]:
    """The values behind `descs`; with `copy` each tensor is cloned into this process's memory.

    Raises:
        ValueError: a descriptor is malformed or its view leaves its storage.
        RuntimeError: the IPC handle cannot be opened.
    """
    values: list[Any] = []
    for desc in descs:
        if desc.kind != "tensor":
            caster = {"int": int, "float": float, "bool": bool}[desc.kind]
            if type(desc.scalar) is not caster:
                msg = f"a {desc.kind} scalar holds {type(desc.scalar).__name__}"
                raise ValueError(msg)
            values.append(desc.scalar)
            continue
        if len(desc.storage) != 8:
            msg = "malformed storage descriptor"
            raise ValueError(msg)
        fields = [_bytes_field(v) for v in desc.storage]
        size = fields[2]
        if type(size) is not int or size <= 0:
            msg = "malformed storage size"
            raise ValueError(msg)
        dtype = _check_view(desc, size)
        # torch's lazy CUDA init also sets up the caching allocator, which maps IPC handles:
        # without it `_new_shared_cuda` crashes a process that has not touched CUDA yet.
        torch.cuda.init()  # type: ignore[no-untyped-call, unused-ignore]
        storage = torch.UntypedStorage._new_shared_cuda(*fields)
        view = torch.empty((), dtype=dtype, device=storage.device)
        view.set_(storage, desc.offset, desc.shape, desc.stride)
        values.append(view.clone() if copy else view)
    return values


class StagingPool:
    """The judge's private CUDA memory pool for the copies it shares with a worker."""

    def __init__(self) -> None:
        """A fresh pool (only staged copies ever live in its segments)."""
        self._pool = torch.cuda.MemPool()

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        with torch.cuda.use_mem_pool(self._pool):
            yield

    def stage(self, values: Sequence[Any]) -> tuple[list[Any], list[SharedValue]]:
        """Copies of `values` in the pool (keep them alive until the worker answered) and
        their descriptors.

        Raises:
            SharingUnavailable: a value cannot be staged or shared.
        """
        staged: list[Any] = []
        with self._active():
            for value in values:
                if isinstance(value, torch.Tensor):
                    if not value.is_cuda or value.numel() == 0:
                        msg = "only non-empty CUDA tensors are staged"
                        raise SharingUnavailable(msg)
                    staged.append(value.detach().clone())
                else:
                    staged.append(value)
        torch.cuda.synchronize()
        return staged, describe(staged)
