"""The judge <-> worker wire: framed messages of a JSON header and an optional tensor blob.

A frame is `>IQ` (header bytes, blob bytes), the UTF-8 JSON header, then the blob. Values
(tensors and Python scalars) travel as `torch.save` bytes of compact CPU tensors (a view is
copied first, so its base's other elements never travel) and are read back with
`torch.load(weights_only=True)`, so a hostile worker cannot make the judge unpickle code; the
receiver caps header and blob sizes before allocating. A blob is neither copied into `bytes`
on either side nor wrapped in a copying `io.BytesIO` (a 64 MiB tensor cost three extra copies
per direction, on every correctness round of a large CPU workload). Worker replies are validated as
`WorkerReply` (unknown keys, wrong types and NaN are errors): the judge trusts them only for
verdicts that can hurt the candidate (a failure it reports), never for a pass.
"""

import io
import json
import socket
import struct
from collections.abc import Sequence
from typing import IO, Annotated, Any, Literal, cast

import torch
from pydantic import BaseModel, ConfigDict, Field

from kernelarc.runner.cuda_ipc import SharedValue

_FRAME = struct.Struct(">IQ")
MAX_HEADER_BYTES = 4 * 1024 * 1024

Value = torch.Tensor | int | float | bool
Blob = bytes | bytearray | memoryview
"""A frame's payload as sent or received (any contiguous bytes-like object)."""


class ChannelError(Exception):
    """The peer sent a malformed frame or a payload the receiver rejects."""


class ChannelClosed(ChannelError):
    """The peer closed the connection (a worker that died)."""


class WorkerReply(BaseModel):
    """What a worker answers to `ready`, `run`, `time` and `time_block` requests (untrusted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["ready", "import_error", "compile_error", "run", "time", "time_block"]
    """Which request this answers; `import_error`/`compile_error` end the worker's start."""
    error: str = Field(default="", max_length=MAX_HEADER_BYTES)
    """The candidate's failure (traceback), empty on success."""
    output_types: list[str] = Field(default_factory=list)
    """Qualified type name of each output, taken before serialisation (run)."""
    mutated_inputs: list[str] = Field(default_factory=list)
    """Inputs whose bits the call changed (run)."""
    latency_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Median latency the worker measured (time)."""
    timing_method: str = ""
    """How it was measured: `cupti`, `cuda_events` or `cpu_monotonic` (time)."""
    timing_note: str = Field(default="", max_length=64 * 1024)
    """Why a timing fallback was taken, if one was (time)."""
    samples_ms: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(
        default_factory=list, max_length=100_000
    )
    """The timed samples of one interleaved block, in order (time_block)."""
    tampered: list[str] = Field(default_factory=list)
    """Guarded functions no longer identical to their snapshot."""
    threads_started: int = Field(default=0, ge=0)
    """Threads started since the worker began (hooked `Thread.start`/`start_new_thread`)."""
    threads_alive: int = Field(default=0, ge=0)
    """`threading.active_count()` now."""
    context_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Seconds the worker took to make its CUDA context after its fork (ready)."""
    idle_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Seconds it then waited for its `setup` (ready): 0 when the candidate came before the
    context was made, so making it was on the candidate's path."""
    import_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Seconds from `setup` to the answer: staging, building and importing the candidate
    (ready, import_error, compile_error)."""
    shared: list[SharedValue] | None = Field(default=None, max_length=256)
    """The outputs as CUDA IPC descriptors (`cuda_ipc`) instead of a blob (run)."""
    ipc_failed: bool = False
    """The worker could not map the inputs the judge shared; send them by copy (run)."""


def send_message(sock: socket.socket, header: dict[str, Any], blob: Blob = b"") -> None:
    """Send one frame (blocking; honours the socket's timeout)."""
    data = json.dumps(header, allow_nan=False).encode("utf-8")
    sock.sendall(_FRAME.pack(len(data), memoryview(blob).nbytes) + data)
    if blob:
        sock.sendall(blob)


def _reject_constant(name: str) -> Any:
    msg = f"non-finite number {name} in a message header"
    raise ChannelError(msg)


def recv_message(sock: socket.socket, *, max_blob: int) -> tuple[dict[str, Any], bytearray]:
    """Receive one frame; ChannelClosed on EOF, ChannelError on a malformed or oversized one."""
    header_len, blob_len = _FRAME.unpack(recv_exact(sock, _FRAME.size))
    if header_len > MAX_HEADER_BYTES:
        msg = f"message header of {header_len} bytes exceeds {MAX_HEADER_BYTES}"
        raise ChannelError(msg)
    if blob_len > max_blob:
        msg = f"message payload of {blob_len} bytes exceeds the {max_blob} allowed"
        raise ChannelError(msg)
    try:
        header = json.loads(recv_exact(sock, header_len), parse_constant=_reject_constant)
    except ValueError as exc:
        msg = f"message header is not JSON: {exc}"
        raise ChannelError(msg) from exc
    if not isinstance(header, dict):
        msg = "message header is not a JSON object"
        raise ChannelError(msg)
    return header, _recv_into(sock, blob_len)


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Exactly `size` bytes; ChannelClosed when the peer closes first."""
    return bytes(_recv_into(sock, size))


def _recv_into(sock: socket.socket, size: int) -> bytearray:
    """Exactly `size` bytes, in the buffer they were received into."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:])
        if count == 0:
            msg = "the peer closed the connection"
            raise ChannelClosed(msg)
        got += count
    return buffer


def _compact_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself when it is a CPU tensor that spans its whole storage from offset 0
    (torch.save writes the storage: nothing else travels), else a compact CPU copy."""
    t = tensor.detach()
    if (
        t.device.type == "cpu"
        and t.is_contiguous()
        and t.storage_offset() == 0
        and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    ):
        return t
    return t.to(device="cpu", copy=True).contiguous()


def pack_values(values: Sequence[Any]) -> memoryview:
    """`torch.save` bytes of the values; tensors compact and on the CPU (see `_compact_cpu`)."""
    portable = [_compact_cpu(v) if isinstance(v, torch.Tensor) else v for v in values]
    buffer = io.BytesIO()
    torch.save(portable, buffer)
    return buffer.getbuffer()


class _BlobReader(io.RawIOBase):
    """A read-only, seekable file over a blob, without copying it (io.BytesIO copies)."""

    def __init__(self, blob: Blob) -> None:
        self._view = memoryview(blob).cast("B")
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._pos : self._pos + len(memoryview(buffer).cast("B"))]
        memoryview(buffer).cast("B")[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def unpack_values(blob: Blob, device: str) -> list[Value]:
    """Values saved by `pack_values`, tensors moved to `device`; ChannelError on anything else.

    `weights_only=True` refuses pickled code and tensor subclasses; only plain tensors and
    Python scalars in a list are accepted.
    """
    try:
        reader = cast(IO[bytes], _BlobReader(blob))  # a readable, seekable binary file
        loaded = torch.load(reader, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means a payload we do not accept
        msg = f"payload rejected by torch.load(weights_only=True): {type(exc).__name__}: {exc}"
        raise ChannelError(msg) from exc
    if type(loaded) is not list:
        msg = f"payload is a {type(loaded).__name__}, expected a list"
        raise ChannelError(msg)
    values: list[Value] = []
    for item in loaded:
        if type(item) is torch.Tensor:
            values.append(item.to(device))
        elif type(item) in (int, float, bool):
            values.append(item)
        else:
            msg = f"payload holds a {type(item).__name__}, expected tensors and scalars"
            raise ChannelError(msg)
    return values
