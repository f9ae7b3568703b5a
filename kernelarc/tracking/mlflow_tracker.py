"""MlflowTracker: the campaign's runs, metrics and artifacts in MLflow, live.

The campaign loop calls it after appending each Attempt to attempts.jsonl. Run model: experiment
= campaign name; one parent run per campaign (flattened config as params, campaign tags,
`config.yaml`, best-so-far metrics, the attempts and conclusions tables at finish); one child run
per agent (per-attempt metrics with step = attempt index, artifacts under
`attempts/<index>-<proposal_id>/`). What is logged comes from `mlflow_payload`, shared with
`kernelarc sync`. Only `MlflowClient` with explicit run ids is used.

One writer: every MLflow call is made by one thread (`tracker_queue.WriterQueue`), in the order
the tracker's methods were called. The loop calls `log_attempt` under its state lock, which all
agent threads take; `log_attempt` only computes the payload and enqueues it, so a slow tracking
server delays the MLflow record, never the agents. `start_campaign` and `resume_campaign` wait for
their calls (made once, before the agents start); `finish` waits up to `finish_timeout_s` for the
queue to empty, then leaves the rest to `kernelarc sync`.

A backend failure never reaches the caller: it is logged, the tracker becomes `degraded`, and
after `max_consecutive_failures` in a row it stops calling MLflow for `retry_after_s` seconds,
then tries again. With a run dir, every call that succeeded is written to the run dir's ledger
(by the writer, after MLflow answered), so `kernelarc sync` later uploads exactly what is missing.
That guard and the ledger are `mlflow_tracker_calls.TrackerCalls`; opening, reopening and ending
the runs is `mlflow_tracker_runs.TrackerRuns`; this class keeps the Tracker methods, the payload
per attempt and the end of the campaign.
"""

import logging
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Metric

from kernelarc.command_paths import command
from kernelarc.rundir import LEDGER_FILE
from kernelarc.rundir.sync_ledger import CampaignEntry, MarkEntry, SyncLedger
from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Conclusion
from kernelarc.tracking import keys, mlflow_tables
from kernelarc.tracking import mlflow_payload as payload
from kernelarc.tracking.call_breaker import CallBreaker
from kernelarc.tracking.mlflow_payload import (
    MAX_TAG_VALUE,
    AttemptPayload,
    CampaignProgress,
    SolScore,
    cut,
    now_ms,
)
from kernelarc.tracking.mlflow_tracker_calls import TrackerCalls
from kernelarc.tracking.mlflow_tracker_runs import CampaignStart, TrackerRuns
from kernelarc.tracking.proposal_fields import proposal_model, read_conclusions
from kernelarc.tracking.tracker_queue import WriterQueue

logger = logging.getLogger(__name__)

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")
"""Statuses `finish` accepts (MLflow's terminal run statuses)."""


class MlflowTracker:
    """A Tracker that logs to MLflow through `MlflowClient` from one writer thread; thread-safe;
    never raises on I/O.

    Threads: `_lock` guards what callers touch (the start, the progress, `_finished`) and is
    never held across an MLflow call; the MLflow calls (`TrackerCalls`), the runs they make
    (`TrackerRuns`, which guards its agent runs map itself) and `_model_tagged` belong to the
    writer thread.
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        artifact_location: str | None = None,
        max_consecutive_failures: int = 3,
        retry_after_s: float = 60.0,
        run_dir: str | Path | None = None,
        sol_score: SolScore | None = None,
        finish_timeout_s: float = 60.0,
    ) -> None:
        """Create a tracker; nothing is opened or contacted until `start_campaign`.

        Args:
            tracking_uri: e.g. `sqlite:////abs/run/mlflow.db` or `http://127.0.0.1:5000`.
            experiment: experiment name (the campaign name); created if missing.
            artifact_location: artifact root of a newly created experiment; by default
                `<db dir>/mlartifacts` for a `sqlite:` URI and the server's choice otherwise.
            max_consecutive_failures: after this many backend failures in a row the tracker stops
                calling MLflow (a dead server would otherwise cost MLflow's full retry time on
                every attempt) ...
            retry_after_s: ... for this many seconds; then the next call tries again.
            run_dir: the campaign's run dir: its ledger (`mlflow_ledger.jsonl`) records what
                reached MLflow, and its `conclusions.jsonl` becomes a table at finish.
            sol_score: scores PASSED attempts for the `eval/sol_score` metrics; None: no SOL
                metrics.
            finish_timeout_s: how long `finish` waits for the queued calls to reach MLflow;
                what is still queued then is dropped (`kernelarc sync` uploads it).
        """
        self._uri = tracking_uri
        self._experiment_name = experiment
        self._run_dir = Path(run_dir) if run_dir is not None else None
        self._ledger = SyncLedger(self._run_dir / LEDGER_FILE) if self._run_dir else None
        self._lock = threading.Lock()
        self._uid = uuid.uuid4().hex[:16]
        self._model_tagged: set[str] = set()
        self._progress = CampaignProgress(sol_score)
        self._finished = False
        self._finish_timeout_s = max(0.0, finish_timeout_s)
        self._writer = WriterQueue(f"mlflow-writer-{self._uid}")
        breaker = CallBreaker(tracking_uri, max_consecutive_failures, retry_after_s)
        self._calls = TrackerCalls(tracking_uri, breaker, self._writer, self._ledger)
        location = artifact_location or payload.default_artifact_location(tracking_uri)
        self._runs = TrackerRuns(self._calls, experiment, location)

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
        """Experiment id, once the campaign run was created."""
        return self._runs.experiment_id

    @property
    def parent_run_id(self) -> str | None:
        """The campaign's run id, once it was created."""
        return self._runs.parent_run_id

    @property
    def agent_run_ids(self) -> dict[str, str]:
        """Agent name to child run id."""
        return self._runs.agent_runs

    @property
    def campaign_uid(self) -> str:
        """The campaign's random id (tag `kernelarc.campaign_uid`)."""
        return self._uid

    @property
    def degraded(self) -> bool:
        """True once any MLflow call failed, or `finish` left queued calls undone (`kernelarc
        sync` uploads what is missing)."""
        return self._calls.failed_calls > 0 or self._writer.cut_short

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait up to `timeout_s` (None: as long as it takes) until every call queued so far was
        made (or failed); True if so. Also after a `finish` that gave up: until the call it left
        in flight returned. For tools and tests that read the store or the ledger next; never
        under a lock the agents take."""
        return self._writer.wait_idle(timeout_s)

    def ui_hint(self) -> str | None:
        """Where to look: the run's URL for a server, an `mlflow ui` command for a local store."""
        parent, experiment_id = self._runs.parent_run_id, self._runs.experiment_id
        if parent is None:
            return f"MLflow at {self._uri}: no campaign run was recorded (tracking degraded)"
        if self._uri.startswith(("http://", "https://")):
            base = self._uri.rstrip("/")
            return f"MLflow run: {base}/#/experiments/{experiment_id}/runs/{parent}"
        return (
            f"MLflow experiment {self._experiment_name!r} (id {experiment_id}), campaign run "
            f"{parent}; view with: {command('mlflow')} ui --backend-store-uri "
            f"{self._uri} --port 5000, then open http://127.0.0.1:5000"
        )

    # --- Tracker --------------------------------------------------------------------------------

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Record the campaign in the ledger, then create the experiment (if missing) and the
        campaign's parent run with params, tags and `config.yaml`. If MLflow cannot be reached,
        the run is created by a later call that reaches it, or by `kernelarc sync`.

        Waits for the writer to make these calls (called once, before the agents start, so the
        run ids are known when it returns); call it with no lock the agents take.

        Raises:
            RuntimeError: called twice.
        """
        with self._lock:
            if self._runs.start is not None:
                msg = "start_campaign was already called on this tracker; make a new one"
                raise RuntimeError(msg)
            start = CampaignStart.clean(name, self._uid, params, tags, config_yaml)
            self._runs.start = start
            self._calls.note(
                CampaignEntry(
                    uid=self._uid,
                    name=name,
                    experiment=self._experiment_name,
                    uri=self._uri,
                    params={p.key: p.value for p in start.params},
                    tags=start.tags,
                )
            )
        self._writer.call(self._runs.open)

    def resume_campaign(
        self,
        name: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        config_yaml: str,
        attempts: Sequence[Attempt],
    ) -> None:
        """Continue a campaign in its run dir instead of starting one: reuse the campaign id and,
        when they still exist in this store, the parent and agent runs the ledger names (marked
        RUNNING again); replay `attempts` (its attempts.jsonl) so counts and best-so-far go on
        from where they were. Replayed attempts are not logged again; whatever of them the store
        lacks is uploaded by `kernelarc sync` (run at the end of a campaign). Without a usable
        ledger this is `start_campaign`.

        Raises:
            RuntimeError: the tracker was already started.
            ValueError: it has no run dir.
        """
        if self._ledger is None:
            msg = "resume_campaign needs the tracker's run_dir (its ledger names the runs)"
            raise ValueError(msg)
        previous = self._ledger.campaign()
        if previous is not None:
            self._uid = previous.uid
        view = self._ledger.view(self._uri)
        with self._lock:
            if self._runs.start is not None:
                msg = "resume_campaign: this tracker was already started; make a new one"
                raise RuntimeError(msg)
            for attempt in sorted(attempts, key=lambda a: a.index):
                self._progress.add(attempt)
        parent, runs = view.parent_run_id, view.agent_runs
        # None: the writer's job broke (a bug, logged); keep the ledger's runs rather than
        # making a second parent run for one campaign.
        if parent is None or self._writer.call(partial(self._runs.reopen, parent, runs)) is False:
            self.start_campaign(name, params, tags, config_yaml)
            return
        with self._lock:
            self._runs.start = CampaignStart.clean(name, self._uid, params, tags, config_yaml)
            self._runs.adopt(view.experiment_id, parent, runs)

    def start_agent(self, agent: str, strategy: str) -> None:
        """Nothing now: an agent's child run is created with its first attempt (named and
        tagged from that attempt's proposal, strategy included), so an agent that never
        proposes (one that does not apply to the problem) leaves no empty run."""
        del agent, strategy

    def log_attempt(self, attempt: Attempt) -> None:
        """Queue the attempt's metrics and artifacts for the agent's run and best-so-far for the
        campaign run, and return: the payload (counts, best-so-far, timestamps) is computed
        now, in call order; the writer thread sends it. Never blocks on MLflow, so the loop
        calls it under its state lock."""
        with self._lock:
            if self._finished:
                logger.warning("MLflow: attempt %d logged after finish; ignored", attempt.index)
                return
            step = self._progress.add(attempt)
            # Under the lock: the queue's order is the order of `_progress`.
            self._writer.submit(partial(self._write_attempt, step))

    def log_conclusion(self, conclusion: Conclusion) -> None:
        """Nothing live: conclusions reach MLflow as the conclusions table that `finish` writes
        from the run dir's conclusions.jsonl (so a retraction never leaves a stale entry)."""

    def _write_attempt(self, step: AttemptPayload) -> None:
        """Send one attempt's payload (writer thread)."""
        attempt, calls, runs = step.attempt, self._calls, self._runs
        if not calls.available() or (runs.parent_run_id is None and not runs.open()):
            calls.incomplete = True
            return
        parent = runs.parent_run_id
        assert parent is not None
        index = attempt.index
        run_id = runs.agent_run(attempt.proposal.agent, attempt.proposal.strategy)
        if run_id is not None:
            self._tag_model(run_id, attempt)
            metrics = partial(calls.client.log_batch, run_id, metrics=step.agent_metrics)
            calls.logged(f"log metrics of attempt {index}", metrics, parent, index, "metrics")
            files = partial(payload.upload_attempt_artifacts, calls.client, run_id, attempt)
            calls.logged(f"log artifacts of attempt {index}", files, parent, index, "artifacts")
        else:
            calls.incomplete = True
        campaign = partial(
            calls.client.log_batch, parent, metrics=step.campaign_metrics, tags=step.campaign_tags
        )
        what = f"log campaign metrics after attempt {index}"
        calls.logged(what, campaign, parent, index, "campaign")

    def finish(self, status: str, summary: Mapping[str, float]) -> None:
        """Queue the final metrics (`summary` plus the incumbent's), the attempts and
        conclusions tables and the end of every run, then wait up to `finish_timeout_s` for the
        writer to send everything queued, in order. What it has not sent by then is dropped with
        a warning (the tracker is then `degraded`; `kernelarc sync` uploads it: the ledger lists
        only what reached MLflow). Call it with no lock the agents take.

        The closing calls (degraded tag, run ends) are tried even while the tracker is not
        contacting MLflow, stopping at the first one that fails.

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
            # The progress is final now (log_attempt ignores later attempts).
            attempts = self._progress.attempts
            step = max((a.index for a in attempts), default=0)
            final = {**self._progress.final_metrics(), **summary}
            self._writer.submit(partial(self._write_finish, status, final, len(attempts), step))
        if self._writer.close(self._finish_timeout_s):
            return
        logger.warning(
            "MLflow at %s did not take the campaign's last %d queued reports within %g s; they "
            "are dropped and the runs may show RUNNING: `kernelarc sync%s` uploads what is "
            "missing (attempts.jsonl has everything)",
            self._uri,
            self._writer.dropped,
            self._finish_timeout_s,
            f" {self._run_dir}" if self._run_dir is not None else "",
        )

    def _write_finish(self, status: str, final: Mapping[str, float], count: int, step: int) -> None:
        """Send the end of the campaign (writer thread): final metrics, tables, run ends."""
        calls, runs = self._calls, self._runs
        if runs.parent_run_id is None and calls.available():
            runs.open()
        parent = runs.parent_run_id
        if parent is None:
            return
        now = now_ms()
        metrics = [Metric(payload.clean_key(k), float(v), now, step) for k, v in final.items()]
        log_summary = partial(calls.client.log_batch, parent, metrics=metrics)
        if not calls.ok("log the final metrics", log_summary):
            calls.incomplete = True
        else:
            calls.note(MarkEntry(kind="summary", uri=self._uri, run_id=parent, attempts=count))
        self._log_tables(parent)
        runs.close(parent, status)

    # --- internals (writer thread) --------------------------------------------------------------

    def _tag_model(self, run_id: str, attempt: Attempt) -> None:
        agent, model = attempt.proposal.agent, proposal_model(attempt.proposal)
        if model is None or agent in self._model_tagged:
            return
        tag = partial(self._calls.client.set_tag, run_id, keys.MODEL, cut(model, MAX_TAG_VALUE))
        if self._calls.ok(f"tag the model of agent {agent!r}", tag):
            self._model_tagged.add(agent)

    def _log_tables(self, parent: str) -> None:
        progress, calls, agent_runs = self._progress, self._calls, self._runs.agent_runs
        conclusions = read_conclusions(self._run_dir) if self._run_dir else []
        attempts_table = mlflow_tables.attempts_table(
            progress.attempts, progress.sol_scores, agent_runs
        )
        tables = [(keys.ATTEMPTS_TABLE, attempts_table)]
        if conclusions:
            data = mlflow_tables.conclusions_table(conclusions, progress.attempts, agent_runs)
            tables.append((keys.CONCLUSIONS_TABLE, data))
        for artifact, data in tables:
            upload = partial(mlflow_tables.upload_table, calls.client, parent, data, artifact)
            if not calls.ok(f"log {artifact}", upload):
                calls.incomplete = True
                return
        mark = MarkEntry(
            kind="tables",
            uri=self._uri,
            run_id=parent,
            attempts=len(progress.attempts),
            conclusions=len(conclusions),
        )
        calls.note(mark)
