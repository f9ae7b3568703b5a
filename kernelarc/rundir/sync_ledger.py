"""The run dir's MLflow ledger: which runs exist and which parts of which attempts reached MLflow.

Place in the flow: `MlflowTracker` appends an entry after every MLflow call that succeeded
(`mlflow_ledger.jsonl` in the run dir); `kernelarc sync` reads it to upload only what is missing.
The ledger is a hint that saves requests, never the truth about MLflow: a part that is not in it
is checked against the server before it is uploaded (a request can time out on the client after
the server applied it), so nothing is ever logged twice. attempts.jsonl stays the source of truth.
"""

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError

from kernelarc.schema.base import RecordModel
from kernelarc.schema.records import utc_now

logger = logging.getLogger(__name__)

"""File name of the ledger inside a run dir."""

Part = Literal["metrics", "artifacts", "campaign"]
"""What of an attempt was logged: agent-run metrics, its artifact folder, parent-run metrics."""
PARTS: tuple[Part, ...] = ("metrics", "artifacts", "campaign")
"""Every part of an attempt, in upload order."""


class CampaignEntry(RecordModel):
    """What the campaign's parent run is made of (written once, before MLflow is contacted)."""

    kind: Literal["campaign"] = "campaign"
    """Entry kind."""
    uid: str
    """Random campaign id, tagged on the parent run (`kernelarc.campaign_uid`)."""
    name: str
    """Run name of the parent run (the campaign name)."""
    experiment: str
    """MLflow experiment name."""
    uri: str = ""
    """The tracking URI the campaign was configured with (where `kernelarc sync` goes first)."""
    params: dict[str, str] = Field(default_factory=dict)
    """The flattened config, as logged."""
    tags: dict[str, str] = Field(default_factory=dict)
    """The parent run's campaign tags, as logged."""
    at: str = Field(default_factory=utc_now)
    """When it was written."""


class RunEntry(RecordModel):
    """A run that exists in the MLflow store at `uri`."""

    kind: Literal["parent", "agent"]
    """`parent`: the campaign run; `agent`: an agent's child run."""
    uri: str
    """Tracking URI of the store."""
    experiment_id: str
    """Experiment id in that store."""
    run_id: str
    """The run."""
    agent: str = ""
    """Agent name (child runs)."""
    parent_run_id: str = ""
    """The campaign run (child runs)."""
    at: str = Field(default_factory=utc_now)
    """When it was written."""


class LoggedEntry(RecordModel):
    """One part of one attempt that reached the store at `uri`."""

    kind: Literal["logged"] = "logged"
    """Entry kind."""
    uri: str
    """Tracking URI of the store."""
    run_id: str
    """The parent run the attempt belongs to (parts of an abandoned parent do not count)."""
    index: int = Field(ge=0)
    """Attempt index."""
    part: Part
    """What was logged."""


class MarkEntry(RecordModel):
    """An end-of-campaign step done on the store at `uri`."""

    kind: Literal["tables", "summary", "closed"]
    """`tables`: attempts and conclusions tables written; `summary`: final metrics logged;
    `closed`: every run terminated with `status`."""
    uri: str
    """Tracking URI of the store."""
    run_id: str
    """The parent run."""
    attempts: int = 0
    """Attempts the tables or the summary covered."""
    conclusions: int = 0
    """Conclusions the tables covered."""
    status: str = ""
    """Terminal status (`closed`)."""
    at: str = Field(default_factory=utc_now)
    """When it was written."""


LedgerEntry = Annotated[
    CampaignEntry | RunEntry | LoggedEntry | MarkEntry, Field(discriminator="kind")
]
"""One line of the ledger."""
_ENTRY: TypeAdapter[CampaignEntry | RunEntry | LoggedEntry | MarkEntry] = TypeAdapter(LedgerEntry)


@dataclass
class LedgerView:
    """What the ledger says about one store (one tracking URI)."""

    campaign: CampaignEntry | None = None
    """The campaign entry (store independent)."""
    experiment_id: str | None = None
    """Experiment id of the parent run."""
    parent_run_id: str | None = None
    """The latest parent run recorded for this store."""
    agent_runs: dict[str, str] = field(default_factory=dict)
    """Agent name to child run id, under that parent."""
    done: set[tuple[int, Part]] = field(default_factory=set)
    """(attempt index, part) logged under that parent."""
    tables: tuple[int, int] | None = None
    """(attempts, conclusions) covered by the last tables written."""
    summary_attempts: int | None = None
    """Attempts covered by the last summary logged."""
    closed: str | None = None
    """Status the runs were last terminated with."""


class SyncLedger:
    """Append-only JSONL ledger of a run dir; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        """Use the ledger at `path` (created on the first append)."""
        self._path = path
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._path

    def append(self, entry: CampaignEntry | RunEntry | LoggedEntry | MarkEntry) -> None:
        """Append one entry (flushed, not fsync'd: a lost entry only costs a server check).

        Raises:
            OSError: the file cannot be written.
        """
        line = entry.model_dump_json() + "\n"
        with self._lock, self._path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def entries(self) -> list[CampaignEntry | RunEntry | LoggedEntry | MarkEntry]:
        """Every valid entry in file order; unreadable lines are skipped with a warning."""
        try:
            lines = self._path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        except OSError as exc:
            logger.warning("%s: unreadable (%s); sync checks everything on the server", self, exc)
            return []
        out: list[CampaignEntry | RunEntry | LoggedEntry | MarkEntry] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                out.append(_ENTRY.validate_json(line))
            except ValidationError:
                logger.warning("%s:%d: not a ledger entry; skipped", self._path, number)
        return out

    def campaign(self) -> CampaignEntry | None:
        """The latest campaign entry, if any."""
        found = [e for e in self.entries() if isinstance(e, CampaignEntry)]
        return found[-1] if found else None

    def view(self, uri: str) -> LedgerView:
        """What the ledger records about the store at `uri`."""
        uri = normalize_uri(uri)
        view = LedgerView()
        for entry in self.entries():
            if isinstance(entry, CampaignEntry):
                view.campaign = entry
                continue
            if normalize_uri(entry.uri) != uri:
                continue
            if isinstance(entry, RunEntry):
                _apply_run(view, entry)
            elif entry.run_id != view.parent_run_id:
                continue
            elif isinstance(entry, LoggedEntry):
                view.done.add((entry.index, entry.part))
            elif entry.kind == "tables":
                view.tables = (entry.attempts, entry.conclusions)
            elif entry.kind == "summary":
                view.summary_attempts = entry.attempts
            else:
                view.closed = entry.status
        return view

    def __str__(self) -> str:
        return str(self._path)


def _apply_run(view: LedgerView, entry: RunEntry) -> None:
    if entry.kind == "parent":
        if entry.run_id != view.parent_run_id:
            # A new parent (the old one was deleted or belongs elsewhere): start over.
            view.agent_runs, view.done = {}, set()
            view.tables = view.summary_attempts = view.closed = None
        view.parent_run_id, view.experiment_id = entry.run_id, entry.experiment_id
    elif entry.parent_run_id == view.parent_run_id:
        view.agent_runs[entry.agent] = entry.run_id


def normalize_uri(uri: str) -> str:
    """A tracking URI in the form the ledger compares (no trailing slash)."""
    return uri.rstrip("/")
