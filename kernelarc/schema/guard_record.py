"""What the benchmark guard records on an attempt (`Attempt.guard`), so every acceptance decision
can be replayed from attempts.jsonl alone (`kernelarc.guard.replay_verdicts`).

Place in the flow: `kernelarc/guard/` fills these in; `campaign/loop.py` puts them on the Attempt.
"""

from typing import Literal

from pydantic import Field

from kernelarc.schema.base import RecordModel

Severity = Literal["block", "flag"]
"""`block`: the proposal is never evaluated (REJECTED_STATIC); `flag`: recorded only."""


class StaticFinding(RecordModel):
    """One static rule that matched a proposal's sources."""

    rule: str
    """Rule id, `KA-S0NN` (catalogue: docs/guard.md)."""
    severity: Severity
    """block or flag."""
    path: str
    """Source file the match is in."""
    line: int = Field(default=0, ge=0)
    """1-based line of the match (0: the file as a whole)."""
    message: str
    """What matched and why it matters."""


class RetimingSample(RecordModel):
    """One fresh sandbox evaluation made by the guard while re-timing a challenger."""

    round: int = Field(ge=0)
    """Re-timing round (each round times the challenger and the incumbent once)."""
    role: Literal["challenger", "incumbent"]
    """Whose evaluation this is."""
    proposal_id: str
    """Proposal evaluated."""
    status: str
    """PASSED, a failing EvalStatus or INFRA_ERROR."""
    latencies_ms: list[float] = Field(default_factory=list)
    """Median latency per workload, in workload order (empty unless PASSED)."""
    wall_s: float = 0.0
    """Sandbox wall time."""
    retries: int = Field(default=0, ge=0)
    """Infrastructure failures retried before this result (docs/guard.md)."""
    log: str = ""
    """The last infrastructure failure ('' when none)."""


class BootstrapDecision(RecordModel):
    """The bootstrap confidence interval of the geometric-mean latency ratio and its outcome."""

    outcome: Literal["accept", "reject", "undecided"]
    """accept: CI upper bound < 1 - min_gain; reject: CI lower bound > 1 - min_gain."""
    ratio: float | None = None
    """Point estimate: geometric mean over workloads of challenger/incumbent latency."""
    ci_low: float | None = None
    """Lower bound of the confidence interval of the ratio."""
    ci_high: float | None = None
    """Upper bound of the confidence interval of the ratio."""
    rounds: int = Field(default=0, ge=0)
    """Complete re-timing rounds the decision used."""
    reason: str = ""
    """Why undecided without a CI (a failed re-timing evaluation, too few rounds)."""


class GuardSettings(RecordModel):
    """The guard parameters in force for an attempt (recorded so replay needs nothing else)."""

    enabled: bool = True
    """False: naive acceptance (best single-measurement speedup wins)."""
    block_static: bool = True
    """Blocking static findings reject the proposal before evaluation."""
    min_gain: float = 0.01
    """Required relative latency gain: accept only if the ratio's CI is below 1 - min_gain."""
    min_repeats: int = 2
    """Re-timing rounds before the first decision."""
    max_repeats: int = 3
    """Re-timing rounds at most; still undecided then means not accepted."""
    confidence: float = 0.95
    """Two-sided confidence level of the bootstrap interval."""
    resamples: int = 2000
    """Bootstrap resamples."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap resampling."""
    confirm: bool = True
    """A new best is re-evaluated on fresh inputs before it is accepted."""
    roofline_slack: float | None = 0.2
    """A latency below bound * (1 - slack) is rejected; None: roofline check off."""
    infra_retries: int | None = None
    """Retries of a guard evaluation that failed for an infrastructure reason; one that still
    fails makes the attempt INFRA_ERROR, not the candidate's defeat. None: a record from before
    this rule, when a failed confirmation counted against the candidate whatever the cause."""


class RooflineBound(RecordModel):
    """Speed-of-light lower bound of one workload's latency."""

    workload: str
    """Workload uuid."""
    bound_ms: float = Field(ge=0)
    """max(bytes / copy bandwidth, flops / matmul rate), in ms."""
    bytes: float = Field(ge=0)
    """Unique input + output bytes."""
    flops: float = Field(ge=0)
    """Estimated matmul FLOPs (0 when not estimated)."""


class Confirmation(RecordModel):
    """The re-run of a would-be new best in a fresh sandbox on fresh inputs."""

    seed: int
    """Input seed used (eval.seed + 1 + attempt index)."""
    status: str
    """PASSED, the first failing status, or INFRA_ERROR."""
    latencies_ms: list[float] = Field(default_factory=list)
    """Median latency per workload (PASSED only)."""
    speedup: float | None = None
    """Geometric-mean speedup of the re-run (PASSED only)."""
    wall_s: float = 0.0
    """Sandbox wall time."""
    log: str = ""
    """First failing workload's log, or the infrastructure error."""
    retries: int = Field(default=0, ge=0)
    """Infrastructure failures retried before this result."""


class GuardRecord(RecordModel):
    """Everything the guard measured and decided for one attempt."""

    settings: GuardSettings = Field(default_factory=GuardSettings)
    """Parameters in force."""
    findings: list[StaticFinding] = Field(default_factory=list)
    """Static rule matches (block and flag)."""
    incumbent_id: str | None = None
    """Proposal id of the incumbent when this attempt was judged (None: no incumbent)."""
    incumbent_index: int | None = None
    """Attempt index of that incumbent."""
    roofline: list[RooflineBound] = Field(default_factory=list)
    """Speed-of-light bound per workload (empty: check off or not computed)."""
    device: str = ""
    """Ceiling table entry used for the bounds (device name, or `cpu`)."""
    samples: list[RetimingSample] = Field(default_factory=list)
    """Interleaved re-timing evaluations of challenger and incumbent, in run order."""
    decision: BootstrapDecision | None = None
    """Outcome of the re-timing (challengers only)."""
    confirmation: Confirmation | None = None
    """Re-run on fresh inputs (accepted challengers only)."""
    extra_evaluations: int = Field(default=0, ge=0)
    """Sandbox evaluations the guard made for this attempt (not counted in the budget)."""
    reason: str = ""
    """One line: why the verdict is what it is."""
