"""Tracking: the Tracker role the campaign loop reports to, and its factory.

The loop appends every Attempt to attempts.jsonl (`tracking.attempts_log`, the source of truth)
and then calls a Tracker: `MlflowTracker` (parent run = campaign, child run per agent) or
`NullTracker` (tracking off). Tracker methods never raise for backend failures; they degrade,
and `kernelarc sync` (`tracking.mlflow_sync`) later uploads what is missing from the run dir.
"""

from collections.abc import Mapping
from typing import Any, Protocol

from kernelarc.errors import ConfigError
from kernelarc.schema import Attempt


class Tracker(Protocol):
    """Where a campaign's runs, metrics and artifacts go, beside attempts.jsonl.

    Call order: `start_campaign` once, `start_agent` per agent (optional: the first attempt of
    an unknown agent starts its run), `log_attempt` per attempt from any thread, `finish` once.
    Implementations are thread-safe and never raise because the backend failed; they log a
    warning and set `degraded`.
    """

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Open the campaign: `params` is the flattened config, `config_yaml` the resolved one."""
        ...

    def start_agent(self, agent: str, strategy: str) -> None:
        """Open the agent's record (idempotent per agent name)."""
        ...

    def log_attempt(self, attempt: Attempt) -> None:
        """Record one judged attempt under its proposal's agent."""
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
)


def make_tracker(kind: str, **options: Any) -> Tracker:
    """Build the tracker of a `kind`.

    Args:
        kind: `mlflow` or `none`.
        **options: for `mlflow`, the MlflowTracker arguments (`tracking_uri`, `experiment`,
            optionally `artifact_location`, `max_consecutive_failures`, `retry_after_s`,
            `run_dir`, `sol_score`); none for `none`.

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
