"""Evaluating workloads out of request order on the request-order RNG stream.

The official flow seeds once and draws every round's inputs from one continuing stream, so the
inputs of workload k depend on every round before it. A correctness screen evaluates the
smallest workload first (`EvalRequest.workload_order`); to give each workload exactly the
inputs it gets in request order, `StreamCursor` re-seeds and re-draws (and discards) the inputs
of the workloads before it whenever the stream does not already stand at its start. After a
workload whose every round was drawn the stream stands at the next one, so in request order
nothing is ever re-drawn. As for the screen before it, this assumes the reference draws no
random numbers (the judge's reference runs are not replayed).
"""

from collections.abc import Callable

from kernelarc.runner.inputs import seed_everything
from kernelarc.schema import EvalRequest, Workload


def evaluation_order(request: EvalRequest) -> list[int]:
    """Request indices in the order to evaluate them."""
    if request.workload_order is not None:
        return list(request.workload_order)
    return list(range(len(request.workloads)))


class StreamCursor:
    """Where the request-order RNG stream stands: at the start of workload `at` (None: unknown,
    after a workload that stopped between rounds)."""

    def __init__(
        self,
        request: EvalRequest,
        draw: Callable[[Workload], object],
        reseeded: Callable[[int], None] | None = None,
    ) -> None:
        """`draw(workload)` draws one round's inputs of `workload` (they are discarded here);
        `reseeded(seed)` is called after each seeding (the judge's stream key)."""
        self._request = request
        self._draw = draw
        self._reseeded = reseeded
        self._seed()
        self.at: int | None = 0

    def _seed(self) -> None:
        seed_everything(self._request.seed)
        if self._reseeded is not None:
            self._reseeded(self._request.seed)

    def move_to(self, index: int) -> None:
        """Make the stream stand at the start of workload `index`; raises what `draw` raises."""
        if self.at == index:
            return
        self.at = None
        self._seed()
        for workload in self._request.workloads[:index]:
            for _ in range(self._request.correctness_rounds):
                self._draw(workload)
        self.at = index

    def finished(self, index: int, every_round_drawn: bool) -> None:
        """Workload `index` ended; with all its rounds drawn the stream stands at the next."""
        self.at = index + 1 if every_round_drawn else None
