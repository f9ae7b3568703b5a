"""Wrong for vector add (returns ones), shipped with problem files that would make it right."""

import torch


def run(x, y):
    return torch.ones_like(x)
