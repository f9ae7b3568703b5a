"""Hoards touched memory in 64 MiB blocks until something stops it, on the 16-element workload."""

import torch


def run(x, y):
    if x.numel() == 16:
        hoard = []
        while True:
            hoard.append(torch.ones(16 * 2**20))  # 64 MiB, written so it is resident
    return x + y
