"""The campaign loop's side of tracking, for tests that feed a real MlflowTracker by hand: a run
dir with config.yaml and campaign.json, attempts.jsonl appended first and the tracker told after
(the loop's order), and the end of the campaign."""

from collections.abc import Mapping
from pathlib import Path

from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.rundir.run_record import CampaignRecord, write_campaign_record
from kernelarc.schema import Attempt
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_tracker import MlflowTracker


class LoopSide:
    """One hand-fed campaign on `axpby_h1024`: opened at construction."""

    def __init__(
        self,
        run_dir: Path,
        tracker: MlflowTracker,
        name: str,
        config_yaml: str,
        params: Mapping[str, str],
    ) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(config_yaml)
        self.run_dir, self.tracker = run_dir, tracker
        self.log = AttemptLog(run_dir / "attempts.jsonl")
        self.record = CampaignRecord(
            name=name,
            problem="axpby_h1024",
            problem_dir=str(run_dir / "problem"),
            source_problem_dir="/nowhere",
            workloads="workload.jsonl",
            device="cpu",
            seed=0,
            started_at="2026-12-02T10:00:00+00:00",
        )
        write_campaign_record(run_dir, self.record)
        tracker.start_campaign(
            name,
            params=dict(params),
            tags={keys.PROBLEM: "axpby_h1024", keys.RUN_DIR: str(run_dir)},
            config_yaml=config_yaml,
        )

    def record_attempt(self, attempt: Attempt) -> None:
        self.log.append(attempt)
        self.tracker.log_attempt(attempt)

    def end(self) -> None:
        self.tracker.finish("FINISHED", {})
        done = {"status": "FINISHED", "finished_at": "2026-12-02T10:05:00+00:00"}
        write_campaign_record(self.run_dir, self.record.model_copy(update=done))
