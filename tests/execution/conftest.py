"""Fixtures of tests/execution: the private Docker engine for `docker`-marked tests."""

from collections.abc import Iterator

import pytest
from docker_env import DockerEngine, start_engine


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerEngine]:
    """A private dockerd with the stand-in sandbox image (skips, with the reason, if none)."""
    engine = start_engine()
    if isinstance(engine, str):
        pytest.skip(f"no Docker engine: {engine}")
    try:
        yield engine
    finally:
        engine.stop()
