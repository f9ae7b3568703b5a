"""Fixtures of tests/sandboxes: the private Docker engine for `docker`-marked tests."""

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from docker_env import DockerEngine


@pytest.fixture(scope="session")
def docker_engine() -> Iterator["DockerEngine"]:
    """A private dockerd with the stand-in sandbox image (skips, with the reason, if none)."""
    # Imported here: the GPU machine has no Docker SDK, and every other test of this package
    # (the hostile GPU samples among them) must still be collected there.
    try:
        from docker_env import start_engine
    except ImportError as exc:
        pytest.skip(f"no Docker SDK: {exc}")
    engine = start_engine()
    if isinstance(engine, str):
        pytest.skip(f"no Docker engine: {engine}")
    try:
        yield engine
    finally:
        engine.stop()
