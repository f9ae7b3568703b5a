"""Tracking: the Tracker role the campaign loop reports to, and its factory.

The loop appends every Attempt to attempts.jsonl (`rundir.attempts_log`, the source of truth)
and then calls a Tracker: `MlflowTracker` (parent run = campaign, child run per agent) or
`NullTracker` (tracking off). Tracker methods never raise for backend failures; they degrade,
and `kernelarc sync` (`tracking.mlflow_sync`) later uploads what is missing from the run dir.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kernelarc.errors import ConfigError
from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Conclusion


class Tracker(Protocol):
    """Where a campaign's runs, metrics and artifacts go, beside attempts.jsonl.

    Call order: `start_campaign` (or `resume_campaign`) once, `start_agent` per agent
    (optional: the first attempt of an unknown agent starts its run), `log_attempt` and
    `log_conclusion` from any thread, `finish` once. Implementations are thread-safe and never
    raise because the backend failed; they log a warning and set `degraded`.

    Locks: the campaign loop calls `start_agent`, `log_attempt` and `log_conclusion` while it
    holds its state lock, which every agent thread takes, so these must return without waiting
    on a backend (queue the work). `start_campaign`, `resume_campaign` and `finish` may wait on
    the backend; the loop never calls them under a lock. Every member the loop, the CLI and the
    console use is declared here: callers never probe a tracker with getattr.
    """

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Open the campaign: `params` is the flattened config, `config_yaml` the resolved one."""
        ...

    def resume_campaign(
        self,
        name: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        config_yaml: str,
        attempts: Sequence[Attempt],
    ) -> None:
        """Go on with a campaign that `attempts` (its attempts.jsonl) already recorded, instead
        of `start_campaign`: counts and best-so-far continue from them."""
        ...

    def start_agent(self, agent: str, strategy: str) -> None:
        """Open the agent's record (idempotent per agent name); never waits on the backend."""
        ...

    def log_attempt(self, attempt: Attempt) -> None:
        """Record one judged attempt under its proposal's agent; never waits on the backend."""
        ...

    def log_conclusion(self, conclusion: Conclusion) -> None:
        """Hear of a conclusion published or retracted; never waits on the backend."""
        ...

    def finish(self, status: str, summary: Mapping[str, float]) -> None:
        """Close everything with `FINISHED`, `FAILED` or `KILLED`; `summary` are final metrics."""
        ...

    @property
    def degraded(self) -> bool:
        """True once a backend call failed (the tracked record is incomplete)."""
        ...

    def ui_hint(self) -> str | None:
        """One line telling a person where to look (tracking URI, experiment, run); None if off."""
        ...

    @property
    def tracking_uri(self) -> str | None:
        """Where the record goes (an MLflow tracking URI); None if off."""
        ...

    @property
    def experiment_name(self) -> str | None:
        """The experiment the campaign is recorded under; None if off."""
        ...

    @property
    def experiment_id(self) -> str | None:
        """That experiment's id, once known."""
        ...

    @property
    def parent_run_id(self) -> str | None:
        """The campaign's run id, once it was created."""
        ...


TRACKER_KINDS = ("mlflow", "none")
"""Valid `kind` values of make_tracker (the `tracking` config group's option names)."""
_MLFLOW_OPTIONS = (
    "tracking_uri",
    "experiment",
    "artifact_location",
    "max_consecutive_failures",
    "retry_after_s",
    "run_dir",
    "sol_score",
    "finish_timeout_s",
)


def make_tracker(kind: str, **options: Any) -> Tracker:
    """Build the tracker of a `kind`.

    Args:
        kind: `mlflow` or `none`.
        **options: for `mlflow`, the MlflowTracker arguments (`tracking_uri`, `experiment`,
            optionally `artifact_location`, `max_consecutive_failures`, `retry_after_s`,
            `run_dir`, `sol_score`, `finish_timeout_s`); none for `none`.

    Raises:
        ConfigError: unknown kind, or options that the kind does not take.
    """
    if kind == "none":
        if options:
            msg = f"tracking kind 'none' takes no options (got {sorted(options)})"
            raise ConfigError(msg)
        from kernelarc.tracking.null_tracker import NullTracker

        return NullTracker()
    if kind == "mlflow":
        unknown = set(options) - set(_MLFLOW_OPTIONS)
        missing = {"tracking_uri", "experiment"} - set(options)
        if unknown or missing:
            msg = (
                f"tracking kind 'mlflow': unknown options {sorted(unknown)}, missing "
                f"{sorted(missing)}; it takes {', '.join(_MLFLOW_OPTIONS)}"
            )
            raise ConfigError(msg)
        # Imported here so `import kernelarc.tracking` does not import mlflow (1+ s).
        from kernelarc.tracking.mlflow_tracker import MlflowTracker

        return MlflowTracker(**options)
    msg = f"unknown tracking kind {kind!r}; valid kinds: {', '.join(TRACKER_KINDS)}"
    raise ConfigError(msg)


__all__ = ["TRACKER_KINDS", "Tracker", "make_tracker"]
