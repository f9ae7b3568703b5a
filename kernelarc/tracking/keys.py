"""Every MLflow metric, param, tag and artifact key KernelArc writes, defined once.

Used by `tracking/mlflow_tracker.py` when logging and by the CLI, tests and anything that queries
MLflow afterwards (tag keys contain dots, so filters quote them with backticks:
``tags.`kernelarc.kind` = 'campaign'``).
Metrics are `namespace/name`; tags are `kernelarc.<name>`.
"""

from collections.abc import Mapping
from types import MappingProxyType

from kernelarc.rundir import CONFIG_FILE
from kernelarc.schema import EvalStatus

# --- per-attempt metrics, on the agent's child run, step = Attempt.index -------------------------
EVAL_SPEEDUP = "eval/speedup"
"""Geometric-mean speedup over workloads (PASSED attempts only)."""
EVAL_SPEEDUP_CI_LOW = "eval/speedup_ci_low"
"""Lower bound of the speedup's confidence interval (absent without one; the method is the
attempts table's `speedup_ci_method`)."""
EVAL_SPEEDUP_CI_HIGH = "eval/speedup_ci_high"
"""Upper bound of the speedup's confidence interval."""
EVAL_INTERLEAVED_SPEEDUP = "eval/interleaved_speedup"
"""The interleaved estimate of the speedup, the point the interval is of."""
EVAL_LATENCY_MS = "eval/latency_ms"
"""Geometric-mean latency over workloads (PASSED attempts only)."""
EVAL_PASSED = "eval/passed"
"""1 if the attempt PASSED, else 0."""
EVAL_STATUS_CODE = "eval/status_code"
"""The attempt's status as a number (see STATUS_CODES)."""
EVAL_WALL_S = "eval/wall_s"
"""Sandbox wall time of the attempt."""
EVAL_SOL_SCORE = "eval/sol_score"
"""SOL-ExecBench score of a PASSED attempt, with the reference as T_b (absent without T_SOL)."""
LLM_CALLS = "llm/calls"
"""LLM requests made for the attempt's proposal (retries included; absent for offline agents)."""
LLM_PROMPT_TOKENS = "llm/prompt_tokens"
"""Prompt tokens of those requests."""
LLM_COMPLETION_TOKENS = "llm/completion_tokens"
"""Completion tokens of those requests."""
LLM_COST_USD = "llm/cost_usd"
"""Cost of those requests at the configured prices."""
STATUS_COUNT_PREFIX = "status/"
"""`status/<STATUS>`: attempts with that status so far (agent run: the agent's; parent: all)."""

# --- campaign metrics, on the parent run, step = Attempt.index ----------------------------------
CAMPAIGN_BEST_SPEEDUP = "campaign/best_speedup"
"""Speedup of the incumbent (the last NEW_BEST attempt) so far; absent until there is one."""
CAMPAIGN_BEST_SPEEDUP_CI_LOW = "campaign/best_speedup_ci_low"
"""Lower bound of the incumbent's speedup interval (absent while it has none)."""
CAMPAIGN_BEST_SPEEDUP_CI_HIGH = "campaign/best_speedup_ci_high"
"""Upper bound of the incumbent's speedup interval."""
CAMPAIGN_BEST_LATENCY_MS = "campaign/best_latency_ms"
"""Latency of the incumbent so far."""
CAMPAIGN_BEST_SOL_SCORE = "campaign/best_sol_score"
"""SOL score of the incumbent so far (absent while it has none)."""
CAMPAIGN_LLM_TOKENS = "campaign/llm_tokens"
"""Prompt + completion tokens of every proposal so far (only once an LLM was used)."""
CAMPAIGN_LLM_COST_USD = "campaign/llm_cost_usd"
"""LLM cost of every proposal so far (only once an LLM was used)."""
CAMPAIGN_CANDIDATES = "campaign/candidates"
"""Attempts evaluated so far."""
CAMPAIGN_PASSED = "campaign/passed"
"""PASSED attempts so far."""
CAMPAIGN_FAILURES = "campaign/failures"
"""Attempts that did not pass (candidate failures and infrastructure errors) so far."""

# --- final metrics, on the parent run, logged once when the campaign ends ---------------------
FINAL_BEST_SPEEDUP = "campaign/final_best_speedup"
"""Speedup of the final incumbent."""
FINAL_BEST_SPEEDUP_CI_LOW = "campaign/final_best_speedup_ci_low"
"""Lower bound of the final incumbent's speedup interval (absent without one)."""
FINAL_BEST_SPEEDUP_CI_HIGH = "campaign/final_best_speedup_ci_high"
"""Upper bound of the final incumbent's speedup interval."""
FINAL_BEST_LATENCY_MS = "campaign/final_best_latency_ms"
"""Latency of the final incumbent."""
FINAL_BEST_SOL_SCORE = "campaign/final_best_sol_score"
"""SOL score of the final incumbent (absent without T_SOL)."""
FINAL_ATTEMPTS = "campaign/attempts"
"""Attempts recorded in all."""
FINAL_PASSED = "campaign/final_passed"
"""PASSED attempts in all."""

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
PROBLEM_SOURCE = "kernelarc.problem_source"
"""The campaign's `problem=` as given: a built-in name or the problem dir's path."""
TIMING = "kernelarc.timing"
"""`cpu: pipeline check, not performance` on runs whose numbers were timed on the CPU."""
MLFLOW_NOTE = "mlflow.note.content"
"""MLflow's run description (shown in the UI); a CPU campaign's says its timings are a check."""
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
BEST_STRATEGY = "kernelarc.best_strategy"
"""Strategy of the agent of the incumbent (parent run)."""
SEED = "kernelarc.seed"
"""Campaign seed (parent run; also a param)."""
DEVICE = "kernelarc.device"
"""`cpu` or `cuda` as configured (`auto` until the first trace names the hardware)."""
HARDWARE = "kernelarc.hardware"
"""Hardware name from the first trace (e.g. `NVIDIA H200`), set once it is known."""
GIT_SHA = "kernelarc.git_sha"
"""Commit of the KernelArc checkout that ran the campaign (`-dirty` if it had local edits)."""
VERSION = "kernelarc.version"
"""KernelArc package version."""
SANDBOX = "kernelarc.sandbox"
"""Sandbox kind (`local`, `docker`)."""
SANDBOX_IMAGE = "kernelarc.sandbox_image"
"""The docker sandbox's image (docker sandbox only)."""
IMAGE_ID = "kernelarc.image_id"
"""Id of the platform image the campaign ran in ($KERNELARC_IMAGE_ID; absent outside one)."""
CHOICE_PREFIX = "kernelarc.choice."
"""`kernelarc.choice.<group>`: the Hydra config group option (e.g. `...choice.guard = off`)."""
COORDINATION_PREFIX = "kernelarc.coordination."
"""`kernelarc.coordination.<switch>`: each coordination switch, `true` or `false`."""
OVERRIDES = "kernelarc.overrides"
"""The job's Hydra command-line overrides, space separated (what a sweep varied)."""
CAMPAIGN_UID = "kernelarc.campaign_uid"
"""Random id of the campaign, kept in the run dir's ledger, so sync finds its runs again."""
MODEL = "kernelarc.model"
"""LLM model of an agent's proposals (child runs of LLM agents)."""
KIND_REPORT = "report"
"""Value of KIND on a run that holds an ablation report."""
TRACKING_DEGRADED = "kernelarc.tracking_degraded"
"""`true` on the parent run when some logging calls failed (the run is incomplete)."""
PARENT_RUN_ID = "mlflow.parentRunId"
"""MLflow's own tag that nests a child run under its parent in the UI."""
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
"""MLflow's experiment tag that picks the UI: KernelArc experiments open on the runs table."""
EXPERIMENT_KIND = "custom_model_development"
"""Value of EXPERIMENT_KIND_TAG (MLflow's "model training" experiments, not GenAI ones)."""

# --- artifacts ---------------------------------------------------------------------------------
CONFIG_YAML = CONFIG_FILE
"""The resolved campaign config (parent run), under the run dir's own file name."""
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
TRANSCRIPT_JSON = "transcript.json"
"""The proposal's LLM exchanges, inside an attempt's folder (LLM agents only)."""
CONCLUSIONS_TABLE = "conclusions_table.json"
"""Table of the campaign's conclusions with links to their evidence (parent run)."""
REPORT_DIR = "report"
"""Artifact folder of a report run (HTML page, PNG plots, JSON and CSV numbers)."""
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"
"""MLflow's own tag listing a run's tables (so the UI offers them in its evaluation view)."""

ATTEMPTS_TABLE_COLUMNS = (
    "index",
    "problem",
    "agent",
    "strategy",
    "model",
    "proposal_id",
    "parent_id",
    "status",
    "verdict",
    "confirmed",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_ci_method",
    "latency_ms",
    "sol_score",
    "best_speedup_after",
    "wall_s",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "draft",
    "conclusions_seen",
    "rationale",
    "artifacts",
)
"""Columns of the attempts table, in order (`artifacts`: `runs:/<agent run>/attempts/<dir>`)."""

CONCLUSIONS_TABLE_COLUMNS = (
    "id",
    "agent",
    "strategy",
    "claim",
    "problem",
    "confidence",
    "published_at",
    "retracted",
    "retraction_reason",
    "evidence",
    "evidence_links",
)
"""Columns of the conclusions table (`evidence_links`: the evidence attempts' artifact URIs)."""

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


def attempt_artifact_uri(run_id: str, index: int, proposal_id: str) -> str:
    """`runs:/<run id>/attempts/<index>-<proposal_id>`: where an attempt's artifacts live."""
    return f"runs:/{run_id}/{attempt_artifact_dir(index, proposal_id)}"


def status_count_key(status: str) -> str:
    """The `status/<STATUS>` metric of an attempt status."""
    return f"{STATUS_COUNT_PREFIX}{status}"


def status_code(status: str) -> int:
    """The EVAL_STATUS_CODE value of an attempt status."""
    return STATUS_CODES.get(str(status), UNKNOWN_STATUS_CODE)
