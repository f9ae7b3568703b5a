import torch


def run(x, y):
    return torch.zeros_like(x)
