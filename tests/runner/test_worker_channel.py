"""The judge <-> worker wire and the fork server, in process (real sockets, real forks)."""

import io
import os
import pickle
import signal
import socket

import pytest
import torch

from kernelarc.runner.channel import (
    ChannelClosed,
    ChannelError,
    pack_values,
    recv_message,
    send_message,
    unpack_values,
)
from kernelarc.runner.hack_checks import same_bits
from kernelarc.runner.zygote import Zygote, describe_wait_status


def test_values_round_trip_with_their_dtypes_and_compact_storage() -> None:
    big = torch.arange(1000, dtype=torch.float32)
    values: list[object] = [
        big[:10],  # a view: only its 10 elements travel
        torch.randn(3, 4).t(),
        torch.randn(5).to(torch.bfloat16),
        torch.randn(5).to(torch.float8_e4m3fn),
        torch.tensor([True, False]),
        torch.tensor(7, dtype=torch.int64),
        3,
        2.5,
        True,
    ]
    blob = pack_values(values)
    assert len(blob) < 1000 * 4
    back = unpack_values(blob, "cpu")
    for sent, got in zip(values, back, strict=True):
        if isinstance(sent, torch.Tensor):
            assert type(got) is torch.Tensor and got.dtype == sent.dtype
            assert same_bits(got, sent)
        else:
            assert got == sent and type(got) is type(sent)


class _Sub(torch.Tensor):
    pass


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: [torch.ones(2).as_subclass(_Sub)], id="tensor-subclass"),
        pytest.param(lambda: [_Payload()], id="pickled-callable"),
        pytest.param(lambda: {"out": torch.ones(2)}, id="not-a-list"),
        pytest.param(lambda: ["text"], id="string-value"),
    ],
)
def test_unpack_rejects_anything_but_plain_tensors_and_scalars(make: object) -> None:
    buffer = io.BytesIO()
    torch.save(make(), buffer, pickle_protocol=pickle.DEFAULT_PROTOCOL)  # type: ignore[operator]
    with pytest.raises(ChannelError):
        unpack_values(buffer.getvalue(), "cpu")


def test_frames_are_capped_and_eof_is_closed() -> None:
    a, b = socket.socketpair()
    with a, b:
        send_message(a, {"kind": "run"}, b"x" * 100)
        with pytest.raises(ChannelError, match="exceeds"):
            recv_message(b, max_blob=10)
    a, b = socket.socketpair()
    with b:
        a.sendall(b"\x00\x00\x00\x0b" + b"\x00" * 8 + b'{"v": NaN}\x00')
        with pytest.raises(ChannelError, match="non-finite"):
            recv_message(b, max_blob=10)
        a.close()
        with pytest.raises(ChannelClosed):
            recv_message(b, max_blob=10)


def _echo_worker(sock: socket.socket) -> None:
    header, blob = recv_message(sock, max_blob=1 << 20)
    if header.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    send_message(sock, {"pid": os.getpid(), "stdin_closed": os.read(0, 1) == b""}, blob)
    os._exit(3)


def test_zygote_forks_workers_and_reports_how_they_ended() -> None:
    zygote = Zygote(_echo_worker)
    try:
        pid, sock = zygote.spawn()
        with sock:
            send_message(sock, {}, b"abc")
            header, blob = recv_message(sock, max_blob=10)
        assert header == {"pid": pid, "stdin_closed": True} and blob == b"abc"
        assert describe_wait_status(zygote.reap(pid)) == "exited with code 3"
        pid, sock = zygote.spawn()
        with sock:
            send_message(sock, {"die": True})
            with pytest.raises(ChannelClosed):
                recv_message(sock, max_blob=10)
        assert describe_wait_status(zygote.reap(pid)) == "was killed by SIGKILL"
    finally:
        zygote.close()
