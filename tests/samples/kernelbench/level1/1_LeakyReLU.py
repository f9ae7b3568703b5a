import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Applies a LeakyReLU with a configurable slope (a KernelArc test sample in KernelBench's style).
    """

    def __init__(self, negative_slope: float = 0.01):
        super(Model, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 16
dim = 65536
negative_slope = 0.05


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [negative_slope]
