import torch
import torch.nn as nn


class Model(nn.Module):
    """A sample whose forward has a syntax error."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x

batch_size = 4
dim = 16


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
