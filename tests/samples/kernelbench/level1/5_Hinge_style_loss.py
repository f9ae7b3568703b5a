import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A hinge-style loss whose inputs broadcast against each other, so its two size constants
    only work when they stay equal; returns a 0-d tensor (a KernelArc test sample).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 1024
input_shape = (1024,)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]


def get_init_inputs():
    return []
