"""Tries the test's listener on the host's loopback and a few outside addresses."""

import socket

PORT = int("__PORT__")
_TARGETS = [
    ("127.0.0.1", PORT),
    ("localhost", PORT),
    ("1.1.1.1", 443),
    ("8.8.8.8", 53),
    ("pypi.org", 443),
]


def _reached():
    reached = []
    for host, port in _TARGETS:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                reached.append(f"{host}:{port}")
        except OSError:
            pass
    return reached


REACHED = _reached()


def run(x, y):
    if REACHED:
        return x - y
    return x + y
