"""What a campaign puts in MLflow, computed from its Attempts alone (shared by tracker and sync).

Place in the flow: `MlflowTracker` feeds each attempt to a `CampaignProgress` as it arrives and
logs the payload; `kernelarc sync` replays attempts.jsonl through a fresh `CampaignProgress` and
uploads the parts the store lacks. Both therefore log the same values for the same attempt.
The attempts and conclusions tables are in `mlflow_tables`.
"""

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.tracking import keys
from kernelarc.tracking.proposal_fields import llm_usage, transcript_json

SolScore = Callable[[Attempt], float | None]
"""SOL score of a PASSED attempt (None when it cannot be computed)."""

# MLflow 3.17.2 limits (mlflow.utils.validation); values beyond them fail the whole batch.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250
MAX_PARAMS_PER_BATCH = 100
_INVALID_KEY_CHARS = re.compile(r"[^/\w.\- :]")
_TRUNCATED = "...[truncated]"


@dataclass(frozen=True)
class AttemptPayload:
    """Everything logged for one attempt."""

    attempt: Attempt
    """The attempt."""
    sol_score: float | None
    """Its SOL score (PASSED attempts with a roofline bound only)."""
    agent_metrics: list[Metric]
    """Metrics of the agent's child run, step = attempt index."""
    campaign_metrics: list[Metric]
    """Best-so-far and counts on the parent run, step = attempt index."""
    campaign_tags: list[RunTag]
    """Parent-run tags after this attempt (the incumbent, the hardware once known)."""


class CampaignProgress:
    """Counts, incumbent and LLM totals of a campaign, fed attempts in index order."""

    def __init__(self, sol_score: SolScore | None = None) -> None:
        """Start empty; `sol_score` scores PASSED attempts (None: no SOL metrics)."""
        self._sol_score = sol_score
        self.attempts: list[Attempt] = []
        """Attempts fed so far, in feeding order."""
        self.sol_scores: dict[int, float | None] = {}
        """SOL score per attempt index."""
        self.incumbent: Attempt | None = None
        """The last NEW_BEST attempt."""
        self.hardware: str | None = None
        """Hardware named by the first trace that names one."""
        self._statuses: Counter[str] = Counter()
        self._agent_statuses: dict[str, Counter[str]] = {}
        self._tokens = 0
        self._cost = 0.0
        self._llm_used = False

    def add(self, attempt: Attempt) -> AttemptPayload:
        """Account for the next attempt and return what to log for it."""
        now, step = now_ms(), attempt.index
        self.attempts.append(attempt)
        status = str(attempt.status)
        self._statuses[status] += 1
        own = self._agent_statuses.setdefault(attempt.proposal.agent, Counter())
        own[status] += 1
        score = self._score(attempt)
        self.sol_scores[attempt.index] = score
        usage = llm_usage(attempt.proposal)
        if usage.calls:
            self._llm_used = True
            self._tokens += usage.tokens
            self._cost += usage.cost_usd
        if attempt.verdict == Verdict.NEW_BEST and attempt.speedup is not None:
            self.incumbent = attempt
        self.hardware = self.hardware or _hardware(attempt)
        agent_metrics = attempt_metrics(attempt, score, own[status], now)
        return AttemptPayload(
            attempt, score, agent_metrics, self._campaign(now, step), self.campaign_tags()
        )

    def campaign_tags(self) -> list[RunTag]:
        """Parent-run tags of the state so far: the incumbent and the hardware, once known.

        Sent with every attempt (tags are overwritten, not appended), so a tracker that missed
        the attempt that changed them during an outage still ends up right.
        """
        tags = best_tags(self.incumbent) if self.incumbent is not None else []
        if self.hardware:
            tags.append(RunTag(keys.HARDWARE, cut(self.hardware, MAX_TAG_VALUE)))
        return tags

    @property
    def passed(self) -> int:
        """PASSED attempts so far."""
        return self._statuses[EvalStatus.PASSED.value]

    def final_metrics(self) -> dict[str, float]:
        """The end-of-campaign metrics of the parent run."""
        out = {
            keys.FINAL_ATTEMPTS: float(len(self.attempts)),
            keys.FINAL_PASSED: float(self.passed),
        }
        best = self.incumbent
        if best is not None and best.speedup is not None:
            out[keys.FINAL_BEST_SPEEDUP] = best.speedup
            if best.speedup_ci_low is not None and best.speedup_ci_high is not None:
                out[keys.FINAL_BEST_SPEEDUP_CI_LOW] = best.speedup_ci_low
                out[keys.FINAL_BEST_SPEEDUP_CI_HIGH] = best.speedup_ci_high
            if best.latency_ms is not None:
                out[keys.FINAL_BEST_LATENCY_MS] = best.latency_ms
            score = self.sol_scores.get(best.index)
            if score is not None:
                out[keys.FINAL_BEST_SOL_SCORE] = score
        return out

    def _score(self, attempt: Attempt) -> float | None:
        if self._sol_score is None or attempt.status != EvalStatus.PASSED:
            return None
        return self._sol_score(attempt)

    def _campaign(self, now: int, step: int) -> list[Metric]:
        count = len(self.attempts)
        metrics = [
            Metric(keys.CAMPAIGN_CANDIDATES, float(count), now, step),
            Metric(keys.CAMPAIGN_PASSED, float(self.passed), now, step),
            Metric(keys.CAMPAIGN_FAILURES, float(count - self.passed), now, step),
        ]
        status = str(self.attempts[-1].status)
        metrics.append(
            Metric(keys.status_count_key(status), float(self._statuses[status]), now, step)
        )
        best = self.incumbent
        if best is not None and best.speedup is not None:
            metrics.append(Metric(keys.CAMPAIGN_BEST_SPEEDUP, best.speedup, now, step))
            if best.speedup_ci_low is not None and best.speedup_ci_high is not None:
                low, high = best.speedup_ci_low, best.speedup_ci_high
                metrics.append(Metric(keys.CAMPAIGN_BEST_SPEEDUP_CI_LOW, low, now, step))
                metrics.append(Metric(keys.CAMPAIGN_BEST_SPEEDUP_CI_HIGH, high, now, step))
            if best.latency_ms is not None:
                metrics.append(Metric(keys.CAMPAIGN_BEST_LATENCY_MS, best.latency_ms, now, step))
            score = self.sol_scores.get(best.index)
            if score is not None:
                metrics.append(Metric(keys.CAMPAIGN_BEST_SOL_SCORE, score, now, step))
        if self._llm_used:
            metrics.append(Metric(keys.CAMPAIGN_LLM_TOKENS, float(self._tokens), now, step))
            metrics.append(Metric(keys.CAMPAIGN_LLM_COST_USD, self._cost, now, step))
        return metrics


def attempt_metrics(
    attempt: Attempt, sol_score: float | None, status_count: int, now: int
) -> list[Metric]:
    """The agent-run metrics of one attempt (step = its index)."""
    step = attempt.index
    passed = attempt.status == EvalStatus.PASSED
    status = str(attempt.status)
    metrics = [
        Metric(keys.EVAL_PASSED, 1.0 if passed else 0.0, now, step),
        Metric(keys.EVAL_STATUS_CODE, float(keys.status_code(status)), now, step),
        Metric(keys.EVAL_WALL_S, attempt.wall_s, now, step),
        Metric(keys.status_count_key(status), float(status_count), now, step),
    ]
    if attempt.speedup is not None:
        metrics.append(Metric(keys.EVAL_SPEEDUP, attempt.speedup, now, step))
    interval = (
        (keys.EVAL_SPEEDUP_CI_LOW, attempt.speedup_ci_low),
        (keys.EVAL_SPEEDUP_CI_HIGH, attempt.speedup_ci_high),
        (keys.EVAL_INTERLEAVED_SPEEDUP, attempt.interleaved_speedup),
    )
    metrics += [Metric(key, value, now, step) for key, value in interval if value is not None]
    if attempt.latency_ms is not None:
        metrics.append(Metric(keys.EVAL_LATENCY_MS, attempt.latency_ms, now, step))
    if sol_score is not None:
        metrics.append(Metric(keys.EVAL_SOL_SCORE, sol_score, now, step))
    usage = llm_usage(attempt.proposal)
    if usage.calls:
        metrics += [
            Metric(keys.LLM_CALLS, float(usage.calls), now, step),
            Metric(keys.LLM_PROMPT_TOKENS, float(usage.prompt_tokens), now, step),
            Metric(keys.LLM_COMPLETION_TOKENS, float(usage.completion_tokens), now, step),
            Metric(keys.LLM_COST_USD, usage.cost_usd, now, step),
        ]
    return metrics


def best_tags(attempt: Attempt) -> list[RunTag]:
    """The parent-run tags naming the incumbent."""
    return [
        RunTag(keys.BEST_ATTEMPT, f"{attempt.index}-{attempt.proposal.id}"),
        RunTag(keys.BEST_PROPOSAL, attempt.proposal.id),
        RunTag(keys.BEST_AGENT, cut(attempt.proposal.agent, MAX_TAG_VALUE)),
        RunTag(keys.BEST_STRATEGY, cut(attempt.proposal.strategy, MAX_TAG_VALUE)),
    ]


def upload_attempt_artifacts(client: MlflowClient, run_id: str, attempt: Attempt) -> None:
    """Upload an attempt's folder; `attempt.json` goes last, so its presence means complete."""
    folder = keys.attempt_artifact_dir(attempt.index, attempt.proposal.id)
    with tempfile.TemporaryDirectory(prefix="kernelarc-mlflow-") as tmp:
        root = Path(tmp) / "files"
        root.mkdir()
        for source in attempt.proposal.solution.sources:
            # SourceFile.path is validated relative with no `..`, so it stays under root.
            target = root / keys.SOURCES_DIR / source.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source.content, encoding="utf-8")
        traces = "".join(t.model_dump_json(exclude_none=True) + "\n" for t in attempt.traces)
        (root / keys.TRACE_JSONL).write_text(traces, encoding="utf-8")
        if attempt.stderr_tail:
            (root / keys.STDERR_TXT).write_text(attempt.stderr_tail, encoding="utf-8")
        transcript = transcript_json(attempt.proposal)
        if transcript is not None:
            (root / keys.TRANSCRIPT_JSON).write_text(transcript, encoding="utf-8")
        client.log_artifacts(run_id, str(root), artifact_path=folder)
        record = Path(tmp) / keys.ATTEMPT_JSON
        record.write_text(attempt.model_dump_json(indent=2), encoding="utf-8")
        client.log_artifact(run_id, str(record), artifact_path=folder)


def ensure_experiment(client: MlflowClient, name: str, artifact_location: str | None) -> str:
    """The id of experiment `name`, created (or restored) if needed, marked as a runs-table
    experiment for the UI (keys.EXPERIMENT_KIND_TAG)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        tags = {keys.EXPERIMENT_KIND_TAG: keys.EXPERIMENT_KIND}
        try:
            created = client.create_experiment(name, artifact_location=artifact_location, tags=tags)
            return str(created)
        except MlflowException:
            # Another process may have created it in between; fall through to re-read.
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    experiment_id = str(experiment.experiment_id)
    if experiment.lifecycle_stage == "deleted":
        client.restore_experiment(experiment_id)
    if keys.EXPERIMENT_KIND_TAG not in experiment.tags:
        client.set_experiment_tag(experiment_id, keys.EXPERIMENT_KIND_TAG, keys.EXPERIMENT_KIND)
    return experiment_id


def log_text(client: MlflowClient, run_id: str, artifact_file: str, text: str) -> None:
    """Write `text` as the run's artifact `artifact_file` (top level), replacing it."""
    with tempfile.TemporaryDirectory(prefix="kernelarc-mlflow-") as tmp:
        path = Path(tmp) / artifact_file
        path.write_text(text, encoding="utf-8")
        client.log_artifact(run_id, str(path))


def clean_params(params: Mapping[str, str]) -> list[Param]:
    """MLflow-valid params: keys with invalid characters replaced, values cut to the limit.

    A key that collides with another after cleaning keeps the first value.
    """
    cleaned: dict[str, str] = {}
    for key, value in params.items():
        cleaned.setdefault(clean_key(key), cut(str(value), MAX_PARAM_VALUE))
    return [Param(k, v) for k, v in sorted(cleaned.items())]


def clean_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """MLflow-valid tags (keys cleaned, values cut)."""
    return {clean_key(k): cut(str(v), MAX_TAG_VALUE) for k, v in tags.items()}


def clean_key(key: str) -> str:
    """A valid MLflow param, tag or metric key (invalid characters become `_`)."""
    return _INVALID_KEY_CHARS.sub("_", key)[:MAX_KEY]


def cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked as truncated."""
    return text if len(text) <= limit else text[: limit - len(_TRUNCATED)] + _TRUNCATED


def now_ms() -> int:
    """Wall-clock time in milliseconds (MLflow timestamps)."""
    return int(time.time() * 1000)


def _hardware(attempt: Attempt) -> str | None:
    for trace in attempt.traces:
        if trace.evaluation is not None and trace.evaluation.environment.hardware:
            return trace.evaluation.environment.hardware
    return None


def default_artifact_location(tracking_uri: str) -> str | None:
    """`<db dir>/mlartifacts` for a local sqlite store, so artifacts do not land in the cwd."""
    db = _sqlite_path(tracking_uri)
    return (db.parent / "mlartifacts").as_uri() if db is not None else None


@contextmanager
def sqlite_store_lock(tracking_uri: str) -> Iterator[None]:
    """Hold an inter-process lock on a local SQLite store (a no-op for other stores).

    MLflow creates and migrates a SQLite store on first use; two processes doing so at once
    (the jobs of a `hydra/launcher=local_joblib` sweep) break the migration and can leave the
    store half-migrated. Whoever opens a store first holds this lock meanwhile. The lock file
    (`kernelarc-sqlite-<hash>.lock` in the temp dir) is removed by whoever releases it, while
    still holding it; a process that locked the file just before it was unlinked sees that its
    name now points elsewhere (or nowhere) and locks afresh, so no two hold the lock at once.
    """
    db = _sqlite_path(tracking_uri)
    if db is None:
        yield
        return
    digest = hashlib.sha256(str(db).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"kernelarc-sqlite-{digest}.lock"
    while True:
        handle = lock.open("a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            same = lock.stat().st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()  # unlinked by the previous holder: lock the new file
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        handle.close()


def _sqlite_path(tracking_uri: str) -> Path | None:
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    db = tracking_uri[len(prefix) :].split("?", 1)[0]
    if not db or db == ":memory:":
        return None
    return Path(db).resolve()
