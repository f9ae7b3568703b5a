"""The campaign's tables in MLflow: one row per attempt, one row per conclusion.

Place in the flow: the tracker writes them at finish and `kernelarc sync` rewrites them when
attempts were added. They are plain artifacts in MLflow's table format (`{"columns", "data"}`,
which `MlflowClient.load_table` reads): `log_table` would append to an existing table, and a
re-sync must not duplicate rows.
"""

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.tracking import MlflowClient

from kernelarc.schema import Attempt
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_payload import log_text
from kernelarc.tracking.proposal_fields import (
    conclusions_seen,
    is_draft,
    llm_usage,
    proposal_model,
)


def attempts_table(
    attempts: Sequence[Attempt],
    sol_scores: Mapping[int, float | None],
    agent_runs: Mapping[str, str],
) -> dict[str, list[Any]]:
    """One row per attempt, by index (columns: keys.ATTEMPTS_TABLE_COLUMNS)."""
    rows = []
    for a in sorted(attempts, key=lambda a: a.index):
        usage = llm_usage(a.proposal)
        run = agent_runs.get(a.proposal.agent)
        link = keys.attempt_artifact_uri(run, a.index, a.proposal.id) if run else None
        rows.append(
            {
                "index": a.index,
                "problem": a.problem,
                "agent": a.proposal.agent,
                "strategy": a.proposal.strategy,
                "model": proposal_model(a.proposal),
                "proposal_id": a.proposal.id,
                "parent_id": a.proposal.parent_id,
                "status": str(a.status),
                "verdict": str(a.verdict),
                "confirmed": a.confirmed,
                "speedup": a.speedup,
                "speedup_ci_low": a.speedup_ci_low,
                "speedup_ci_high": a.speedup_ci_high,
                "speedup_ci_method": a.speedup_ci_method,
                "latency_ms": a.latency_ms,
                "sol_score": sol_scores.get(a.index),
                "best_speedup_after": a.best_speedup_after,
                "wall_s": a.wall_s,
                "llm_calls": usage.calls,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cost_usd": usage.cost_usd,
                "draft": is_draft(a.proposal),
                "conclusions_seen": " ".join(conclusions_seen(a.proposal)),
                "rationale": a.proposal.rationale,
                "artifacts": link,
            }
        )
    return {col: [row[col] for row in rows] for col in keys.ATTEMPTS_TABLE_COLUMNS}


def conclusions_table(
    records: Sequence[Mapping[str, Any]],
    attempts: Sequence[Attempt],
    agent_runs: Mapping[str, str],
) -> dict[str, list[Any]]:
    """One row per conclusion (columns: keys.CONCLUSIONS_TABLE_COLUMNS).

    `evidence` describes each measurement in words; `evidence_links` gives the artifact URI of
    each evidence attempt, so a person goes from a claim to the code and traces behind it.
    """
    by_index = {a.index: a for a in attempts}
    rows = []
    for rec in records:
        evidence = [e for e in rec.get("evidence") or [] if isinstance(e, Mapping)]
        links = []
        for item in evidence:
            attempt = by_index.get(item.get("attempt_index", -1))
            run = agent_runs.get(attempt.proposal.agent) if attempt else None
            if attempt is not None and run is not None:
                links.append(keys.attempt_artifact_uri(run, attempt.index, attempt.proposal.id))
        raw_scope = rec.get("scope")
        scope: Mapping[str, Any] = raw_scope if isinstance(raw_scope, Mapping) else {}
        rows.append(
            {
                "id": rec.get("id"),
                "agent": rec.get("agent"),
                "strategy": rec.get("strategy"),
                "claim": rec.get("claim"),
                "problem": scope.get("problem"),
                "confidence": rec.get("confidence"),
                "published_at": rec.get("published_at"),
                "retracted": bool(rec.get("retracted", False)),
                "retraction_reason": rec.get("retraction_reason", ""),
                "evidence": "; ".join(_describe_evidence(e) for e in evidence),
                "evidence_links": " ".join(links),
            }
        )
    return {col: [row[col] for row in rows] for col in keys.CONCLUSIONS_TABLE_COLUMNS}


def upload_table(
    client: MlflowClient, run_id: str, data: Mapping[str, list[Any]], artifact_file: str
) -> None:
    """Write a table artifact in MLflow's format, replacing any earlier version.

    The run's `mlflow.loggedArtifacts` tag lists it as a table, as `log_table` does.
    """
    columns = list(data)
    rows = [[_cell(v) for v in row] for row in zip(*(data[c] for c in columns), strict=True)]
    text = json.dumps({"columns": columns, "data": rows}, default=str, allow_nan=False)
    log_text(client, run_id, artifact_file, text)
    run = client.get_run(run_id)
    listed = json.loads(run.data.tags.get(keys.LOGGED_ARTIFACTS_TAG, "[]"))
    entry = {"path": artifact_file, "type": "table"}
    if entry not in listed:
        listed.append(entry)
        client.set_tag(run_id, keys.LOGGED_ARTIFACTS_TAG, json.dumps(listed))


def _cell(value: Any) -> Any:
    """A JSON-safe table cell: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _describe_evidence(item: Mapping[str, Any]) -> str:
    text = f"attempt {item.get('attempt_index')} ({item.get('proposal_id')})"
    metric, value = item.get("metric", "speedup"), item.get("value")
    if value is not None:
        text += f": {metric} {value:.4g}" if isinstance(value, float) else f": {metric} {value}"
    baseline = item.get("baseline")
    if baseline is not None:
        text += f" vs {baseline:.4g}" if isinstance(baseline, float) else f" vs {baseline}"
    return text
