"""Shared pytest hooks: files with `slow` tests first; skip `gpu`-marked tests without CUDA."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _slow_files_first(items)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    import torch  # lazily: only sessions that collected gpu tests pay for the import

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


def _slow_files_first(items: list[pytest.Item]) -> None:
    """Move every file holding a `slow` test ahead of the others, keeping each file's tests
    together and in order. `pytest -n 2 --dist loadfile` hands files to workers in this order,
    so the long files start first and short ones fill the gaps at the end, instead of one
    worker still running a long file the other has no work left to share."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)
