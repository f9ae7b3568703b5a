"""Returns a __torch_function__ subclass: work could happen after the timer stops."""

import torch


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def run(x, y):
    return (x + y).as_subclass(_Lazy)
