"""NullTracker: the Tracker used when tracking is off (`tracking=none`, the smoke config, tests).

attempts.jsonl is still written by the campaign loop; this only skips MLflow.
"""

from collections.abc import Mapping, Sequence

from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Conclusion


class NullTracker:
    """A Tracker that records nothing and never fails."""

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Do nothing."""

    def resume_campaign(
        self,
        name: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        config_yaml: str,
        attempts: Sequence[Attempt],
    ) -> None:
        """Do nothing."""

    def start_agent(self, agent: str, strategy: str) -> None:
        """Do nothing."""

    def log_attempt(self, attempt: Attempt) -> None:
        """Do nothing."""

    def log_conclusion(self, conclusion: Conclusion) -> None:
        """Do nothing."""

    def finish(self, status: str, summary: Mapping[str, float]) -> None:
        """Do nothing."""

    @property
    def degraded(self) -> bool:
        """Never degraded."""
        return False

    def ui_hint(self) -> str | None:
        """No UI: tracking is off."""
        return None

    @property
    def tracking_uri(self) -> str | None:
        """No store: tracking is off."""
        return None

    @property
    def experiment_name(self) -> str | None:
        """No experiment: tracking is off."""
        return None

    @property
    def experiment_id(self) -> str | None:
        """No experiment: tracking is off."""
        return None

    @property
    def parent_run_id(self) -> str | None:
        """No run: tracking is off."""
        return None
