"""Typed schema of the Hydra configs in conf/ (registered in the ConfigStore).

cli.py turns the composed DictConfig into these dataclasses with OmegaConf.to_object; nothing
below cli.py sees a DictConfig. Validation OmegaConf cannot express lives in __post_init__.
"""

from dataclasses import dataclass, field

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
class SandboxConfig:
    """Where candidates run."""

    kind: str = "local"
    """Sandbox implementation: `local` (hardened subprocess)."""
    gpu: int = 0
    """GPU index pinned with CUDA_VISIBLE_DEVICES."""
    memory_limit_gb: float = 16.0
    """Address-space limit on CPU (not applied on CUDA, which maps huge virtual ranges)."""
    network: bool = False
    """Allow network access from the sandbox (off: a new network namespace where possible)."""


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

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            msg = f"device must be auto, cpu or cuda (got {self.device!r})"
            raise ConfigError(msg)
