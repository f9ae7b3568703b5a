"""Fixtures of the command-line tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernelarc_command import private_tmpdir


@pytest.fixture
def tmpdir_() -> Iterator[Path]:
    """A private TMPDIR for the command (what it leaves there is checked)."""
    with private_tmpdir() as path:
        yield path
