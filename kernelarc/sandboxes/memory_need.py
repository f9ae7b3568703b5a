"""How much memory an evaluation needs: the problem's tensors times the copies the protocol makes.

Place in the flow: sandboxes size their memory limits with `memory_need(request)` before a runner
gets the request (`request_limits.py`): the configured limit (`sandbox.memory_limit_gb`) is what
a runner process needs beyond the problem's data (Python, torch, the candidate's scratch), and
the data comes on top, so a large problem is not killed by a limit sized for small ones. Pure:
the definition's shapes and dtypes under each workload's axes, nothing measured.

Copies per process, for the largest workload (CPU; on CUDA the tensors live on the GPU):
- the judge: the round's inputs, the reference's own copies of them, the packed message to the
  worker (a copy, the serialisation buffer and its bytes), the timing pool; the reference's
  outputs, the worker's outputs as bytes and as tensors, and the comparison's temporaries;
- a worker: the received message and its tensors, the timing pool, the previous round's inputs;
  its outputs, their packed message and the destination-passing pool;
- the reference alone (the least any evaluation of the problem needs): its inputs, its own
  copies of them and its outputs. When that exceeds what the sandbox may use, the problem does
  not fit the machine: an infrastructure error, never the candidate's fault.
"""

from dataclasses import dataclass
from pathlib import Path

from kernelarc.schema import Definition, EvalRequest, Workload

GIB = 1024**3
JUDGE_INPUT_COPIES = 6
JUDGE_OUTPUT_COPIES = 7
WORKER_INPUT_COPIES = 5
WORKER_OUTPUT_COPIES = 6
REFERENCE_INPUT_COPIES = 2
REFERENCE_OUTPUT_COPIES = 1


def workload_bytes(definition: Definition, workload: Workload) -> tuple[int, int]:
    """(input bytes, output bytes) of one workload's tensors (scalars count 0).

    Raises:
        ValueError: the workload does not bind the definition's var axes.
    """
    return definition.tensor_bytes(workload.axes)


@dataclass(frozen=True)
class MemoryNeed:
    """The data an evaluation holds per process, for its largest workload."""

    workload: str
    """The largest workload's uuid ('' without tensors)."""
    input_bytes: int
    """Its input tensors."""
    output_bytes: int
    """Its output tensors."""
    on_host: bool = True
    """False on CUDA: the tensors live on the GPU, host copies are not counted."""

    @property
    def judge_bytes(self) -> int:
        """What the judge process holds at most."""
        if not self.on_host:
            return 0
        return JUDGE_INPUT_COPIES * self.input_bytes + JUDGE_OUTPUT_COPIES * self.output_bytes

    @property
    def worker_bytes(self) -> int:
        """What one worker process holds at most."""
        if not self.on_host:
            return 0
        return WORKER_INPUT_COPIES * self.input_bytes + WORKER_OUTPUT_COPIES * self.output_bytes

    @property
    def reference_bytes(self) -> int:
        """What running the reference alone on the inputs holds: the least any evaluation of
        this problem needs."""
        if not self.on_host:
            return 0
        return (
            REFERENCE_INPUT_COPIES * self.input_bytes + REFERENCE_OUTPUT_COPIES * self.output_bytes
        )

    def describe(self) -> str:
        """One line: the workload and its data."""
        return (
            f"workload {self.workload}: {self.input_bytes / GIB:.3g} GiB of inputs, "
            f"{self.output_bytes / GIB:.3g} GiB of outputs"
        )


def memory_need(request: EvalRequest) -> MemoryNeed:
    """The need of the request's largest workload (by input plus output bytes); a workload
    whose axes do not resolve counts 0 (the runner reports its error)."""
    best = MemoryNeed("", 0, 0, on_host=request.device != "cuda")
    for workload in request.workloads:
        try:
            inputs, outputs = workload_bytes(request.definition, workload)
        except (ValueError, KeyError):
            continue
        if inputs + outputs > best.input_bytes + best.output_bytes:
            best = MemoryNeed(workload.uuid, inputs, outputs, on_host=best.on_host)
    return best


def machine_memory_bytes() -> int | None:
    """This machine's physical memory (MemTotal), None when /proc/meminfo cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
