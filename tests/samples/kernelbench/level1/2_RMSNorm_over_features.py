import torch
import torch.nn as nn


class Model(nn.Module):
    """
    RMS normalisation over dim 1 of a 4-d tensor (a KernelArc test sample in KernelBench's style).
    Three of its size constants share one value on purpose.
    """

    def __init__(self, num_features: int, eps: float = 1e-5):
        super(Model, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inverse = torch.rsqrt(x.pow(2).mean(1, keepdim=True) + self.eps)
        return x * inverse


batch_size = 8
features = 32
dim1 = dim2 = 32


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
