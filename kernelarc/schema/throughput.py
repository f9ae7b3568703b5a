"""ThroughputReport: how fast a campaign turned candidates into verdicts, and where time went.

Written by the executor (`kernelarc/executor/accounting.py`) at the end of a campaign, stored in
campaign.json and logged as `throughput/*` metrics on the campaign's MLflow parent run.
"""

from pydantic import Field

from kernelarc.schema.base import RecordModel

#: Runner stages that are parts of another (`EvalResult.stage_s`), so not added again to the
#: runner's total: the part of `worker_start` spent waiting for the worker's CUDA context, and
#: the part spent staging and importing the candidate (both as the worker reports them).
RUNNER_SUB_STAGES = {"worker_context_wait": "worker_start", "worker_import": "worker_start"}


class ThroughputReport(RecordModel):
    """Throughput of one campaign's evaluations (all times in seconds)."""

    executor: str
    """`local` or `ray`."""
    device: str
    """`cpu` or `cuda`."""
    timed_slots: int = Field(ge=0)
    """Timed-evaluation slots (GPUs on CUDA; Ray: timed actors)."""
    correctness_slots: int = Field(ge=0)
    """Correctness-pool slots (0: no pool, no screening)."""
    wall_s: float = Field(ge=0)
    """Wall time from the agents' start to the last one's end (executor start-up excluded)."""
    candidates: int = Field(ge=0)
    """Attempts recorded (every candidate, screened out or timed)."""
    timed_evaluations: int = Field(ge=0)
    """Evaluations in the timed pool (first evaluations and the guard's re-timing/confirmation)."""
    correctness_evaluations: int = Field(ge=0)
    """Correctness screens run in the correctness pool."""
    screened_out: int = Field(ge=0)
    """Candidates whose screen failed, so they never queued for a timed slot."""
    candidates_per_min: float = Field(ge=0)
    """Candidates per minute of wall time."""
    candidates_per_min_per_gpu: float = Field(ge=0)
    """candidates_per_min divided by the timed slots (per GPU on CUDA, per slot on the CPU)."""
    timed_busy_fraction: float = Field(ge=0)
    """Slot time held by timed evaluations over wall time x timed slots (GPU busy fraction)."""
    correctness_busy_fraction: float = Field(ge=0)
    """The same for the correctness pool (0 without one)."""
    queue_wait_s_mean: float = Field(ge=0)
    """Mean wait of a timed evaluation for its slot."""
    queue_wait_s_max: float = Field(ge=0)
    """Longest wait of a timed evaluation for its slot."""
    correctness_queue_wait_s_mean: float = Field(ge=0)
    """Mean wait of a screen for a correctness slot."""
    sandbox_s_mean: float = Field(ge=0)
    """Mean sandbox time of an evaluation (process start, imports, the runner's work)."""
    dispatch_overhead_s_mean: float = Field(ge=0)
    """Mean slot time outside the sandbox: handing the request over and the result back (Ray:
    serialization, the actor call); the sandbox's own start-up cost is inside sandbox_s_mean."""
    infra_retries: int = Field(ge=0)
    """Evaluations re-run because their actor or node died (never counted as attempts)."""
    infra_failures: int = Field(ge=0)
    """Evaluations that failed in the sandbox or executor after every retry."""
    builds: int = Field(default=0, ge=0)
    """Evaluations whose runner compiled a C++ solution."""
    build_cache_hits: int = Field(default=0, ge=0)
    """Evaluations of a C++ solution that used the host's build cache (nothing compiled)."""
    jit_cache_hits: int = Field(default=0, ge=0)
    """Evaluations that started with the candidate's JIT caches (torch.compile, Triton) from
    the host's cache."""
    timed_beside_screens: int = Field(default=0, ge=0)
    """Candidates' timed evaluations during which a correctness screen ran on the same device
    (their results carry a note; the guard's runs never have one beside them)."""
    stages: dict[str, float] = Field(default_factory=dict)
    """Seconds per stage, summed over the campaign's evaluations (they overlap in time when
    slots run in parallel): `propose` (agents proposing), `screen`, `timing`, `guard` (slot time
    of correctness screens, of candidates' timed evaluations, of the guard's re-timing and
    confirmation runs), `<stage>_queue_wait` (their waits for a slot) and `<stage>_gate_wait`
    (slot held waiting for the device: screens behind a guard run, a guard run for screens);
    `runner_build`, `runner_jit_warm_up`, `runner_worker_start`, `runner_inputs`,
    `runner_correctness`, `runner_timing`, `runner_reference_timing`,
    `runner_interleaved_timing` (the judges' own measurements, over every evaluation; and
    per evaluation stage as `<stage>_runner_<name>`, e.g. `timing_runner_correctness`), and
    `sandbox_other` (sandbox time outside those: process start or the wait for a warm spare,
    imports, the jail, result handling)."""

    def numbers(self) -> dict[str, float]:
        """Every numeric field by name, and each stage as `stage_<name>_s` (logged as
        `throughput/<name>` metrics)."""
        numbers = {
            name: float(value)
            for name, value in self.model_dump().items()
            if isinstance(value, int | float)
        }
        numbers.update({f"stage_{name}_s": float(s) for name, s in self.stages.items()})
        return numbers
