"""Fixtures of the LLM tests: a real local OpenAI-compatible server and the vector_add sample."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_server import ChatServer

from kernelarc.problems.files import Problem, load_problem

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "problems"


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
def vector_add() -> Problem:
    return load_problem(SAMPLES / "vector_add")
