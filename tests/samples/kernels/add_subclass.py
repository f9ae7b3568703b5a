import torch


class _Lazy(torch.Tensor):
    pass


def run(x, y):
    return (x + y).as_subclass(_Lazy)
