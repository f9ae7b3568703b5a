import torch


def run(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    torch.add(x, y, out=out)
