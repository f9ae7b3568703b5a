"""NullTracker: the Tracker used when tracking is off (`tracking=none`, the smoke config, tests).

attempts.jsonl is still written by the campaign loop; this only skips MLflow.
"""

from collections.abc import Mapping

from kernelarc.schema import Attempt


class NullTracker:
    """A Tracker that records nothing and never fails."""

    def start_campaign(
        self, name: str, params: Mapping[str, str], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        """Do nothing."""

    def start_agent(self, agent: str, strategy: str) -> None:
        """Do nothing."""

    def log_attempt(self, attempt: Attempt) -> None:
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
