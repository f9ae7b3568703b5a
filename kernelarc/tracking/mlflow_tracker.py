"""MlflowTracker: the campaign's runs, metrics and artifacts in MLflow (the only mlflow import).

The campaign loop calls it after appending each Attempt to attempts.jsonl. Run model: experiment
= campaign name; one parent run per campaign (flattened config as params, `config.yaml`,
best-so-far metrics, the attempts table at finish); one child run per agent (per-attempt metrics
with step = attempt index, artifacts under `attempts/<index>-<proposal_id>/`).
Only `MlflowClient` with explicit run ids is used (the loop logs from several threads), and a
backend failure never reaches the caller: it is logged and the tracker becomes `degraded`.
"""

import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TypeVar

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelarc.schema import Attempt, EvalStatus
from kernelarc.tracking import keys

logger = logging.getLogger(__name__)

T = TypeVar("T")

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")
"""Statuses `finish` accepts (MLflow's terminal run statuses)."""

# MLflow 3.17.2 limits (mlflow.utils.validation); values beyond them fail the whole batch.
_MAX_PARAM_VALUE = 6000
_MAX_TAG_VALUE = 8000
_MAX_KEY = 250
_MAX_PARAMS_PER_BATCH = 100
_INVALID_KEY_CHARS = re.compile(r"[^/\w.\- :]")
_TRUNCATED = "...[truncated]"

# requests' exceptions (connection refused, timeouts) are OSError subclasses.
_BACKEND_ERRORS = (MlflowException, OSError)


class MlflowTracker:
    """A Tracker that logs to MLflow through `MlflowClient`; thread-safe; never raises on I/O."""

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        artifact_location: str | None = None,
        max_consecutive_failures: int = 3,
    ) -> None:
        """Create a tracker; nothing is opened or contacted until `start_campaign`.

        Args:
            tracking_uri: e.g. `sqlite:////abs/run/mlflow.db` or `http://127.0.0.1:5000`.
            experiment: experiment name (the campaign name); created if missing.
            artifact_location: artifact root of a newly created experiment; by default
                `<db dir>/mlartifacts` for a `sqlite:` URI and the server's choice otherwise.
            max_consecutive_failures: after this many backend failures in a row the tracker stops
                calling MLflow for the rest of the campaign (a dead server would otherwise cost
                MLflow's full retry time on every attempt).
        """
        self._uri = tracking_uri
        self._experiment_name = experiment
        self._artifact_location = artifact_location or _default_artifact_location(tracking_uri)
        self._max_consecutive_failures = max(1, max_consecutive_failures)
        self._client: MlflowClient | None = None
        self._lock = threading.Lock()
        self._experiment_id: str | None = None
        self._parent_run_id: str | None = None
        self._campaign_tags: dict[str, str] = {}
        self._agent_runs: dict[str, str] = {}
        self._attempts: list[Attempt] = []
        self._best: Attempt | None = None
        self._passed = 0
        self._failed_calls = 0
        self._failures_in_a_row = 0
        self._started = False
        self._disabled = False
        self._finished = False

    # --- what the CLI and tests read ------------------------------------------------------------

    @property
    def tracking_uri(self) -> str:
        """The MLflow tracking URI."""
        return self._uri

    @property
    def experiment_name(self) -> str:
        """The experiment (campaign) name."""
        return self._experiment_name

    @property
    def experiment_id(self) -> str | None:
        """Experiment id, once `start_campaign` reached MLflow."""
        return self._experiment_id

    @property
    def parent_run_id(self) -> str | None:
        """The campaign's run id, once `start_campaign` reached MLflow."""
        return self._parent_run_id

    @property
    def agent_run_ids(self) -> dict[str, str]:
        """Agent name to child run id."""
        with self._lock:
            return dict(self._agent_runs)

    @property
    def degraded(self) -> bool:
        """True once any MLflow call failed."""
        return self._failed_calls > 0

    def ui_hint(self) -> str | None:
        """Where to look: the run's URL for a server, an `mlflow ui` command for a local store."""
        if self._parent_run_id is None:
            return f"MLflow at {self._uri}: no campaign run was recorded (tracking degraded)"
        if self._uri.startswith(("http://", "https://")):
            base = self._uri.rstrip("/")
            return (
                f"MLflow run: {base}/#/experiments/{self._experiment_id}/runs/{self._parent_run_id}"
            )
        return (
            f"MLflow experiment {self._experiment_name!r} (id {self._experiment_id}), campaign run "
            f"{self._parent_run_id}; view with: mlflow ui --backend-store-uri {self._uri}"
        )

    # --- Tracker --------------------------------------------------------------------------------

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Create the experiment if missing and the campaign's parent run with params and config.

        Raises:
            RuntimeError: called twice.
        """
        with self._lock:
            if self._started:
                msg = "start_campaign was already called on this tracker; make a new one"
                raise RuntimeError(msg)
            self._started = True
            self._campaign_tags = {
                _clean_key(k): _cut(str(v), _MAX_TAG_VALUE) for k, v in tags.items()
            }
            self._experiment_id = self._call(
                "get or create the experiment", self._ensure_experiment
            )
            if self._experiment_id is None:
                self._disabled = True
                return
            experiment_id = self._experiment_id
            run_tags = {**self._campaign_tags, keys.KIND: keys.KIND_CAMPAIGN}
            run = self._call(
                "create the campaign run",
                lambda: self._mlflow.create_run(experiment_id, tags=run_tags, run_name=name),
            )
            if run is None:
                self._disabled = True
                return
            parent: str = run.info.run_id
            self._parent_run_id = parent
            clean = _clean_params(params)
            for start in range(0, len(clean), _MAX_PARAMS_PER_BATCH):
                chunk = clean[start : start + _MAX_PARAMS_PER_BATCH]
                self._call(
                    "log the config params",
                    partial(self._mlflow.log_batch, parent, params=chunk),
                )
            self._call(
                "log config.yaml", lambda: self._log_text(parent, keys.CONFIG_YAML, config_yaml)
            )

    def start_agent(self, agent: str, strategy: str) -> None:
        """Create the agent's child run under the campaign run (once per agent name)."""
        with self._lock:
            self._agent_run(agent, strategy)

    def log_attempt(self, attempt: Attempt) -> None:
        """Log metrics and artifacts on the agent's run, best-so-far on the campaign run."""
        with self._lock:
            if self._finished:
                logger.warning("MLflow: attempt %d logged after finish; ignored", attempt.index)
                return
            new_best = self._account(attempt)
            if self._disabled:
                return
            run_id = self._agent_run(attempt.proposal.agent, attempt.proposal.strategy)
            if run_id is not None:
                self._call(
                    f"log metrics of attempt {attempt.index}",
                    lambda: self._mlflow.log_batch(run_id, metrics=_attempt_metrics(attempt)),
                )
                self._call(
                    f"log artifacts of attempt {attempt.index}",
                    lambda: self._log_attempt_artifacts(run_id, attempt),
                )
            parent = self._parent_run_id
            if parent is not None:
                metrics = self._campaign_metrics(step=attempt.index)
                tags = _best_tags(attempt) if new_best else []
                self._call(
                    f"log campaign metrics after attempt {attempt.index}",
                    lambda: self._mlflow.log_batch(parent, metrics=metrics, tags=tags),
                )

    def finish(self, status: str, summary: Mapping[str, float]) -> None:
        """Log `summary` and the attempts table on the parent run, then end every run.

        The closing calls (degraded tag, run ends) are tried even after too many failures
        disabled the tracker, stopping at the first one that fails.

        Raises:
            ValueError: `status` is not one of RUN_STATUSES.
        """
        if status not in RUN_STATUSES:
            msg = f"finish status must be one of {RUN_STATUSES} (got {status!r})"
            raise ValueError(msg)
        with self._lock:
            if self._finished:
                return
            self._finished = True
            parent = self._parent_run_id
            if parent is None:
                return
            now = _now_ms()
            step = max((a.index for a in self._attempts), default=0)
            metrics = [Metric(_clean_key(k), float(v), now, step) for k, v in summary.items()]
            self._call("log the summary", lambda: self._mlflow.log_batch(parent, metrics=metrics))
            table = _attempts_table(self._attempts)
            self._call(
                "log the attempts table",
                lambda: self._mlflow.log_table(
                    parent, data=table, artifact_file=keys.ATTEMPTS_TABLE
                ),
            )
            # Closing calls are tried even after the breaker tripped, so the UI does not show the
            # runs as running forever; the first one that fails ends the attempt (dead server).
            closing: list[tuple[str, Callable[[], object]]] = []
            if self.degraded:
                tag = partial(self._mlflow.set_tag, parent, keys.TRACKING_DEGRADED, "true")
                closing.append(("tag the run as degraded", tag))
            for run_id in [*self._agent_runs.values(), parent]:
                end = partial(self._mlflow.set_terminated, run_id, status=status)
                closing.append((f"end run {run_id}", end))
            for what, action in closing:
                failed_before = self._failed_calls
                self._call(what, action, force=True)
                if self._failed_calls > failed_before:
                    break

    # --- internals (called with the lock held) --------------------------------------------------

    @property
    def _mlflow(self) -> MlflowClient:
        """The client, made on first use inside `_call` (a sqlite store opens its DB here)."""
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self._uri)
        return self._client

    def _call(self, what: str, action: Callable[[], T], force: bool = False) -> T | None:
        """Run one MLflow call; on a backend error log it, count it and return None.

        Once disabled (too many failures in a row) calls are skipped unless `force` is set.
        """
        if self._disabled and not force:
            return None
        try:
            result = action()
        except _BACKEND_ERRORS as exc:
            self._failed_calls += 1
            self._failures_in_a_row += 1
            logger.warning(
                "MLflow: could not %s at %s (%s: %s); tracking is degraded, attempts.jsonl stays "
                "the source of truth",
                what,
                self._uri,
                type(exc).__name__,
                _cut(str(exc), 500),
            )
            if self._failures_in_a_row >= self._max_consecutive_failures:
                self._disabled = True
                logger.warning(
                    "MLflow: %d failures in a row; not contacting %s again in this campaign",
                    self._failures_in_a_row,
                    self._uri,
                )
            return None
        self._failures_in_a_row = 0
        return result

    def _ensure_experiment(self) -> str:
        experiment = self._mlflow.get_experiment_by_name(self._experiment_name)
        if experiment is None:
            try:
                return self._mlflow.create_experiment(
                    self._experiment_name, artifact_location=self._artifact_location
                )
            except MlflowException:
                # Another process may have created it in between; fall through to re-read.
                experiment = self._mlflow.get_experiment_by_name(self._experiment_name)
                if experiment is None:
                    raise
        if experiment.lifecycle_stage == "deleted":
            self._mlflow.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id

    def _agent_run(self, agent: str, strategy: str) -> str | None:
        if agent in self._agent_runs:
            return self._agent_runs[agent]
        parent, experiment_id = self._parent_run_id, self._experiment_id
        if parent is None or experiment_id is None:
            return None
        tags = {
            **self._campaign_tags,
            keys.PARENT_RUN_ID: parent,
            keys.KIND: keys.KIND_AGENT,
            keys.AGENT: _cut(agent, _MAX_TAG_VALUE),
            keys.STRATEGY: _cut(strategy, _MAX_TAG_VALUE),
        }
        run = self._call(
            f"create the run of agent {agent!r}",
            lambda: self._mlflow.create_run(experiment_id, tags=tags, run_name=agent),
        )
        if run is None:
            return None
        run_id: str = run.info.run_id
        self._agent_runs[agent] = run_id
        return run_id

    def _account(self, attempt: Attempt) -> bool:
        """Update counts and best-so-far; True if the attempt is the new best."""
        self._attempts.append(attempt)
        if attempt.status != EvalStatus.PASSED or attempt.speedup is None:
            return False
        self._passed += 1
        if self._best is None or _better(attempt, self._best):
            self._best = attempt
            return True
        return False

    def _campaign_metrics(self, step: int) -> list[Metric]:
        now = _now_ms()
        count = len(self._attempts)
        metrics = [
            Metric(keys.CAMPAIGN_CANDIDATES, float(count), now, step),
            Metric(keys.CAMPAIGN_PASSED, float(self._passed), now, step),
            Metric(keys.CAMPAIGN_FAILURES, float(count - self._passed), now, step),
        ]
        if self._best is not None and self._best.speedup is not None:
            metrics.append(Metric(keys.CAMPAIGN_BEST_SPEEDUP, self._best.speedup, now, step))
        return metrics

    def _log_text(self, run_id: str, artifact_file: str, text: str) -> None:
        with tempfile.TemporaryDirectory(prefix="kernelarc-mlflow-") as tmp:
            path = Path(tmp) / artifact_file
            path.write_text(text, encoding="utf-8")
            self._mlflow.log_artifact(run_id, str(path))

    def _log_attempt_artifacts(self, run_id: str, attempt: Attempt) -> None:
        with tempfile.TemporaryDirectory(prefix="kernelarc-mlflow-") as tmp:
            root = Path(tmp)
            for source in attempt.proposal.solution.sources:
                # SourceFile.path is validated relative with no `..`, so it stays under root.
                target = root / keys.SOURCES_DIR / source.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source.content, encoding="utf-8")
            traces = "".join(t.model_dump_json(exclude_none=True) + "\n" for t in attempt.traces)
            (root / keys.TRACE_JSONL).write_text(traces, encoding="utf-8")
            (root / keys.ATTEMPT_JSON).write_text(
                attempt.model_dump_json(indent=2), encoding="utf-8"
            )
            if attempt.stderr_tail:
                (root / keys.STDERR_TXT).write_text(attempt.stderr_tail, encoding="utf-8")
            artifact_path = keys.attempt_artifact_dir(attempt.index, attempt.proposal.id)
            self._mlflow.log_artifacts(run_id, str(root), artifact_path=artifact_path)


def _better(candidate: Attempt, best: Attempt) -> bool:
    """Higher speedup wins; ties go to lower latency, then to the earlier attempt."""
    inf = float("inf")

    def rank(a: Attempt) -> tuple[float, float, int]:
        return (-(a.speedup or 0.0), a.latency_ms if a.latency_ms is not None else inf, a.index)

    return rank(candidate) < rank(best)


def _attempt_metrics(attempt: Attempt) -> list[Metric]:
    now, step = _now_ms(), attempt.index
    passed = attempt.status == EvalStatus.PASSED
    metrics = [
        Metric(keys.EVAL_PASSED, 1.0 if passed else 0.0, now, step),
        Metric(keys.EVAL_STATUS_CODE, float(keys.status_code(attempt.status)), now, step),
        Metric(keys.EVAL_WALL_S, attempt.wall_s, now, step),
    ]
    if attempt.speedup is not None:
        metrics.append(Metric(keys.EVAL_SPEEDUP, attempt.speedup, now, step))
    if attempt.latency_ms is not None:
        metrics.append(Metric(keys.EVAL_LATENCY_MS, attempt.latency_ms, now, step))
    return metrics


def _best_tags(attempt: Attempt) -> list[RunTag]:
    return [
        RunTag(keys.BEST_ATTEMPT, f"{attempt.index}-{attempt.proposal.id}"),
        RunTag(keys.BEST_PROPOSAL, attempt.proposal.id),
        RunTag(keys.BEST_AGENT, _cut(attempt.proposal.agent, _MAX_TAG_VALUE)),
    ]


def _attempts_table(attempts: list[Attempt]) -> dict[str, list[object]]:
    ordered = sorted(attempts, key=lambda a: a.index)
    return {
        "index": [a.index for a in ordered],
        "problem": [a.problem for a in ordered],
        "agent": [a.proposal.agent for a in ordered],
        "strategy": [a.proposal.strategy for a in ordered],
        "proposal_id": [a.proposal.id for a in ordered],
        "status": [str(a.status) for a in ordered],
        "verdict": [str(a.verdict) for a in ordered],
        "speedup": [a.speedup for a in ordered],
        "latency_ms": [a.latency_ms for a in ordered],
    }


def _clean_params(params: Mapping[str, str]) -> list[Param]:
    """MLflow-valid params: keys with invalid characters replaced, values cut to the limit."""
    cleaned: dict[str, str] = {}
    for key, value in params.items():
        name = _clean_key(key)
        if name in cleaned:
            logger.warning("MLflow: param %r collides with another after cleaning; skipped", key)
            continue
        cleaned[name] = _cut(str(value), _MAX_PARAM_VALUE)
    return [Param(k, v) for k, v in sorted(cleaned.items())]


def _clean_key(key: str) -> str:
    return _INVALID_KEY_CHARS.sub("_", key)[:_MAX_KEY]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_TRUNCATED)] + _TRUNCATED


def _now_ms() -> int:
    return int(time.time() * 1000)


def _default_artifact_location(tracking_uri: str) -> str | None:
    """`<db dir>/mlartifacts` for a local sqlite store, so artifacts do not land in the cwd."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    db = tracking_uri[len(prefix) :].split("?", 1)[0]
    if not db or db == ":memory:":
        return None
    return (Path(db).resolve().parent / "mlartifacts").as_uri()
