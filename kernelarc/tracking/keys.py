"""Every MLflow metric, param, tag and artifact key KernelArc writes, defined once.

Used by `tracking/mlflow_tracker.py` when logging and by the CLI, tests and anything that queries
MLflow afterwards (tag keys contain dots, so filters quote them with backticks:
``tags.`kernelarc.kind` = 'campaign'``).
Metrics are `namespace/name`; tags are `kernelarc.<name>`.
"""

from collections.abc import Mapping
from types import MappingProxyType

from kernelarc.schema import EvalStatus

# --- per-attempt metrics, on the agent's child run, step = Attempt.index -------------------------
EVAL_SPEEDUP = "eval/speedup"
"""Geometric-mean speedup over workloads (PASSED attempts only)."""
EVAL_LATENCY_MS = "eval/latency_ms"
"""Geometric-mean latency over workloads (PASSED attempts only)."""
EVAL_PASSED = "eval/passed"
"""1 if the attempt PASSED, else 0."""
EVAL_STATUS_CODE = "eval/status_code"
"""The attempt's status as a number (see STATUS_CODES)."""
EVAL_WALL_S = "eval/wall_s"
"""Sandbox wall time of the attempt."""

# --- campaign metrics, on the parent run, step = Attempt.index ----------------------------------
CAMPAIGN_BEST_SPEEDUP = "campaign/best_speedup"
"""Best PASSED speedup so far (absent until one attempt passes)."""
CAMPAIGN_CANDIDATES = "campaign/candidates"
"""Attempts evaluated so far."""
CAMPAIGN_PASSED = "campaign/passed"
"""PASSED attempts so far."""
CAMPAIGN_FAILURES = "campaign/failures"
"""Attempts that did not pass (candidate failures and infrastructure errors) so far."""

# --- campaign throughput, on the parent run, logged once at finish -------------------------------
THROUGHPUT_PREFIX = "throughput/"
"""Prefix of the throughput metrics: `throughput/<field>` for every numeric field of
`schema.throughput.ThroughputReport` (`candidates_per_min`, `candidates_per_min_per_gpu`,
`timed_busy_fraction`, `queue_wait_s_mean`, `sandbox_s_mean`, `dispatch_overhead_s_mean`,
`infra_retries`, ...)."""
THROUGHPUT_CANDIDATES_PER_MIN = THROUGHPUT_PREFIX + "candidates_per_min"
"""Candidates per minute of wall time."""
THROUGHPUT_PER_GPU = THROUGHPUT_PREFIX + "candidates_per_min_per_gpu"
"""Candidates per minute per timed slot (per GPU on CUDA)."""

# --- tags --------------------------------------------------------------------------------------
KIND = "kernelarc.kind"
"""`campaign` on the parent run, `agent` on a child run."""
KIND_CAMPAIGN = "campaign"
"""Value of KIND on the parent run."""
KIND_AGENT = "agent"
"""Value of KIND on an agent's child run."""
PROBLEM = "kernelarc.problem"
"""Problem (definition) name(s) of the campaign."""
AGENT = "kernelarc.agent"
"""Agent name (child runs)."""
STRATEGY = "kernelarc.strategy"
"""Strategy the agent owns (child runs)."""
RUN_DIR = "kernelarc.run_dir"
"""Absolute path of the campaign's run dir (holds attempts.jsonl, the source of truth)."""
BEST_ATTEMPT = "kernelarc.best_attempt"
"""`<index>-<proposal_id>` of the best PASSED attempt so far (parent run)."""
BEST_PROPOSAL = "kernelarc.best_proposal"
"""Proposal id of the best PASSED attempt so far (parent run)."""
BEST_AGENT = "kernelarc.best_agent"
"""Agent of the best PASSED attempt so far (parent run)."""
TRACKING_DEGRADED = "kernelarc.tracking_degraded"
"""`true` on the parent run when some logging calls failed (the run is incomplete)."""
PARENT_RUN_ID = "mlflow.parentRunId"
"""MLflow's own tag that nests a child run under its parent in the UI."""

# --- artifacts ---------------------------------------------------------------------------------
CONFIG_YAML = "config.yaml"
"""The resolved campaign config (parent run)."""
ATTEMPTS_TABLE = "attempts_table.json"
"""Table of all attempts, logged at finish (parent run); read with `MlflowClient.load_table`."""
ATTEMPTS_DIR = "attempts"
"""Folder of per-attempt artifacts (child runs)."""
ATTEMPT_JSON = "attempt.json"
"""The whole Attempt record, inside an attempt's folder."""
TRACE_JSONL = "trace.jsonl"
"""The attempt's traces, one per line, inside an attempt's folder."""
SOURCES_DIR = "sources"
"""The candidate's source files, inside an attempt's folder."""
STDERR_TXT = "stderr.txt"
"""Tail of the runner log, inside an attempt's folder (only when non-empty)."""

ATTEMPTS_TABLE_COLUMNS = (
    "index",
    "problem",
    "agent",
    "strategy",
    "proposal_id",
    "status",
    "verdict",
    "speedup",
    "latency_ms",
)
"""Columns of the attempts table, in order."""

INFRA_ERROR = "INFRA_ERROR"
"""Status of an attempt whose evaluation failed for infrastructure reasons."""

STATUS_CODES: Mapping[str, int] = MappingProxyType(
    {
        EvalStatus.PASSED.value: 0,
        EvalStatus.INCORRECT_SHAPE.value: 1,
        EvalStatus.INCORRECT_NUMERICAL.value: 2,
        EvalStatus.INCORRECT_DTYPE.value: 3,
        EvalStatus.RUNTIME_ERROR.value: 4,
        EvalStatus.COMPILE_ERROR.value: 5,
        EvalStatus.TIMEOUT.value: 6,
        EvalStatus.REWARD_HACK.value: 7,
        EvalStatus.INVALID_REFERENCE.value: 8,
        "REJECTED_STATIC": 9,
        "REJECTED_GUARD": 10,
        INFRA_ERROR: 100,
    }
)
"""Numeric code of each attempt status, for the EVAL_STATUS_CODE metric (stable: append only)."""
UNKNOWN_STATUS_CODE = -1
"""Code logged for a status missing from STATUS_CODES."""


def attempt_artifact_dir(index: int, proposal_id: str) -> str:
    """Artifact folder of one attempt on its agent's child run: `attempts/<index>-<proposal_id>`.

    The index is zero-padded to 4 digits so the MLflow UI lists attempts in order.
    """
    return f"{ATTEMPTS_DIR}/{index:04d}-{proposal_id}"


def status_code(status: str) -> int:
    """The EVAL_STATUS_CODE value of an attempt status."""
    return STATUS_CODES.get(str(status), UNKNOWN_STATUS_CODE)
