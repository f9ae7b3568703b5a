"""Writes one file in its temp dir until something stops it."""

_BLOCK = b"\0" * (1 << 20)


def run(x, y):
    with open("fill.bin", "wb") as handle:
        while True:
            handle.write(_BLOCK)
