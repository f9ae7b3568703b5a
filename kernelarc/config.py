"""Typed schema of the Hydra configs in conf/ (registered in the ConfigStore).

cli.py turns the composed DictConfig into these dataclasses with OmegaConf.to_object; nothing
below cli.py sees a DictConfig. Validation OmegaConf cannot express lives in __post_init__.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelarc.errors import ConfigError

#: Official SOL-ExecBench timing protocol, used on CUDA.
CUDA_WARMUP, CUDA_ITERATIONS = 10, 50
#: CPU timing is only a smoke signal (Triton runs in its interpreter); fewer iterations keep the
#: offline demo quick. Traces label it `cpu_monotonic`.
CPU_WARMUP, CPU_ITERATIONS = 1, 5


@dataclass
class BudgetConfig:
    """How much the campaign may spend."""

    candidates: int = 12
    """Candidates evaluated in total, shared by the team (duplicates are never evaluated)."""
    max_parallel: int = 2
    """Evaluations running at once."""
    max_infra_failures: int = 5
    """Abort after this many consecutive infrastructure failures (not candidate failures)."""

    def __post_init__(self) -> None:
        if self.candidates < 1:
            msg = f"budget.candidates must be >= 1 (got {self.candidates})"
            raise ConfigError(msg)
        if self.max_parallel < 1:
            msg = f"budget.max_parallel must be >= 1 (got {self.max_parallel})"
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
    """Timed iterations (median reported); None = 50 on CUDA, 5 on CPU."""
    timeout_s: float = 180.0
    """Wall-clock limit of one sandboxed evaluation."""

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
    work_root: str | None = None
    """Host dir for the per-container eval dirs (the engine's host must see the same path);
    None = the system temp dir."""


@dataclass
class SandboxConfig:
    """Where candidates run."""

    kind: str = "local"
    """Sandbox implementation: `local` (hardened subprocess) or `docker` (warm containers)."""
    gpu: int = 0
    """GPU index pinned with CUDA_VISIBLE_DEVICES (docker: the one GPU given to the container)."""
    memory_limit_gb: float = 16.0
    """Address-space limit on CPU (not applied on CUDA, which maps huge virtual ranges); docker:
    the container's memory limit (host RAM, CPU and CUDA alike)."""
    network: bool = False
    """Allow network access from the sandbox (off: a new network namespace where possible)."""
    docker: DockerConfig = field(default_factory=DockerConfig)
    """Used when kind is `docker`."""
    jail: bool = True
    """`local` on a root host: run the runner in execution/jail.py (read-only filesystem but the
    eval dir, unprivileged user, leftovers killed); false only to rule the jail out."""

    def options(self) -> dict[str, Any]:
        """The keyword options `make_sandbox(self.kind, **options)` takes for this kind."""
        common: dict[str, Any] = {
            "gpu": self.gpu,
            "memory_limit_gb": self.memory_limit_gb,
            "network": self.network,
        }
        if self.kind != "docker":
            return {**common, "jail": self.jail}
        return {**common, **asdict(self.docker)}


@dataclass
class TrackingConfig:
    """Where attempts are logged besides attempts.jsonl."""

    kind: str = "mlflow"
    """`mlflow` or `none`."""
    uri: str | None = None
    """MLflow tracking URI; None = sqlite:///<launch dir>/mlflow.db."""
    experiment: str | None = None
    """MLflow experiment; None = the campaign name."""


@dataclass
class AgentsConfig:
    """The team."""

    team: list[str] = field(default_factory=lambda: ["compiler", "triton_template"])
    """Agent kinds, one agent each."""


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
    """Interleaved re-timing rounds before the first decision; None = 1 on CPU (a smoke
    signal: one paired round), 3 on CUDA."""
    max_repeats: int | None = None
    """Re-timing rounds at most (undecided then: not accepted); None = 2 on CPU, 8 on CUDA."""
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

    def repeats_for(self, device: str) -> tuple[int, int]:
        """(min_repeats, max_repeats) for a device."""
        default_min, default_max = (3, 8) if device == "cuda" else (1, 2)
        low = default_min if self.min_repeats is None else self.min_repeats
        high = default_max if self.max_repeats is None else self.max_repeats
        return min(low, high), high

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_gain < 1.0:
            msg = f"guard.min_gain must be in [0, 1) (got {self.min_gain})"
            raise ConfigError(msg)
        if any(n is not None and n < 1 for n in (self.min_repeats, self.max_repeats)):
            msg = "guard.min_repeats and guard.max_repeats must be >= 1"
            raise ConfigError(msg)
        if not 0.5 <= self.confidence < 1.0:
            msg = f"guard.confidence must be in [0.5, 1) (got {self.confidence})"
            raise ConfigError(msg)
        if self.resamples < 100:
            msg = f"guard.resamples must be >= 100 (got {self.resamples})"
            raise ConfigError(msg)
        if not 0.0 <= self.roofline.slack < 1.0:
            msg = f"guard.roofline.slack must be in [0, 1) (got {self.roofline.slack})"
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

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            msg = f"device must be auto, cpu or cuda (got {self.device!r})"
            raise ConfigError(msg)
