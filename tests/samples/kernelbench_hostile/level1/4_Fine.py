import torch
import torch.nn as nn


class Model(nn.Module):
    """A well-behaved sample after the hostile ones."""

    def forward(self, x):
        return torch.sigmoid(x)


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
