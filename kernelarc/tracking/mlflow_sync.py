"""`kernelarc sync RUN_DIR`: upload to MLflow what the store lacks of a campaign, from its run dir.

Place in the flow: `kernelarc campaign` calls `sync_run_dir` after the tracker finished (a no-op
when the ledger shows everything arrived); a person calls it after an outage, or to upload a
`tracking=none` campaign. attempts.jsonl is the source of truth; the run dir's ledger
(`sync_ledger`) says what already arrived. A part the ledger does not list is looked up on the
server first, so a re-sync, or one after a request that timed out but was applied, never logs
anything twice. The runs come from `mlflow_sync_runs.SyncRuns`: the parent run is found through the
ledger, else the `kernelarc.campaign_uid` tag, else the `kernelarc.run_dir` tag; only then is a new
one made. This module uploads the attempts, tables and run ends under them.
"""

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Metric, Run
from mlflow.tracking import MlflowClient

from kernelarc.errors import ConfigError, TrackingError
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, LEDGER_FILE
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_json
from kernelarc.rundir.sync_ledger import (
    PARTS,
    CampaignEntry,
    LedgerView,
    LoggedEntry,
    MarkEntry,
    Part,
    RunEntry,
    SyncLedger,
)
from kernelarc.schema import Attempt
from kernelarc.tracking import keys, mlflow_tables
from kernelarc.tracking import mlflow_payload as payload
from kernelarc.tracking.mlflow_payload import AttemptPayload, CampaignProgress, SolScore
from kernelarc.tracking.mlflow_sync_runs import SyncRuns, iso_ms
from kernelarc.tracking.mlflow_tracker_calls import BACKEND_ERRORS
from kernelarc.tracking.proposal_fields import proposal_model, read_conclusions
from kernelarc.tracking.run_metadata import identity_from_run_dir

logger = logging.getLogger(__name__)

TERMINAL = ("FINISHED", "FAILED", "KILLED")
"""campaign.json statuses after which sync ends the runs."""


@dataclass
class SyncReport:
    """What one sync did."""

    run_dir: Path
    """The campaign's run dir."""
    tracking_uri: str
    """The store synced to."""
    experiment: str
    """Experiment name."""
    parent_run_id: str = ""
    """The campaign's parent run."""
    attempts: int = 0
    """Attempts in attempts.jsonl."""
    created: list[str] = field(default_factory=list)
    """Runs this sync created (`campaign`, `agent <name>`)."""
    uploaded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARTS, 0))
    """Parts uploaded, by part."""
    found: int = 0
    """Parts the ledger lacked but the server had (not uploaded again)."""
    up_to_date: bool = False
    """The ledger showed everything arrived already: nothing was asked of the server."""
    tables: bool = False
    """The attempts (and conclusions) tables were written."""
    closed: str | None = None
    """Status the runs were ended with, if this sync ended them."""
    notes: list[str] = field(default_factory=list)
    """Things a person should know."""

    @property
    def changed(self) -> bool:
        """True if anything was written to MLflow."""
        return bool(self.created or sum(self.uploaded.values()) or self.tables or self.closed)

    def describe(self) -> str:
        """A few lines for a person."""
        head = (
            f"{self.run_dir} -> {self.tracking_uri} (experiment {self.experiment!r}, "
            f"run {self.parent_run_id}): {self.attempts} attempts"
        )
        if self.up_to_date:
            done = (
                f"  nothing to upload: all {self.attempts} attempts are already there (per the "
                "run dir's mlflow_ledger.jsonl; --verify checks the server itself)"
            )
            return "\n".join([head, done, *(f"  note: {note}" for note in self.notes)])
        up = ", ".join(f"{n} {part}" for part, n in self.uploaded.items() if n) or "nothing"
        lines = [
            head,
            f"  created: {', '.join(self.created) or 'nothing'}; uploaded: {up}; "
            f"already on the server though the ledger lacked them: {self.found} attempt parts; "
            f"tables {'written' if self.tables else 'unchanged'}; "
            f"runs {'ended as ' + self.closed if self.closed else 'unchanged'}",
        ]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def ledger_uri(run_dir: Path) -> str | None:
    """The tracking URI the campaign of `run_dir` was configured with (from its ledger)."""
    campaign = SyncLedger(run_dir / LEDGER_FILE).campaign()
    return campaign.uri if campaign is not None and campaign.uri else None


def sync_run_dir(
    run_dir: Path,
    tracking_uri: str,
    experiment: str | None = None,
    sol_score: SolScore | None = None,
    verify: bool = False,
) -> SyncReport:
    """Upload what the store at `tracking_uri` lacks of the campaign in `run_dir`.

    Args:
        run_dir: a campaign run dir (attempts.jsonl; config.yaml, campaign.json and the ledger
            when present).
        tracking_uri: the store.
        experiment: experiment name; default: the campaign's (ledger or config.yaml).
        sol_score: scores PASSED attempts, as during the campaign (None: no SOL metrics).
        verify: check every part on the server, not only those the ledger lacks.

    Raises:
        ConfigError: `run_dir` is not a run dir.
        TrackingError: the store failed; what was uploaded so far stays (re-run to continue).
    """
    log = run_dir / ATTEMPTS_FILE
    if not log.is_file() and not (run_dir / CAMPAIGN_FILE).is_file():
        msg = f"{run_dir}: not a KernelArc run dir (no {ATTEMPTS_FILE}); pass a campaign run dir"
        raise ConfigError(msg)
    # A campaign whose agents had nothing to propose has campaign.json and no attempt.
    attempts = sorted(read_attempts(log), key=lambda a: a.index) if log.is_file() else []
    ledger = SyncLedger(run_dir / LEDGER_FILE)
    campaign = ledger.campaign() or _campaign_from_run_dir(run_dir)
    name = experiment or campaign.experiment
    sync = _Sync(run_dir, tracking_uri, name, campaign, ledger, attempts, sol_score, verify)
    return sync.run()


def _campaign_from_run_dir(run_dir: Path) -> CampaignEntry:
    identity = identity_from_run_dir(run_dir)
    return CampaignEntry(
        uid="",
        name=identity.name,
        experiment=identity.experiment,
        params=identity.params,
        tags=payload.clean_tags(identity.tags),
    )


@contextmanager
def _backend(uri: str, what: str) -> Iterator[None]:
    try:
        yield
    except BACKEND_ERRORS as exc:
        msg = (
            f"MLflow at {uri}: cannot {what} ({type(exc).__name__}: {payload.cut(str(exc), 300)}); "
            "what was uploaded so far is kept; run `kernelarc sync RUN_DIR` again once it answers"
        )
        raise TrackingError(msg) from exc


class _Sync:
    """One sync of one run dir to one store."""

    def __init__(
        self,
        run_dir: Path,
        uri: str,
        experiment: str,
        campaign: CampaignEntry,
        ledger: SyncLedger,
        attempts: list[Attempt],
        sol_score: SolScore | None,
        verify: bool,
    ) -> None:
        self.run_dir, self.uri, self.campaign, self.ledger = run_dir, uri, campaign, ledger
        self.attempts, self.sol_score, self.verify = attempts, sol_score, verify
        self.view: LedgerView = ledger.view(uri)
        self.record = read_campaign_json(run_dir)
        self.conclusions = read_conclusions(run_dir)
        self.report = SyncReport(run_dir, uri, experiment, attempts=len(attempts))
        self._client: MlflowClient | None = None
        self._steps: dict[tuple[str, str], set[int]] = {}
        self._folders: dict[str, set[str]] = {}

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @property
    def status(self) -> str | None:
        status = self.record.get("status")
        return status if status in TERMINAL else None

    def run(self) -> SyncReport:
        if self._up_to_date():
            self.report.parent_run_id = self.view.parent_run_id or ""
            self.report.up_to_date = True
            return self.report
        with (
            _backend(self.uri, "get or create the experiment"),
            payload.sqlite_store_lock(self.uri),
        ):
            # The client opens (or creates) a sqlite store: under the lock.
            runs = SyncRuns(
                self.client,
                self.uri,
                self.run_dir,
                self.campaign,
                self.record,
                self.report.created,
                self._note,
            )
            experiment_id = runs.experiment(self.report.experiment)
        with _backend(self.uri, "find or create the campaign run"):
            parent = runs.parent(experiment_id, self.view.parent_run_id)
        if parent != self.view.parent_run_id:
            self.view = self.ledger.view(self.uri)  # what the ledger says under the new parent
        self.report.parent_run_id = parent
        with _backend(self.uri, "find or create the agent runs"):
            agents = runs.agents(experiment_id, parent, self.view.agent_runs, self.attempts)
        progress = CampaignProgress(self.sol_score)
        steps = [progress.add(a) for a in self.attempts]
        with _backend(self.uri, "upload the attempts"):
            for step in steps:
                self._sync_attempt(parent, agents[step.attempt.proposal.agent], step)
            if self.report.changed or self.verify:
                self._tags(parent, agents, progress)
        with _backend(self.uri, "write the tables"):
            self._tables(parent, agents, progress)
        with _backend(self.uri, "end the runs"):
            self._finish(parent, agents, progress)
        if self.status is None:
            self.report.notes.append(
                f"campaign.json says {self.record.get('status', 'nothing')!r} (still running, "
                "or it crashed): the runs are left as they are"
            )
        return self.report

    # --- decisions --------------------------------------------------------------------------

    def _up_to_date(self) -> bool:
        """True when the ledger shows everything arrived (no request is needed)."""
        view, n = self.view, len(self.attempts)
        if self.verify or view.parent_run_id is None:
            return False
        done = all((a.index, part) in view.done for a in self.attempts for part in PARTS)
        agents = all(a.proposal.agent in view.agent_runs for a in self.attempts)
        tables = view.tables == (n, len(self.conclusions))
        ended = self.status is None or (view.summary_attempts == n and view.closed == self.status)
        return done and agents and tables and ended

    def _note(self, entry: RunEntry | LoggedEntry | MarkEntry) -> None:
        try:
            self.ledger.append(entry)
        except OSError as exc:
            logger.warning("%s: cannot write the MLflow ledger (%s)", self.ledger, exc)

    # --- attempts ---------------------------------------------------------------------------

    def _sync_attempt(self, parent: str, run_id: str, step: AttemptPayload) -> None:
        attempt = step.attempt
        uploads: dict[Part, tuple[Callable[[], bool], Callable[[], object]]] = {
            "metrics": (
                lambda: self._has_step(run_id, keys.EVAL_STATUS_CODE, attempt.index),
                lambda: self.client.log_batch(run_id, metrics=step.agent_metrics),
            ),
            "artifacts": (
                lambda: self._has_folder(run_id, attempt),
                lambda: payload.upload_attempt_artifacts(self.client, run_id, attempt),
            ),
            "campaign": (
                lambda: self._has_step(parent, keys.CAMPAIGN_CANDIDATES, attempt.index),
                lambda: self.client.log_batch(parent, metrics=step.campaign_metrics),
            ),
        }
        for part, (present, upload) in uploads.items():
            if (attempt.index, part) in self.view.done and not self.verify:
                continue
            if present():
                self.report.found += 1
            else:
                upload()
                self.report.uploaded[part] += 1
            self._note(LoggedEntry(uri=self.uri, run_id=parent, index=attempt.index, part=part))

    def _has_step(self, run_id: str, key: str, step: int) -> bool:
        if (run_id, key) not in self._steps:
            history = self.client.get_metric_history(run_id, key)
            self._steps[(run_id, key)] = {m.step for m in history}
        return step in self._steps[(run_id, key)]

    def _has_folder(self, run_id: str, attempt: Attempt) -> bool:
        """The attempt's folder exists and holds attempt.json (uploaded last, so complete)."""
        if run_id not in self._folders:
            listed = self.client.list_artifacts(run_id, keys.ATTEMPTS_DIR)
            self._folders[run_id] = {f.path for f in listed if f.is_dir}
        folder = keys.attempt_artifact_dir(attempt.index, attempt.proposal.id)
        if folder not in self._folders[run_id]:
            return False
        files = {f.path for f in self.client.list_artifacts(run_id, folder)}
        return f"{folder}/{keys.ATTEMPT_JSON}" in files

    def _tags(self, parent: str, agents: dict[str, str], progress: CampaignProgress) -> None:
        self.client.log_batch(parent, tags=progress.campaign_tags())
        models: dict[str, str] = {}
        for attempt in self.attempts:
            model = proposal_model(attempt.proposal)
            if model is not None:
                models.setdefault(attempt.proposal.agent, model)
        for agent, model in models.items():
            self.client.set_tag(agents[agent], keys.MODEL, payload.cut(model, 8000))

    def _tables(self, parent: str, agents: dict[str, str], progress: CampaignProgress) -> None:
        counts = (len(self.attempts), len(self.conclusions))
        if not (self.verify or self.report.changed or self.view.tables != counts):
            return
        data = mlflow_tables.attempts_table(self.attempts, progress.sol_scores, agents)
        mlflow_tables.upload_table(self.client, parent, data, keys.ATTEMPTS_TABLE)
        if self.conclusions:
            table = mlflow_tables.conclusions_table(self.conclusions, self.attempts, agents)
            mlflow_tables.upload_table(self.client, parent, table, keys.CONCLUSIONS_TABLE)
        self.report.tables = True
        self._note(
            MarkEntry(
                kind="tables",
                uri=self.uri,
                run_id=parent,
                attempts=counts[0],
                conclusions=counts[1],
            )
        )

    def _finish(self, parent: str, agents: dict[str, str], progress: CampaignProgress) -> None:
        """For an ended campaign: the final metrics, the degraded tag cleared, runs ended."""
        status = self.status
        if status is None:
            return
        run = self.client.get_run(parent)
        self._summary(run, progress)
        if run.data.tags.get(keys.TRACKING_DEGRADED) == "true":
            # Everything in attempts.jsonl is in the store now.
            self.client.delete_tag(parent, keys.TRACKING_DEGRADED)
        end = iso_ms(self.record.get("finished_at"))
        ended = False
        for run_id in [*agents.values(), parent]:
            if self.client.get_run(run_id).info.status != status:
                self.client.set_terminated(run_id, status=status, end_time=end)
                ended = True
        if ended:
            self.report.closed = status
        self._note(MarkEntry(kind="closed", uri=self.uri, run_id=parent, status=status))

    def _summary(self, run: Run, progress: CampaignProgress) -> None:
        n = len(self.attempts)
        final = progress.final_metrics()
        stale = {k: v for k, v in final.items() if run.data.metrics.get(k) != v}
        if stale:
            now, step = payload.now_ms(), max((a.index for a in self.attempts), default=0)
            metrics = [Metric(k, v, now, step) for k, v in stale.items()]
            self.client.log_batch(run.info.run_id, metrics=metrics)
        self._note(MarkEntry(kind="summary", uri=self.uri, run_id=run.info.run_id, attempts=n))
