import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A convolution, a batch norm in training mode, and a bias add (a KernelArc test sample in
    KernelBench's style).
    """

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        return torch.relu(x) + self.bias


batch_size = 8
in_channels = 16
out_channels = 32
height, width = 32, 48
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
