import torch


def run(x, y):
    return torch.full_like(x, float("nan"))
