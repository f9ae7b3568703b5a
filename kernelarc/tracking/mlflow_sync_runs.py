"""`kernelarc sync`'s runs: find the campaign's parent and agent runs in the store, or make them.

Place in the flow: `mlflow_sync.sync_run_dir` first gets the experiment, the parent run and one
run per agent from a `SyncRuns`, then uploads the attempts, tables and run ends under them. The
parent run is found through the ledger, else the `kernelarc.campaign_uid` tag, else the
`kernelarc.run_dir` tag; only then is a new one made, so a re-sync never makes a second one.
Params and config.yaml a start cut short left out are added to it. Agent runs are found by the
ledger, else by their parent tag, else made. Store failures are raised (`sync_run_dir` reports
them); every run found or made is noted in the run dir's ledger.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelarc.rundir.sync_ledger import CampaignEntry, RunEntry
from kernelarc.schema import Attempt
from kernelarc.tracking import keys
from kernelarc.tracking import mlflow_payload as payload


class SyncRuns:
    """The runs of one campaign in one store, for one sync."""

    def __init__(
        self,
        client: MlflowClient,
        uri: str,
        run_dir: Path,
        campaign: CampaignEntry,
        record: Mapping[str, Any],
        created: list[str],
        note: Callable[[RunEntry], None],
    ) -> None:
        """Find or make the runs of `campaign` (from `run_dir`; `record` is its campaign.json)
        through `client`, connected to the store at `uri`; append what is made to `created`
        (`campaign`, `agent <name>`) and `note` every run found or made in the ledger."""
        self.client, self.run_dir, self.campaign = client, run_dir, campaign
        self.uri = uri
        self._started = iso_ms(record.get("started_at"))
        self._created, self._note = created, note

    def experiment(self, name: str) -> str:
        """Id of experiment `name`, created (at the store's default location) if missing."""
        location = payload.default_artifact_location(self.uri)
        return payload.ensure_experiment(self.client, name, location)

    def parent(self, experiment_id: str, known: str | None) -> str:
        """The campaign's parent run: `known` (the ledger's) while it lives in the experiment,
        else the one the tags name, else a new one (completed with what a start left out)."""
        if known is not None and self._live(known, experiment_id):
            return known
        found = self._search_parent(experiment_id)
        if found is None:
            found = self._create_parent(experiment_id)
        if found != known:
            self._note(
                RunEntry(kind="parent", uri=self.uri, experiment_id=experiment_id, run_id=found)
            )
        return self._complete_parent(found)

    def _live(self, run_id: str, experiment_id: str) -> bool:
        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise
        return run.info.lifecycle_stage == "active" and run.info.experiment_id == experiment_id

    def _search_parent(self, experiment_id: str) -> str | None:
        kind = f"tags.`{keys.KIND}` = '{keys.KIND_CAMPAIGN}'"
        if self.campaign.uid:
            where = f"{kind} and tags.`{keys.CAMPAIGN_UID}` = '{self.campaign.uid}'"
        else:
            run_dir = str(self.run_dir.resolve())
            if "'" in run_dir:
                return None
            where = f"{kind} and tags.`{keys.RUN_DIR}` = '{run_dir}'"
        found = self.client.search_runs([experiment_id], filter_string=where, max_results=10)
        runs = sorted(found, key=lambda r: (r.info.start_time or 0, r.info.run_id))
        return str(runs[0].info.run_id) if runs else None

    def _create_parent(self, experiment_id: str) -> str:
        tags = {**self.campaign.tags, keys.KIND: keys.KIND_CAMPAIGN}
        if self.campaign.uid:
            tags[keys.CAMPAIGN_UID] = self.campaign.uid
        run = self.client.create_run(
            experiment_id, start_time=self._started, tags=tags, run_name=self.campaign.name
        )
        self._created.append("campaign")
        return str(run.info.run_id)

    def _complete_parent(self, parent: str) -> str:
        """Log the params and config.yaml the parent run lacks (a start cut short); `parent`."""
        run = self.client.get_run(parent)
        missing = [
            p for p in payload.clean_params(self.campaign.params) if p.key not in run.data.params
        ]
        for first in range(0, len(missing), payload.MAX_PARAMS_PER_BATCH):
            chunk = missing[first : first + payload.MAX_PARAMS_PER_BATCH]
            self.client.log_batch(parent, params=chunk)
        config = self.run_dir / keys.CONFIG_YAML
        listed = {f.path for f in self.client.list_artifacts(parent)}
        if keys.CONFIG_YAML not in listed and config.is_file():
            text = config.read_text(encoding="utf-8")
            payload.log_text(self.client, parent, keys.CONFIG_YAML, text)
        return parent

    def agents(
        self,
        experiment_id: str,
        parent: str,
        known: Mapping[str, str],
        attempts: Sequence[Attempt],
    ) -> dict[str, str]:
        """Agent name to run id for every agent of `attempts`: the `known` ones (the ledger's),
        else the child run of `parent` tagged with its name, else a new one."""
        runs = dict(known)
        strategies: dict[str, str] = {}
        for attempt in attempts:
            strategies.setdefault(attempt.proposal.agent, attempt.proposal.strategy)
        missing = [agent for agent in strategies if agent not in runs]
        if not missing:
            return runs
        where = f"tags.`{keys.PARENT_RUN_ID}` = '{parent}'"
        children = {
            r.data.tags.get(keys.AGENT, r.info.run_name): r.info.run_id
            for r in self.client.search_runs([experiment_id], filter_string=where)
        }
        for agent in missing:
            run_id = children.get(agent) or self._create_agent(
                experiment_id, parent, agent, strategies[agent]
            )
            runs[agent] = run_id
            self._note(
                RunEntry(
                    kind="agent",
                    uri=self.uri,
                    experiment_id=experiment_id,
                    run_id=run_id,
                    agent=agent,
                    parent_run_id=parent,
                )
            )
        return runs

    def _create_agent(self, experiment_id: str, parent: str, agent: str, strategy: str) -> str:
        tags = {
            **self.campaign.tags,
            keys.PARENT_RUN_ID: parent,
            keys.KIND: keys.KIND_AGENT,
            keys.AGENT: payload.cut(agent, payload.MAX_TAG_VALUE),
            keys.STRATEGY: payload.cut(strategy, payload.MAX_TAG_VALUE),
        }
        start = self._started
        run = self.client.create_run(experiment_id, start_time=start, tags=tags, run_name=agent)
        self._created.append(f"agent {agent}")
        return str(run.info.run_id)


def iso_ms(iso: object) -> int | None:
    """Milliseconds since the epoch of an ISO time (None when missing or malformed)."""
    if not isinstance(iso, str):
        return None
    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1000)
    except ValueError:
        return None
