"""A wrong kernel that makes every comparison helper in its process say "equal"."""

import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)


def run(x, y):
    return x * y
