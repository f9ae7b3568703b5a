import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer, a scale and a tanh (a KernelArc test sample in KernelBench's style).
    """

    def __init__(self, in_features, out_features, scale):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        return torch.tanh(x * self.scale)


batch_size = 64
in_features = 1024
out_features = 512
scale = 0.5


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
