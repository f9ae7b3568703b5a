"""The live tracker's runs in MLflow: the experiment, the campaign run, one run per agent.

Place in the flow: `MlflowTracker.start_campaign` has its writer thread `open` the experiment (if
missing) and the campaign's parent run; `resume_campaign` has it `reopen` the runs the ledger
names instead; the first attempt of each agent creates that agent's child run (`agent_run`), so an
agent that never proposes leaves no empty run; `finish` ends them all (`close`). Every call goes
through the tracker's `TrackerCalls` (guarded, noted in the run dir's ledger), so a store that is
down leaves the runs to a later call or to `kernelarc sync`, never an error.
"""

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Param
from mlflow.exceptions import MlflowException

from kernelarc.rundir.sync_ledger import MarkEntry, RunEntry
from kernelarc.tracking import keys
from kernelarc.tracking import mlflow_payload as payload
from kernelarc.tracking.mlflow_payload import MAX_PARAMS_PER_BATCH, MAX_TAG_VALUE, cut
from kernelarc.tracking.mlflow_tracker_calls import TrackerCalls


@dataclass(frozen=True)
class CampaignStart:
    """What the campaign's run is created with: `start_campaign`'s arguments, cleaned."""

    name: str
    """Run name of the campaign run."""
    uid: str
    """The campaign's random id (tag `kernelarc.campaign_uid`)."""
    params: list[Param]
    """The flattened config."""
    tags: dict[str, str]
    """Campaign tags, also set on every agent run."""
    config_yaml: str
    """The resolved config, logged as `config.yaml`."""

    @classmethod
    def clean(
        cls,
        name: str,
        uid: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        config_yaml: str,
    ) -> "CampaignStart":
        """The start of campaign `name`, its params and tags cut to what MLflow accepts."""
        return cls(name, uid, payload.clean_params(params), payload.clean_tags(tags), config_yaml)


class TrackerRuns:
    """The run ids of one tracker's campaign and the calls that make them (writer thread).

    Threads: `start` is set once by the caller under the tracker's lock, before the writer needs
    it; the agent runs map is guarded by `_lock` because `agent_runs` copies it from any thread;
    the rest belongs to the writer thread.
    """

    def __init__(self, calls: TrackerCalls, experiment: str, artifact_location: str | None) -> None:
        """Runs of experiment `experiment` (created at `artifact_location` if missing; None:
        the server's choice), made through `calls`."""
        self._calls = calls
        self._experiment_name = experiment
        self._artifact_location = artifact_location
        self._lock = threading.Lock()
        self.start: CampaignStart | None = None
        """Set by `start_campaign` or `resume_campaign`; None before."""
        self.experiment_id: str | None = None
        """Experiment id, once the campaign run was created or found."""
        self.parent_run_id: str | None = None
        """The campaign's run id, once it was created or found."""
        self._agent_runs: dict[str, str] = {}
        self.recovered: dict[str, str] = {}
        """Agent runs `reopen` found in the store under the parent but not in the ledger."""

    @property
    def agent_runs(self) -> dict[str, str]:
        """Agent name to child run id (a copy)."""
        with self._lock:
            return dict(self._agent_runs)

    def adopt(self, experiment_id: str | None, parent: str, agent_runs: Mapping[str, str]) -> None:
        """Take over the runs a resumed campaign reopened (and those `reopen` recovered)."""
        self.experiment_id, self.parent_run_id = experiment_id, parent
        with self._lock:
            self._agent_runs = {**self.recovered, **agent_runs}

    def open(self) -> bool:
        """Create the experiment and the parent run (params, config.yaml); True on success."""
        start, calls = self.start, self._calls
        if start is None:
            return False
        experiment_id = calls.call("get or create the experiment", self._ensure_experiment)
        if experiment_id is None:
            return False
        tags = {**start.tags, keys.KIND: keys.KIND_CAMPAIGN, keys.CAMPAIGN_UID: start.uid}
        run = calls.call(
            "create the campaign run",
            lambda: calls.client.create_run(experiment_id, tags=tags, run_name=start.name),
        )
        if run is None:
            return False
        parent: str = run.info.run_id
        self.experiment_id, self.parent_run_id = experiment_id, parent
        calls.note(
            RunEntry(kind="parent", uri=calls.uri, experiment_id=experiment_id, run_id=parent)
        )
        client = calls.client
        for first in range(0, len(start.params), MAX_PARAMS_PER_BATCH):
            chunk = start.params[first : first + MAX_PARAMS_PER_BATCH]
            calls.required("log the config params", partial(client.log_batch, parent, params=chunk))
        config = partial(payload.log_text, client, parent, keys.CONFIG_YAML, start.config_yaml)
        calls.required("log config.yaml", config)
        return True

    def _ensure_experiment(self) -> str:
        with payload.sqlite_store_lock(self._calls.uri):
            return payload.ensure_experiment(
                self._calls.client, self._experiment_name, self._artifact_location
            )

    def reopen(self, parent: str, agent_runs: Mapping[str, str]) -> bool:
        """Mark the parent and agent runs RUNNING again; False if the parent run is gone.

        A store that does not answer keeps the ledger's runs (sync checks them at the end):
        making a second parent run for one campaign is worse than a late status.
        """
        calls = self._calls
        try:
            run = calls.client.get_run(parent)
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            calls.record_failure("look up the campaign run", exc)
            return True
        except Exception as exc:  # the Tracker contract; see CallBreaker.run
            calls.record_failure("look up the campaign run", exc)
            return True
        if run.info.lifecycle_stage != "active":
            return False
        self.recovered = self._unlisted_agent_runs(run.info.experiment_id, parent, agent_runs)
        for run_id in [parent, *agent_runs.values(), *self.recovered.values()]:
            reopen = partial(calls.client.update_run, run_id, status="RUNNING")
            calls.required(f"reopen run {run_id}", reopen)
        return True

    def _unlisted_agent_runs(
        self, experiment_id: str, parent: str, listed: Mapping[str, str]
    ) -> dict[str, str]:
        """Agent runs of the campaign run `parent` that the store has and the ledger lacks: a
        campaign killed between creating an agent's run and noting it. Reused on resume (and
        noted now), not made a second time. Empty when the store cannot say."""
        calls = self._calls
        query = (
            f"tags.`{keys.PARENT_RUN_ID}` = '{parent}' and tags.`{keys.KIND}` = '{keys.KIND_AGENT}'"
        )
        runs = calls.call(
            "look up the campaign's agent runs",
            lambda: calls.client.search_runs([experiment_id], filter_string=query),
        )
        found: dict[str, str] = {}
        for found_run in runs or []:
            agent = found_run.data.tags.get(keys.AGENT)
            if agent and agent not in listed and agent not in found:
                found[agent] = found_run.info.run_id
                calls.note(
                    RunEntry(
                        kind="agent",
                        uri=calls.uri,
                        experiment_id=experiment_id,
                        run_id=found_run.info.run_id,
                        agent=agent,
                        parent_run_id=parent,
                    )
                )
        return found

    def agent_run(self, agent: str, strategy: str) -> str | None:
        """The run of `agent`, created (tagged with its strategy) on its first attempt; None if
        it cannot be created now."""
        with self._lock:
            known = self._agent_runs.get(agent)
        if known is not None:
            return known
        parent, experiment_id, start = self.parent_run_id, self.experiment_id, self.start
        if parent is None or experiment_id is None or start is None:
            return None
        tags = {
            **start.tags,
            keys.PARENT_RUN_ID: parent,
            keys.KIND: keys.KIND_AGENT,
            keys.AGENT: cut(agent, MAX_TAG_VALUE),
            keys.STRATEGY: cut(strategy, MAX_TAG_VALUE),
        }
        calls = self._calls
        run = calls.call(
            f"create the run of agent {agent!r}",
            lambda: calls.client.create_run(experiment_id, tags=tags, run_name=agent),
        )
        if run is None:
            return None
        run_id: str = run.info.run_id
        with self._lock:
            self._agent_runs[agent] = run_id
        calls.note(
            RunEntry(
                kind="agent",
                uri=calls.uri,
                experiment_id=experiment_id,
                run_id=run_id,
                agent=agent,
                parent_run_id=parent,
            )
        )
        return run_id

    def close(self, parent: str, status: str) -> None:
        """End the agent runs and the campaign run with `status`, tagging the campaign run as
        degraded first if the store lacks part of it."""
        # Closing calls are tried even while MLflow is not contacted, so the UI does not show the
        # runs as running forever; the first one that fails ends the attempt (dead server).
        calls = self._calls
        closing: list[tuple[str, Callable[[], object]]] = []
        if calls.incomplete:
            # Something is missing from the store (sync removes the tag once it is complete).
            tag = partial(calls.client.set_tag, parent, keys.TRACKING_DEGRADED, "true")
            closing.append(("tag the run as degraded", tag))
        for run_id in [*self.agent_runs.values(), parent]:
            end = partial(calls.client.set_terminated, run_id, status=status)
            closing.append((f"end run {run_id}", end))
        for what, action in closing:
            if not calls.ok(what, action, force=True):
                return
        calls.note(MarkEntry(kind="closed", uri=calls.uri, run_id=parent, status=status))
