"""Fixtures for report tests: run dirs of hand-built attempts, laid out like a Hydra sweep."""

from collections.abc import Sequence
from pathlib import Path

import yaml

from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.schema import Attempt


def write_run_dir(
    run_dir: Path,
    attempts: Sequence[Attempt],
    overrides: Sequence[str] = (),
    config: dict[str, object] | None = None,
) -> Path:
    """A run dir as a campaign leaves it: attempts.jsonl, config.yaml, .hydra/overrides.yaml."""
    run_dir.mkdir(parents=True)
    log = AttemptLog(run_dir / "attempts.jsonl")
    for attempt in attempts:
        log.append(attempt)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config or {}))
    if overrides:
        (run_dir / ".hydra").mkdir()
        (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    return run_dir
