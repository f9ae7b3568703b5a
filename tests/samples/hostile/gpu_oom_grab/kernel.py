"""Grabs GPU memory 1 GiB at a time until the device is full, on the 16-element workload only."""

import torch

_HOARD = []


def run(x, y):
    if x.numel() == 16:
        while True:
            _HOARD.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device))
    return x + y
