"""Workloads evaluated out of request order get the inputs of the request-order RNG stream."""

from pathlib import Path

import torch

from kernelarc.problems.files import load_problem
from kernelarc.runner.inputs import generate_inputs
from kernelarc.runner.stream_order import StreamCursor, evaluation_order
from kernelarc.schema import EvalRequest, Solution, Workload

PROBLEM = load_problem(Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add")
ROUNDS = 3


def _request(order: list[int] | None = None) -> EvalRequest:
    solution = Solution.model_validate(
        {
            "name": "s",
            "definition": PROBLEM.definition.name,
            "author": "t",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "k.py::run",
            },
            "sources": [{"path": "k.py", "content": "def run(x, y):\n    return x + y\n"}],
        }
    )
    return EvalRequest(
        definition=PROBLEM.definition,
        workloads=list(PROBLEM.workloads),
        solution=solution,
        correctness_rounds=ROUNDS,
        workload_order=order,
    )


def _draw(workload: Workload) -> list[object]:
    return list(generate_inputs(PROBLEM.definition, workload, "cpu", str(PROBLEM.path), None))


def _rounds(cursor: StreamCursor, index: int) -> list[list[object]]:
    cursor.move_to(index)
    drawn = [_draw(PROBLEM.workloads[index]) for _ in range(ROUNDS)]
    cursor.finished(index, every_round_drawn=True)
    return drawn


def _same(a: list[list[object]], b: list[list[object]]) -> bool:
    return all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
        for ra, rb in zip(a, b, strict=True)
        for x, y in zip(ra, rb, strict=True)
    )


def test_each_workload_gets_its_request_order_inputs_in_any_order() -> None:
    in_order = StreamCursor(_request(), _draw)
    expected = {i: _rounds(in_order, i) for i in (0, 1)}
    request = _request([1, 0])
    assert evaluation_order(request) == [1, 0]
    reordered = StreamCursor(request, _draw)
    got = {i: _rounds(reordered, i) for i in evaluation_order(request)}
    assert _same(got[1], expected[1]) and _same(got[0], expected[0])
    # Without positioning, the first workload drawn would take the stream's first values.
    assert not _same(expected[0][:1], expected[1][:1])


def test_after_a_stop_between_rounds_the_stream_is_repositioned() -> None:
    expected = _rounds(StreamCursor(_request(), _draw), 0)
    cursor = StreamCursor(_request(), _draw)
    cursor.move_to(0)
    _draw(PROBLEM.workloads[0])  # one round drawn, then the workload failed
    cursor.finished(0, every_round_drawn=False)
    sequential = StreamCursor(_request(), _draw)
    _rounds(sequential, 0)
    expected_1 = _rounds(sequential, 1)
    assert _same(_rounds(cursor, 1), expected_1)
    assert _same(_rounds(cursor, 0), expected)
