"""KernelArc's own records: runner requests/results, proposals and attempts."""

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from kernelarc.schema.base import RecordModel
from kernelarc.schema.build import BuildInfo, PrebuiltExtension
from kernelarc.schema.coordination import LLMExchange
from kernelarc.schema.definition import Definition
from kernelarc.schema.guard_record import GuardRecord
from kernelarc.schema.solution import Solution
from kernelarc.schema.trace import EvalStatus, Trace
from kernelarc.schema.workload import Workload

OFFICIAL_SEED = 200


def utc_now() -> str:
    """Current UTC time in ISO 8601 (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class TimingConfig(RecordModel):
    """How the runner times a passing solution (official defaults: 10 warm-up, 50 timed)."""

    warmup: int = Field(default=10, ge=0)
    """Untimed iterations before timing."""
    iterations: int = Field(default=50, ge=1)
    """Timed iterations; the median is reported."""
    flush_l2: bool = True
    """Zero a 2x-L2 buffer before each CUDA iteration."""
    time_reference: bool = True
    """Also time the reference on the same inputs."""
    budget_s: float | None = Field(default=None, gt=0)
    """CPU only: the timed loop stops once its samples add up to this many seconds (after at
    least `timing.CPU_MIN_SAMPLES`), so large CPU workloads do not take `iterations` slow calls;
    None: exactly `iterations` (CUDA always)."""
    interleave: bool = True
    """KernelArc addition: after the official timing, time the reference and the solution again
    in alternating blocks (ABBA order) in one session, for a repeatable speedup with a
    confidence interval (`Performance.speedup_ci_*`; docs/runner.md "Interleaved
    timing"). Needs `time_reference`; the official numbers are unchanged by it."""
    block_calls: int = Field(default=10, ge=1)
    """Timed calls per interleaved block (never more than `iterations`)."""
    block_warmup: int = Field(default=1, ge=0)
    """Untimed calls at the start of every interleaved block (the other side just ran)."""
    min_block_pairs: int = Field(default=4, ge=2)
    """Reference/solution block pairs before the interval may stop the stage."""
    max_block_pairs: int = Field(default=16, ge=2)
    """Block pairs at most; the stage stops earlier once the interval is narrow enough."""
    ci_half_width: float = Field(default=0.01, gt=0)
    """Stop once the interval's half-width is at most this fraction of the estimate."""
    ci_confidence: float = Field(default=0.95, gt=0, lt=1)
    """Two-sided confidence level of the speedup interval."""
    interleave_budget_s: float = Field(default=5.0, gt=0)
    """No block pair beyond `min_block_pairs` starts once the blocks' timed samples (both
    sides) add up to this many seconds (`budget_s` instead on the CPU when set)."""
    timing_core: int | None = Field(default=None, ge=0)
    """A CPU core the host reserves for timing: the judge's and the worker's timing threads run
    on it during the interleaved blocks (and the CPU timed loops). None: CUDA timing is not
    pinned (parallel sandboxes would all pick the same core), and CPU loops use the last core
    of the process's affinity set, as before."""

    @model_validator(mode="after")
    def _pairs_ordered(self) -> "TimingConfig":
        if self.max_block_pairs < self.min_block_pairs:
            msg = (
                f"timing.max_block_pairs ({self.max_block_pairs}) is below "
                f"timing.min_block_pairs ({self.min_block_pairs}); raise max_block_pairs"
            )
            raise ValueError(msg)
        return self


class HangPolicy(RecordModel):
    """When the judge calls a silent candidate hung (docs/runner.md, "Hung candidates").

    Per workload the candidate may take `allowance_s` (plus the build timeout for the workload
    that imports a C++ solution) plus `reference_factor` times the reference's own time for the
    calls it is asked to make there (correctness rounds, the timing probe, warm-up and timed
    iterations), measured on the workload's first reference run; never more than
    `EvalRequest.workload_timeout_s`, nor what is left of `EvalRequest.overall_timeout_s`. A
    workload that overruns it is TIMEOUT, and every later workload of the request is TIMEOUT
    without running the candidate again.
    """

    reference_factor: float = Field(default=100.0, gt=0)
    """Multiple of the reference's own time for the same calls."""
    allowance_s: float = Field(default=120.0, gt=0)
    """Fixed seconds per workload: import, JIT compilation and autotuning on first calls."""

    @classmethod
    def for_device(cls, device: str) -> "HangPolicy":
        """The default for a device: on the CPU a Triton kernel runs in the interpreter, often
        hundreds of times slower than the eager reference, so the factor is larger there."""
        return cls(reference_factor=1000.0) if device != "cuda" else cls()


class EvalRequest(RecordModel):
    """What the host asks the in-sandbox runner to do (written as request.json)."""

    definition: Definition
    """The problem."""
    workloads: list[Workload] = Field(min_length=1)
    """Workloads to evaluate, in order (the RNG stream continues across them)."""
    solution: Solution
    """The candidate."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where tensors live."""
    seed: int = OFFICIAL_SEED
    """Seed set once before the first workload."""
    correctness_rounds: int = Field(default=10, ge=1)
    """Rounds of fresh inputs per workload."""
    timing: TimingConfig = Field(default_factory=TimingConfig)
    """Timing protocol."""
    problem_dir: str | None = None
    """Read-only problem dir, for safetensors inputs."""
    workload_timeout_s: float | None = Field(default=None, gt=0)
    """Hard cap on the solution worker's time per workload (import, rounds, timing), over the
    deadline `hang` derives; None: no cap beyond that deadline."""
    hang: HangPolicy = Field(default_factory=HangPolicy)
    """How the per-workload deadline follows the workload (see HangPolicy)."""
    address_space_bytes: int | None = Field(default=None, gt=0)
    """CPU: the address-space limit (RLIMIT_AS) of the judge and every worker for this
    evaluation, which the runner sets before it starts a worker; sandboxes fill it in from the
    problem's size (sandboxes/memory_need.py). None: the limit the runner was started with."""
    overall_timeout_s: float | None = Field(default=None, gt=0)
    """The sandbox's wall-clock limit of the whole evaluation; sandboxes fill it in, so the judge
    ends a hung workload (and reports it) before the sandbox kills the runner. None: unknown."""
    workload_order: list[int] | None = None
    """Indices of `workloads` in the order to evaluate them (a permutation); None: in order.
    Each workload still gets the inputs of the request-order RNG stream (the judge re-draws the
    inputs of the workloads before it), so the order changes nothing but which runs first."""
    stop_at_first_failure: bool = False
    """Stop after the first workload (in `workload_order`) that does not pass; the rest are
    reported unevaluated (a trace without evaluation). A correctness screen sets it."""
    checked_rounds: Literal["all", "last"] = "all"
    """`all`: every correctness round is run and compared. `last`: every round's inputs are still
    drawn (the RNG stream and the inputs timing uses stay the official ones) but only the last
    round is run and compared, plus the timing probe; for a timed request whose rounds a
    correctness screen of the same request (same seed, so the same inputs) already compared."""
    prebuilt: PrebuiltExtension | None = None
    """A verified build of the solution's C++ sources from the host's build cache, staged as
    `prebuilt.so` in the runner's dir; the judge uses it only if identity and hash match."""
    warm_jit_caches: bool = False
    """Warm the candidate's JIT caches (torch.compile, Triton) in a throwaway worker before any
    input exists, and report their files' hashes (`EvalResult` build facts), so the host can keep
    them for the candidate's later evaluations (kernelarc/runner/jit_warmup.py)."""

    @model_validator(mode="after")
    def _order_is_a_permutation(self) -> "EvalRequest":
        order = self.workload_order
        if order is not None and sorted(order) != list(range(len(self.workloads))):
            msg = f"workload_order {order} is not a permutation of 0..{len(self.workloads) - 1}"
            raise ValueError(msg)
        return self


class EvalResult(RecordModel):
    """What a sandbox returns for one request: one trace per workload, plus host-side facts."""

    traces: list[Trace]
    """One per requested workload, in order."""
    stderr_tail: str = ""
    """Last part of the runner's stderr (its log)."""
    wall_s: float = 0.0
    """Sandbox start to result, seconds."""
    sandbox: str = "local"
    """Which sandbox ran it."""
    sandbox_notes: list[str] = Field(default_factory=list)
    """What the sandbox could not enforce here (e.g. no network namespace)."""
    sandbox_image: str | None = None
    """Image id the evaluation ran in (Docker sandbox; None for the local one)."""
    build: BuildInfo | None = None
    """The C++ build step, as the judge reported it (None for Python languages)."""
    jit_cache_hit: bool = False
    """The runner started with the candidate's JIT caches from the host's cache (nothing of it
    was compiled again)."""
    stage_s: dict[str, float] = Field(default_factory=dict)
    """Seconds per stage inside the runner, as the judge measured them: `build` (C++),
    `worker_start` (forking the worker, importing the candidate; its parts `worker_context_wait`
    and `worker_import`, as the worker reports them), `correctness` (rounds and the
    timing probe), `timing` (the candidate's timed iterations), `reference_timing`,
    `interleaved_timing` (both sides' interleaved blocks), `inputs`
    (drawing inputs, re-drawn ones included). Empty when the runner reported none."""
    judge_cache: dict[str, int] = Field(default_factory=dict)
    """A resident judge's cache hits and misses in this evaluation (`input_hits`,
    `reference_hits`, `reference_timing_hits`, and their misses); empty for a one-off runner."""
    resident_request: int = 0
    """Which request of its resident judge this was (1 = the judge's first); 0 for a one-off
    runner."""


class Proposal(RecordModel):
    """A candidate from an agent: the solution plus where it came from."""

    id: str
    """Content id: `p-` + 12 hex of the solution's content hash."""
    agent: str
    """Agent name."""
    strategy: str
    """The strategy the agent owns."""
    solution: Solution
    """The candidate."""
    parent_id: str | None = None
    """Proposal it was derived from, if any."""
    knobs: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Parameters the agent chose (block sizes, compile mode, ...)."""
    rationale: str = ""
    """One line on why this candidate."""
    model: str | None = None
    """LLM model that wrote it (None: an offline proposer)."""
    draft: bool = False
    """True when plateau-triggered drafting started this line."""
    draft_source: Literal["global_best", "reference", "own"] | None = None
    """What a draft started from."""
    conclusions_seen: list[str] = Field(default_factory=list)
    """Ids of the shared conclusions in the agent's context when it proposed this."""
    llm: list[LLMExchange] = Field(default_factory=list)
    """Every LLM request/reply made for this proposal (retries included), for replay."""


def proposal_id_for(solution: Solution) -> str:
    """Content-addressed proposal id."""
    return "p-" + solution.content_hash()[:12]


class Verdict(StrEnum):
    """Acceptance decision for an attempt."""

    NEW_BEST = "NEW_BEST"
    """Accepted: became the campaign's incumbent (with the guard on: re-timed and confirmed)."""
    CHALLENGER = "CHALLENGER"
    """Passed and looked faster than the incumbent, but the guard's re-timing did not accept it."""
    CORRECT = "CORRECT"
    FAILED = "FAILED"
    INFRA_ERROR = "INFRA_ERROR"


class Attempt(RecordModel):
    """One proposal evaluated and judged; a line of attempts.jsonl."""

    index: int = Field(ge=0)
    """Order of completion within the campaign."""
    problem: str
    """Definition name."""
    proposal: Proposal
    """What was evaluated."""
    status: EvalStatus | Literal["INFRA_ERROR", "REJECTED_STATIC", "REJECTED_GUARD"]
    """PASSED if every workload passed, else the first failing workload's status; the guard's
    REJECTED_STATIC (blocked before evaluation) and REJECTED_GUARD (e.g. failed confirmation)."""
    traces: list[Trace]
    """One per workload."""
    speedup: float | None = None
    """Geometric mean of speedup_factor over workloads (PASSED only)."""
    latency_ms: float | None = None
    """Geometric mean of latency_ms over workloads (PASSED only)."""
    interleaved_speedup: float | None = None
    """Geometric mean of the traces' interleaved speedups, the point the interval below is of
    (None: a trace without one, or an older record)."""
    speedup_ci_low: float | None = None
    """Lower bound of the speedup's confidence interval (`guard.score.speedup_interval`)."""
    speedup_ci_high: float | None = None
    """Upper bound of the speedup's confidence interval."""
    speedup_ci_method: str | None = None
    """How the interval was made: the runner's per-workload method and how workloads were
    combined."""
    verdict: Verdict
    """Whether it became the campaign's best."""
    best_speedup_after: float | None = None
    """Campaign best speedup after this attempt."""
    started_at: str
    """ISO time the evaluation started: when the candidate got its first executor slot (a
    statically blocked proposal: when it was judged)."""
    finished_at: str
    """ISO time it finished."""
    wall_s: float = 0.0
    """Sandbox wall time."""
    stderr_tail: str = ""
    """Tail of the runner log."""
    error: str = ""
    """Infrastructure error text, if any."""
    confirmed: bool = False
    """True iff the benchmark guard re-timed and re-ran this attempt on fresh inputs and accepted
    it (verdict NEW_BEST with the guard on). Exporters take the last confirmed NEW_BEST."""
    guard: GuardRecord | None = None
    """The guard's findings, re-timing samples, CI and confirmation (None: older records)."""
