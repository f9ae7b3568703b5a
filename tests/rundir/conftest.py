"""Fixtures for the run dir's tests: hand-built Attempts (the tracking tests' `build_attempt`)."""

from collections.abc import Callable

import pytest

from kernelarc.schema import Attempt
from tests.tracking.conftest import build_attempt

MakeAttempt = Callable[..., Attempt]


@pytest.fixture
def make_attempt() -> MakeAttempt:
    """Factory of small valid Attempts (see `tests.tracking.conftest.build_attempt`)."""
    return build_attempt
