import torch
import torch.nn as nn


class Model(nn.Module):
    """A sample whose constructor refuses its arguments."""

    def __init__(self, features):
        super(Model, self).__init__()
        if features % 3:
            raise ValueError(f"features must be a multiple of 3, got {features}")
        self.features = features

    def forward(self, x):
        return x * 2


batch_size = 4
features = 16


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
