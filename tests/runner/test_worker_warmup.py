"""What a worker does before its candidate comes (kernelarc/runner/worker_warmup.py), on the CPU:
Triton's installation hash is computed ahead, so a candidate's first kernel does not pay it."""

import socket

import pytest

from kernelarc.runner import worker_warmup


def test_tritons_installation_hash_is_computed_ahead() -> None:
    cache = pytest.importorskip("triton.runtime.cache")
    key = getattr(cache, "triton_key", None)
    if key is None or not hasattr(key, "cache_clear"):
        pytest.skip("this Triton keeps no cached triton_key in triton.runtime.cache")
    key.cache_clear()
    worker_warmup._triton_key()
    assert key.cache_info().currsize == 1


def test_a_waiting_setup_is_seen() -> None:
    judge, worker = socket.socketpair()
    with judge, worker:
        assert not worker_warmup.setup_waiting(worker)
        judge.sendall(b"x")
        assert worker_warmup.setup_waiting(worker)
