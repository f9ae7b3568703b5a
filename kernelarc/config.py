"""Typed schema of the Hydra configs in conf/ (registered in the ConfigStore by
`register_configs`).

Over 400 lines: one typed schema mirroring conf/; splitting it would scatter the config tree.

The campaign command (kernelarc/cli/campaign.py) turns the composed DictConfig into these
dataclasses with OmegaConf.to_object; nothing below it sees a DictConfig. Validation OmegaConf
cannot express lives in __post_init__.
"""

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from kernelarc.errors import ConfigError


def default_build_cache_dir() -> Path:
    """`$KERNELARC_CACHE_DIR/builds`, else `~/.cache/kernelarc/builds` (the build cache)."""
    base = os.environ.get("KERNELARC_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "kernelarc") / "builds"


#: Official SOL-ExecBench timing protocol, used on CUDA.
CUDA_WARMUP, CUDA_ITERATIONS = 10, 50
#: CPU timing is a pipeline check, not kernel performance (Triton runs in its interpreter):
#: the official iteration count, but the timed loop stops once its samples add up to
#: CPU_TIMING_BUDGET_S (after at least 5), with one intra-op thread on one core (runner/timing.py)
#: so the median is steady. Traces label it `cpu_monotonic`.
CPU_WARMUP, CPU_ITERATIONS = 1, 50
#: Fewest re-timing rounds the guard may decide on (guard.min_repeats and max_repeats).
MIN_DECIDING_ROUNDS = 2
CPU_TIMING_BUDGET_S = 1.0


@dataclass
class BudgetConfig:
    """How much the campaign may spend."""

    candidates: int = 12
    """Candidates evaluated in total, shared by the team (duplicates are never evaluated)."""
    max_parallel: int | None = None
    """At most this many timed evaluations at once; None = one per GPU of the executor (one on
    the CPU). The correctness pool (executor.correctness_slots) is not counted."""
    max_proposing: int | None = None
    """Agents inside `propose` (and `conclude`) at once; None = every agent of the team. An LLM
    agent's requests are further bounded by `llm.concurrency`."""
    max_infra_failures: int = 5
    """Abort after this many consecutive infrastructure failures (not candidate failures)."""
    time_s: float | None = None
    """Wall-clock budget of the campaign in seconds (None: none), next to `candidates`; whichever
    runs out first stops it. No agent proposes after the deadline and no candidate starts unless
    it is expected to finish before it (the mean of this campaign's candidates, guard runs
    included); one in flight at the deadline is finished and recorded. A resume continues with
    what is left (campaign.json `time_used_s`); `budget.time_s=N` on a resume sets a new total."""

    def __post_init__(self) -> None:
        if self.candidates < 1:
            msg = f"budget.candidates must be >= 1 (got {self.candidates})"
            raise ConfigError(msg)
        if self.time_s is not None and not self.time_s > 0:
            msg = f"budget.time_s must be > 0 seconds, or null for none (got {self.time_s})"
            raise ConfigError(msg)
        if self.max_parallel is not None and self.max_parallel < 1:
            msg = f"budget.max_parallel must be >= 1 (got {self.max_parallel})"
            raise ConfigError(msg)
        if self.max_proposing is not None and self.max_proposing < 1:
            msg = f"budget.max_proposing must be >= 1 or null (got {self.max_proposing})"
            raise ConfigError(msg)


@dataclass
class EvalConfig:
    """How each candidate is evaluated (see runner/)."""

    seed: int = 200
    """Input-generation seed (the official evaluator uses 200)."""
    correctness_rounds: int = 10
    """Rounds of fresh inputs per workload (official: 10)."""
    warmup: int | None = None
    """Untimed iterations; None = 10 on CUDA, 1 on CPU."""
    iterations: int | None = None
    """Timed iterations (median reported); None = 50 (on CPU the loop also stops once its
    samples add up to 1 s, after at least 5)."""
    timeout_s: float = 180.0
    """Wall-clock limit of one sandboxed evaluation."""
    hang_allowance_s: float = 120.0
    """Per workload, a silent candidate is TIMEOUT after this plus `hang_factor` times the
    reference's own time for the same calls (capped by `timeout_s`); later workloads are then
    TIMEOUT without running it again (schema.HangPolicy)."""
    hang_factor: float | None = None
    """Multiple of the reference's time in that deadline; None = 100 on CUDA, 1000 on CPU (where
    Triton kernels run in the interpreter)."""

    def __post_init__(self) -> None:
        if self.hang_allowance_s <= 0 or (self.hang_factor is not None and self.hang_factor <= 0):
            msg = (
                f"eval.hang_allowance_s and eval.hang_factor must be > 0 (got "
                f"{self.hang_allowance_s}, {self.hang_factor})"
            )
            raise ConfigError(msg)

    def budget_for(self, device: str) -> float | None:
        """Seconds of samples after which the CPU timed loop stops (None on CUDA: exactly
        `iterations`, the official protocol)."""
        return None if device == "cuda" else CPU_TIMING_BUDGET_S

    def timing_for(self, device: str) -> tuple[int, int]:
        """(warmup, iterations) for a device."""
        warm, iters = (
            (CUDA_WARMUP, CUDA_ITERATIONS) if device == "cuda" else (CPU_WARMUP, CPU_ITERATIONS)
        )
        return (
            warm if self.warmup is None else self.warmup,
            iters if self.iterations is None else self.iterations,
        )


@dataclass
class DockerConfig:
    """Options of the `docker` sandbox only (see sandbox/README.md)."""

    image: str = "kernelarc-sandbox:latest"
    """Sandbox image (built from sandbox/Dockerfile)."""
    pids_limit: int = 4096
    """Processes and threads per container."""
    cpus: float | None = None
    """CPU cores per container; None = no limit."""
    docker_host: str | None = None
    """Engine URL (`unix:///var/run/docker.sock`, `tcp://...`); None = $DOCKER_HOST or default."""
    python: str = "python"
    """The image's Python (on its PATH or absolute)."""
    user: str | None = None
    """Container user `uid:gid`; None = the host's (1000:1000 when the host is root)."""
    spare_user: str | None = None
    """The second runner user `uid:gid` runners alternate with, so a spare can start beside a
    running candidate (cuda); None = 1001:1001 when the host is root and `user` is None, else
    none (the spare then starts when an evaluation ends)."""
    work_root: str | None = None
    """Host dir for the per-container eval dirs (the engine's host must see the same path);
    None = the system temp dir."""


@dataclass
class SandboxConfig:
    """Where candidates run."""

    kind: str = "local"
    """Sandbox implementation: `local` (hardened subprocess) or `docker` (warm containers)."""
    gpu: int = 0
    """GPU index pinned with CUDA_VISIBLE_DEVICES (docker: the one GPU given to the container);
    `kernelarc eval` uses it; a campaign's executor gives each of its sandboxes its own GPU."""
    memory_limit_gb: float = 16.0
    """What a runner process may use beyond the problem's data: the problem's input and output
    bytes times the copies the protocol makes come on top (sandboxes/memory_need.py). local:
    the address-space limit of each runner process on CPU (not applied on CUDA, which maps huge
    virtual ranges); docker: the container's memory limit, raised per problem (host RAM, CPU
    and CUDA alike)."""
    max_memory_gb: float | None = None
    """local: the most a runner process may map whatever the problem; None = this machine's
    memory. A problem whose reference alone needs more is refused before any candidate runs
    (an infrastructure error, not the candidate's)."""
    network: bool = False
    """Allow network access from the sandbox (off: a new network namespace where possible)."""
    docker: DockerConfig = field(default_factory=DockerConfig)
    """Used when kind is `docker`."""
    jail: bool = True
    """`local` on a root host: run the runner in sandboxes/jail.py (read-only filesystem but the
    eval dir, unprivileged user, leftovers killed); false only to rule the jail out."""
    warm_spare: bool = True
    """Keep one pre-started runner per sandbox (slot) for its next evaluation: it imports torch
    while the sandbox waits, so a candidate does not pay that (~3 s); every candidate still gets
    a fresh process. Started on cuda when an evaluation takes its runner (as another user), on
    cpu when an evaluation ends, and for the first candidate when the campaign sets up its
    executor (sandboxes/runner_lifecycle.py). False: start each runner on demand."""
    resident_requests: int = 64
    """With `warm_spare`: each runner is a resident judge that judges up to this
    many requests of one problem, keeping the problem's inputs, reference outputs and
    reference latency between them (kernelarc/runner/resident.py); candidates still run in
    fresh worker processes, and what one leaves running is killed before the next. 0: a fresh
    runner per request."""
    build_cache: bool = True
    """`local` only: keep verified builds of C++ solutions on this host (between candidates and
    campaigns), so a C++ candidate already built is not compiled again; entries are checked
    before use (kernelarc/sandboxes/build_cache.py). False: every evaluation builds."""
    build_cache_dir: str | None = None
    """Where the build cache lives; None = $KERNELARC_CACHE_DIR/builds or
    ~/.cache/kernelarc/builds."""

    def options(self) -> dict[str, Any]:
        """The keyword options `make_sandbox(self.kind, **options)` takes for this kind."""
        common: dict[str, Any] = {
            "gpu": self.gpu,
            "memory_limit_gb": self.memory_limit_gb,
            "network": self.network,
            "warm_spare": self.warm_spare,
            "resident_requests": self.resident_requests,
        }
        if self.kind != "docker":
            cache = None
            if self.build_cache:
                cache = self.build_cache_dir or str(default_build_cache_dir())
            return {
                **common,
                "jail": self.jail,
                "max_memory_gb": self.max_memory_gb,
                "build_cache": cache,
            }
        return {**common, **asdict(self.docker)}


@dataclass
class RayConfig:
    """Options of the `ray` executor only (docs/scale-out.md)."""

    address: str = "local"
    """`local`: start a private Ray instance on this machine; `auto`: join the running cluster
    (`ray start --head` / $RAY_ADDRESS); or a cluster address (`host:6379`, `ray://host:10001`)."""
    num_cpus: int | None = None
    """address=local only: CPUs the private instance may use; None = all."""
    num_gpus: int | None = None
    """address=local only: GPUs the private instance may use; None = all visible."""
    timed_actors: int | None = None
    """Timed-evaluation actors; None = one per GPU of the cluster (minus those held for the
    correctness pool), one on the CPU."""
    max_retries: int = 2
    """Infrastructure retries of one evaluation after its actor or node died."""
    startup_timeout_s: float = 120.0
    """How long to wait for the actors to be placed (not enough GPUs: a clear error after it)."""
    namespace: str = "kernelarc"
    """Ray namespace of the actors."""


@dataclass
class ExecutorConfig:
    """Where and how many evaluations run at once (kernelarc/executor/)."""

    kind: str = "local"
    """`local` (sandboxes on this machine, one timed slot per GPU) or `ray` (one Ray actor per
    GPU, each owning a warm sandbox, on one machine or a cluster)."""
    gpus: list[int] | None = None
    """local: GPU indices for timed evaluations; None = every visible GPU."""
    correctness_slots: int = 1
    """Size of the correctness pool (screens of new candidates run there, beside timing);
    0 = no pool."""
    correctness_gpus: list[int] = field(default_factory=list)
    """CUDA only: GPUs given to the correctness pool and taken out of the timed pool (ray: only
    their number counts; Ray places the actors). Empty on CUDA: the pool shares the timed GPUs
    (`screens_per_timed_gpu`, local executor; Ray: no pool)."""
    screens_per_timed_gpu: int = 3
    """CUDA, local executor, when `correctness_gpus` is empty: correctness slots that share each
    timed GPU, so candidates are compiled and screened beside the timing of others instead of in
    the timed slot. A screen may disturb a candidate's timing a little (its result says so); the
    guard's runs take their GPU alone. 0: no pool on CUDA without `correctness_gpus`. Ray does
    not share GPUs this way. `correctness_slots=0` turns every pool off, this one included."""
    screen: bool = True
    """Check a new candidate's correctness in the correctness pool before it queues for a timed
    slot (only when the pool exists); failures then never wait for, or hold, a timed slot."""
    ray: RayConfig = field(default_factory=RayConfig)
    """Used when kind is `ray`."""

    def __post_init__(self) -> None:
        if self.kind not in ("local", "ray"):
            msg = f"executor.kind must be local or ray (got {self.kind!r}); see conf/executor/"
            raise ConfigError(msg)
        if self.correctness_slots < 0:
            msg = f"executor.correctness_slots must be >= 0 (got {self.correctness_slots})"
            raise ConfigError(msg)
        if self.screens_per_timed_gpu < 0:
            msg = f"executor.screens_per_timed_gpu must be >= 0 (got {self.screens_per_timed_gpu})"
            raise ConfigError(msg)
        if self.gpus is not None and not self.gpus:
            msg = "executor.gpus must list at least one GPU, or be null for every visible GPU"
            raise ConfigError(msg)
        overlap = set(self.gpus or ()) & set(self.correctness_gpus)
        if overlap:
            msg = (
                f"GPUs {sorted(overlap)} are in both executor.gpus and executor.correctness_gpus;"
                " a correctness run beside a timed one on the same GPU would disturb its timing"
            )
            raise ConfigError(msg)
        if self.ray.max_retries < 0:
            msg = f"executor.ray.max_retries must be >= 0 (got {self.ray.max_retries})"
            raise ConfigError(msg)
        if self.ray.timed_actors is not None and self.ray.timed_actors < 1:
            msg = f"executor.ray.timed_actors must be >= 1 (got {self.ray.timed_actors})"
            raise ConfigError(msg)


@dataclass
class TrackingConfig:
    """Where attempts are logged besides attempts.jsonl."""

    kind: str = "mlflow"
    """`mlflow` or `none`."""
    uri: str | None = None
    """MLflow tracking URI; None = sqlite:///<launch dir>/mlflow.db."""
    experiment: str | None = None
    """MLflow experiment; None = the campaign name."""
    finish_timeout_s: float = 60.0
    """How long the end of a campaign waits for queued MLflow calls; what is left is uploaded
    by the sync that follows, or later by `kernelarc sync RUN_DIR` (attempts.jsonl has all)."""


@dataclass
class AgentSpec:
    """One member of the team (`agents.team` items, e.g. `{kind: llm, strategy: tiling}`, or the
    short forms `tiling` and `llm:tiling`: see `team_member`)."""

    kind: str
    """Implementation: an offline strategy (`tiling`, `memory`, `fusion`, `pipelining`,
    `precision`, `library`, `compiler`), `triton_template`, or `llm`."""
    strategy: str = ""
    """The strategy it owns; "" = the kind's own (offline kinds own exactly one; `llm` needs it)."""
    model: str | None = None
    """LLM model for this agent (`llm` only); None = `llm.model`."""
    name: str = ""
    """Unique agent name; "" = derived from kind and strategy, numbered when repeated."""


#: The seven strategies of the offline team (conf/agents/offline.yaml), one agent each.
OFFLINE_STRATEGIES = (
    "tiling",
    "memory",
    "fusion",
    "pipelining",
    "precision",
    "library",
    "compiler",
)


#: Every `kind` an `agents.team` item may name: the offline strategies, `triton_template` (the
#: agents in kernelarc.agents.AGENT_KINDS) and `llm` (kernelarc.agents.llm).
TEAM_KINDS = (*OFFLINE_STRATEGIES, "triton_template", "llm")

_ITEM_FORMS = (
    "an item is a kind (`compiler`), `llm:<strategy>` (`llm:tiling`) or a mapping with keys "
    "kind, strategy, model, name (`{kind: llm, strategy: tiling, model: gpt-4o}`)"
)


def team_member(item: object, index: int) -> AgentSpec:
    """The `AgentSpec` of one `agents.team` item, checked before anything runs.

    Args:
        item: an `AgentSpec`; a mapping of its fields (`{kind: llm, strategy: tiling}`); a bare
            kind (`compiler`, shorthand for `{kind: compiler}`); or `kind:strategy`
            (`llm:tiling`, shorthand for `{kind: llm, strategy: tiling}`).
        index: the item's position, named in errors (`agents.team[1]`).

    Raises:
        ConfigError: the item has another type or an unknown key, its kind is unknown, or it is
            an `llm` member without a strategy; the message names the item and the fix.
    """
    where = f"agents.team[{index}]"
    if isinstance(item, AgentSpec):
        spec = item
    elif isinstance(item, str):
        kind, _, strategy = item.partition(":")
        spec = AgentSpec(kind=kind.strip(), strategy=strategy.strip())
    elif isinstance(item, Mapping):
        spec = _spec_from_mapping(item, where)
    else:
        msg = f"{where} is {item!r}; {_ITEM_FORMS}"
        raise ConfigError(msg)
    if spec.kind not in TEAM_KINDS:
        msg = (
            f"{where}: unknown agent kind {spec.kind!r}; valid kinds: {sorted(TEAM_KINDS)} "
            f"(an LLM agent: `llm:<strategy>`, e.g. agents.team=[compiler,llm:tiling])"
        )
        raise ConfigError(msg)
    if spec.kind == "llm" and not spec.strategy:
        msg = (
            f"{where}: an `llm` member needs a strategy; write `llm:<strategy>` (e.g. "
            f"agents.team=[compiler,llm:tiling]) or `{{kind: llm, strategy: tiling}}` "
            f"(strategies: docs/llm.md)"
        )
        raise ConfigError(msg)
    return spec


def _spec_from_mapping(item: Mapping[Any, Any], where: str) -> AgentSpec:
    """An `AgentSpec` from a mapping item (as OmegaConf's typed schema would have checked it)."""
    keys = {f.name for f in fields(AgentSpec)}
    unknown = [str(key) for key in item if key not in keys]
    if unknown:
        hint = ""
        if len(item) == 1 and unknown[0] in TEAM_KINDS:
            # YAML reads `- llm: tiling` (a space after the colon) as the mapping {llm: tiling}.
            kind, strategy = unknown[0], item[unknown[0]]
            hint = f" (for `{kind}: {strategy}` write `{kind}:{strategy}`, without the space)"
        msg = f"{where}: unknown key {unknown[0]!r}{hint}; {_ITEM_FORMS}"
        raise ConfigError(msg)
    if item.get("kind") is None:
        msg = f"{where} has no `kind`; {_ITEM_FORMS}"
        raise ConfigError(msg)
    values: dict[str, str] = {}
    for key, value in item.items():
        if value is None:
            continue  # null: the field's default ("" or None)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            msg = f"{where}.{key} must be a string (got {value!r}); {_ITEM_FORMS}"
            raise ConfigError(msg)
        values[str(key)] = str(value)
    return AgentSpec(**values)


if TYPE_CHECKING:
    TeamItem: TypeAlias = AgentSpec
else:
    # OmegaConf checks the composed config against the annotations: Any lets an item be a
    # short-form string (`compiler`, `llm:tiling`) as well as a mapping. AgentsConfig's
    # __post_init__ turns every item into an AgentSpec (team_member), so code reading
    # `agents.team` only ever sees AgentSpecs.
    TeamItem = Any


@dataclass
class AgentsConfig:
    """The team."""

    team: list[TeamItem] = field(
        default_factory=lambda: [AgentSpec(kind=kind) for kind in OFFLINE_STRATEGIES]
    )
    """Team members, one agent each (conf/agents/: offline, llm, mixed). Each item is a mapping
    (`{kind: llm, strategy: tiling, model: gpt-4o, name: ...}`), a bare kind (`compiler`) or
    `llm:<strategy>` (`llm:tiling`); after construction every item is an `AgentSpec`."""

    def __post_init__(self) -> None:
        if not self.team:
            msg = f"agents.team is empty; list one or more of {sorted(TEAM_KINDS)}"
            raise ConfigError(msg)
        self.team = [team_member(item, index) for index, item in enumerate(self.team)]


@dataclass
class DeviceCeiling:
    """Peak rates of one device, for the guard's speed-of-light bound."""

    copy_bytes_per_s: float = 4.3e12
    """Sustained copy bandwidth (bytes read + written per second)."""
    matmul_flops_per_s: float = 7.9e14
    """Dense 16-bit matmul rate (fp8 counts 2x, fp4 4x)."""


@dataclass
class RooflineConfig:
    """Speed-of-light sanity check: a latency below the roofline bound is never a win."""

    enabled: bool = True
    """Reject (REJECTED_GUARD) a latency below bound * (1 - slack)."""
    slack: float = 0.2
    """Allowed shortfall under the bound (measurement noise, ceilings that are not exact)."""
    measure: bool = True
    """On CUDA, measure the GPU's copy and matmul ceilings once per GPU model and driver
    (cached; see kernelarc/guard/ceilings.py) instead of using the table below. CPU never
    measures."""
    cache_dir: str | None = None
    """Where measured ceilings are cached; None = $KERNELARC_CACHE_DIR or ~/.cache/kernelarc."""
    cpu: DeviceCeiling = field(
        default_factory=lambda: DeviceCeiling(copy_bytes_per_s=200e9, matmul_flops_per_s=5e12)
    )
    """Any CPU host (generous: CPU timings are only smoke signals)."""
    cuda_default: DeviceCeiling = field(default_factory=DeviceCeiling)
    """A GPU missing from `cuda_devices` (H200-class numbers)."""
    cuda_devices: dict[str, DeviceCeiling] = field(
        default_factory=lambda: {"NVIDIA H200": DeviceCeiling(4.3e12, 7.9e14)}
    )
    """Per GPU name as torch reports it (the trace's environment.hardware)."""

    def ceiling_for(self, device: str, hardware: str) -> tuple[str, DeviceCeiling]:
        """(table key, ceiling) for a device (`cpu`/`cuda`) and its hardware name."""
        if device != "cuda":
            return "cpu", self.cpu
        if hardware in self.cuda_devices:
            return hardware, self.cuda_devices[hardware]
        return "cuda_default", self.cuda_default


@dataclass
class GuardConfig:
    """The benchmark guard: static rules, noise-aware acceptance, confirmation, roofline."""

    enabled: bool = True
    """False (`guard=off`): naive acceptance, the best single measurement wins; static rules
    still run and block, so the ablation differs only in acceptance."""
    block_static: bool = True
    """Blocking static findings reject a proposal before evaluation (REJECTED_STATIC)."""
    min_gain: float = 0.01
    """Accept a challenger only if its latency ratio's CI lies below 1 - min_gain."""
    min_repeats: int | None = None
    """Interleaved re-timing rounds before the first decision, at least 2 (one round gives a
    bootstrap interval of zero width, which decides nothing); None = 3."""
    max_repeats: int | None = None
    """Re-timing rounds at most (undecided then: not accepted); None = 6 on CPU, 8 on CUDA."""
    confidence: float = 0.95
    """Two-sided level of the bootstrap confidence interval."""
    resamples: int = 2000
    """Bootstrap resamples."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap (recorded per attempt; decisions are deterministic)."""
    confirm: bool = True
    """Re-run a would-be new best on fresh inputs (seed eval.seed + 1 + index) first."""
    roofline: RooflineConfig = field(default_factory=RooflineConfig)
    """Speed-of-light check."""
    infra_retries: int = 2
    """Retries of an evaluation (the candidate's, or one of the guard's re-timing and
    confirmation runs) that failed for an infrastructure reason: the sandbox could not start or
    set up the runner (SandboxError). Still failing: INFRA_ERROR, never the candidate's defeat."""

    def repeats_for(self, device: str) -> tuple[int, int]:
        """(min_repeats, max_repeats) for a device."""
        default_min, default_max = (3, 8) if device == "cuda" else (MIN_DECIDING_ROUNDS + 1, 6)
        low = default_min if self.min_repeats is None else self.min_repeats
        high = default_max if self.max_repeats is None else self.max_repeats
        return min(low, high), high

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_gain < 1.0:
            msg = f"guard.min_gain must be in [0, 1) (got {self.min_gain})"
            raise ConfigError(msg)
        if any(
            n is not None and n < MIN_DECIDING_ROUNDS for n in (self.min_repeats, self.max_repeats)
        ):
            msg = (
                f"guard.min_repeats and guard.max_repeats must be >= {MIN_DECIDING_ROUNDS}: "
                "one re-timing round gives a confidence interval of zero width"
            )
            raise ConfigError(msg)
        if not 0.5 <= self.confidence < 1.0:
            msg = f"guard.confidence must be in [0.5, 1) (got {self.confidence})"
            raise ConfigError(msg)
        if self.resamples < 100:
            msg = f"guard.resamples must be >= 100 (got {self.resamples})"
            raise ConfigError(msg)
        if not 0 <= self.infra_retries <= 10:
            msg = f"guard.infra_retries must be in 0..10 (got {self.infra_retries})"
            raise ConfigError(msg)
        if not 0.0 <= self.roofline.slack < 1.0:
            msg = f"guard.roofline.slack must be in [0, 1) (got {self.roofline.slack})"
            raise ConfigError(msg)


@dataclass
class LLMConfig:
    """The LLM endpoint used by LLM agents (`llm=none|openai|replay`)."""

    kind: str = "none"
    """`none` (offline team only), `openai` (any OpenAI-compatible endpoint) or `replay`."""
    base_url: str | None = None
    """Endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, Ollama); None = OpenAI's."""
    model: str = "gpt-4o-mini"
    """Default model name; an agent may override it."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the key (the key itself is never in a config)."""
    temperature: float = 0.7
    """Sampling temperature."""
    max_tokens: int = 4096
    """Reply token cap."""
    timeout_s: float = 120.0
    """Per-request timeout."""
    max_retries: int = 4
    """Retries with exponential backoff on 429, 5xx and timeouts."""
    max_parse_retries: int = 2
    """Re-asks with the parse error when a reply holds no valid solution."""
    concurrency: int = 4
    """Requests in flight at once across the team."""
    prompt_price_per_mtok: float = 0.0
    """USD per million prompt tokens, for cost accounting."""
    completion_price_per_mtok: float = 0.0
    """USD per million completion tokens."""
    replay_from: str | None = None
    """`llm=replay`: the run dir whose attempts.jsonl transcripts are replayed."""


@dataclass
class CoordinationConfig:
    """The four coordination mechanisms of the KernelArc paper, each a switch (`coordination=`)."""

    memory: bool = True
    """Conclusions-only shared memory: agents publish and read short, evidence-backed findings."""
    guard: bool = True
    """Deterministic benchmark guard; False means naive acceptance (overrides guard.enabled)."""
    peer_state: bool = True
    """Read-only cross-agent state: agents see immutable snapshots of their peers."""
    drafting: bool = True
    """Plateau-triggered drafting: a stalled agent starts a fresh line."""
    plateau_patience: int = 4
    """Attempts without an own-incumbent gain beyond `plateau_min_gain` before drafting fires."""
    plateau_min_gain: float = 0.02
    """Relative speedup gain that counts as progress (beyond noise)."""
    draft_from: str = "global_best"
    """`global_best` (falls back to `reference` when peer state is off) or `reference`."""
    max_conclusions: int = 20
    """Most recent live conclusions shown to an agent."""
    max_claim_chars: int = 280
    """Longest conclusion claim the shared memory accepts (one or two sentences)."""

    def __post_init__(self) -> None:
        if self.plateau_patience < 1:
            msg = f"coordination.plateau_patience must be >= 1 (got {self.plateau_patience})"
            raise ConfigError(msg)
        if self.max_conclusions < 0 or not 20 <= self.max_claim_chars <= 400:
            msg = (
                "coordination.max_conclusions must be >= 0 and coordination.max_claim_chars in "
                f"[20, 400] (got {self.max_conclusions}, {self.max_claim_chars})"
            )
            raise ConfigError(msg)
        if self.plateau_min_gain < 0:
            msg = f"coordination.plateau_min_gain must be >= 0 (got {self.plateau_min_gain})"
            raise ConfigError(msg)
        if self.draft_from not in ("global_best", "reference"):
            msg = (
                "coordination.draft_from must be global_best or reference "
                f"(got {self.draft_from!r})"
            )
            raise ConfigError(msg)


@dataclass
class CampaignConfig:
    """A whole campaign."""

    name: str = "kernelarc"
    """Campaign name (MLflow experiment, output folder)."""
    problem: str = "rmsnorm"
    """Built-in problem name or path to a SOL-ExecBench problem dir."""
    workloads: str = "workload.jsonl"
    """Workload file inside the problem dir (built-ins also ship workload_gpu.jsonl)."""
    seed: int = 0
    """Campaign seed: agents' search order."""
    device: str = "auto"
    """`auto`, `cpu` or `cuda`."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """Budget."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation protocol."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    """Sandbox."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """Tracking."""
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    """Team."""
    guard: GuardConfig = field(default_factory=GuardConfig)
    """Benchmark guard (acceptance rules)."""
    llm: LLMConfig = field(default_factory=LLMConfig)
    """LLM endpoint for LLM agents."""
    coordination: CoordinationConfig = field(default_factory=CoordinationConfig)
    """Coordination switches (shared memory, guard, peer state, drafting)."""
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Evaluation slots: local processes or Ray actors (docs/scale-out.md)."""
    resume: str | None = None
    """A killed campaign's run dir to continue (`kernelarc resume RUN_DIR`): its recorded
    config.yaml is used, command-line overrides may only change the budget and infrastructure
    keys (docs/mlflow.md, "Resume a killed campaign"). None: a new campaign."""

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            msg = f"device must be auto, cpu or cuda (got {self.device!r})"
            raise ConfigError(msg)


SCHEMA_NAME = "campaign_schema"
"""The ConfigStore name of CampaignConfig, first in conf/campaign.yaml's defaults."""


def register_configs() -> None:
    """Register CampaignConfig in Hydra's ConfigStore as `campaign_schema`, which
    conf/campaign.yaml names first in its defaults, so a composed config is typed (a typo or a
    wrong type fails at compose time). Call it before composing: the campaign command does at
    import, and so do the benchmarks and tests that compose conf/ themselves. Idempotent (the
    store replaces the node under the same name).

    Hydra is imported here, not at the top: the library imports this module without Hydra.
    """
    from hydra.core.config_store import ConfigStore  # noqa: TID251 (composing needs the schema)

    ConfigStore.instance().store(name=SCHEMA_NAME, node=CampaignConfig)
