"""The host's traced graphs (`kernelgen.traces`): one tracer subprocess per problem, then the
disk cache; an unreadable cache entry is traced again; a reference that cannot be traced is a
reason, never an exception (per workload when it raises, one line when the tracer fails, and
then nothing is cached)."""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gen_problems import write_problem

from kernelarc.kernelgen import traces
from kernelarc.schema.op_graph import TraceSet


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(traces.CACHE_ENV, str(tmp_path / "cache"))
    traces.clear_memory()
    yield tmp_path / "cache" / "traces"
    traces.clear_memory()


def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("traced again although the cache holds the graphs")

    monkeypatch.setattr(subprocess, "run", refuse)


def test_traced_once_then_read_from_disk(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = write_problem(tmp_path, "bias_gelu_scale")
    first = traces.load_traces(problem, ["workload.jsonl"])
    assert isinstance(first, TraceSet)
    assert all(w.graph is not None for w in first.workloads)
    (entry,) = cache.glob("*.json")
    traces.clear_memory()
    with monkeypatch.context() as patch:
        _no_subprocess(patch)
        again = traces.load_traces(problem, ["workload.jsonl"])
    assert again == first
    # An entry that no longer parses is traced again and rewritten.
    entry.write_text("{not json")
    traces.clear_memory()
    assert traces.load_traces(problem, ["workload.jsonl"]) == first
    assert TraceSet.model_validate_json(entry.read_text()) == first


def _with_reference(problem: Path, source: str) -> None:
    definition = json.loads((problem / "definition.json").read_text())
    definition["reference"] = source
    (problem / "definition.json").write_text(json.dumps(definition))


def test_a_reference_that_raises_is_a_reason_per_workload(tmp_path: Path, cache: Path) -> None:
    problem = write_problem(tmp_path, "bias_gelu_scale")
    _with_reference(problem, "def run(x, bias, scale):\n    raise RuntimeError('no graph')\n")
    result = traces.load_traces(problem, ["workload.jsonl"])
    assert isinstance(result, TraceSet)
    assert [w.graph for w in result.workloads] == [None, None]
    assert all("RuntimeError: no graph" in (w.error or "") for w in result.workloads)


def test_a_tracer_that_fails_is_a_reason_and_nothing_is_cached(tmp_path: Path, cache: Path) -> None:
    problem = write_problem(tmp_path, "bias_gelu_scale")
    _with_reference(problem, "def run(x, bias, scale)\n    return x\n")  # a syntax error
    result = traces.load_traces(problem, ["workload.jsonl"])
    assert isinstance(result, str) and result.startswith("tracing the reference failed"), result
    assert not cache.exists() or not list(cache.glob("*.json"))
