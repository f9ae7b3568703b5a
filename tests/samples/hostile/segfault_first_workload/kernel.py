"""Segfaults on the 16-element workload only; correct on the others."""

import ctypes


def run(x, y):
    if x.numel() == 16:
        ctypes.string_at(0)
    return x + y
