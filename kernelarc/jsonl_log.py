"""Append-only, crash-safe JSON-lines files (attempts.jsonl, conclusions.jsonl).

Every record is one whole line, flushed and fsync'd before the caller goes on, so after a crash
a file holds every record appended before it plus at most one truncated last line. Opening a log
for appending cuts that line off (with a warning) so appends start clean; reading skips it. A
complete line that does not validate is an error naming `file:line` and the field.
"""

import logging
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from kernelarc.errors import TrackingError

logger = logging.getLogger(__name__)

Record = TypeVar("Record", bound=BaseModel)


def drop_unterminated_tail(path: Path, what: str) -> None:
    """Cut a last line that has no newline (a write cut short by a crash); `what` names the log.

    Raises:
        TrackingError: the file cannot be read or repaired.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        msg = f"{path}: cannot read the {what} ({exc})"
        raise TrackingError(msg) from exc
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    logger.warning(
        "%s: dropping a truncated last line of %d bytes (a crash mid-write): %r",
        path,
        len(data) - keep,
        data[keep : keep + 120],
    )
    try:
        with path.open("r+b") as handle:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        msg = f"{path}: cannot repair the truncated last line ({exc})"
        raise TrackingError(msg) from exc


def append_record(path: Path, record: BaseModel, what: str) -> None:
    """Write `record` as one line, flush and fsync; `what` names it in the error.

    Raises:
        TrackingError: the write failed (disk full, permissions); the message names the file.
    """
    line = record.model_dump_json() + "\n"
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        msg = f"{path}: cannot append {what} ({exc})"
        raise TrackingError(msg) from exc


def read_records(path: Path, model: type[Record], what: str) -> list[Record]:
    """Every record of a log in file order; `what` names one record in errors (`an Attempt`).

    A last line without its newline that does not validate (a crash mid-write) is skipped with
    a warning; blank lines are ignored.

    Raises:
        FileNotFoundError: there is no file (callers decide whether that is an error).
        TrackingError: the file cannot be read, or a complete line is not a valid record.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        msg = f"{path}: cannot read it ({exc})"
        raise TrackingError(msg) from exc
    # Lines stay bytes: a cut can split a multi-byte character, which must not fail the file.
    lines = data.split(b"\n")
    # split(b"\n") leaves b"" last when the file ends with a newline; otherwise the last item is
    # an unterminated line, the only one a crash can leave behind.
    unterminated = len(lines) - 1 if lines[-1].strip() else -1
    records: list[Record] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as exc:
            where = f"{path}:{i + 1}"
            if i == unterminated:
                logger.warning("%s: skipping a truncated or invalid last line (%s)", where, exc)
                continue
            msg = f"{where}: not a valid {what}: {describe_errors(exc)}"
            raise TrackingError(msg) from exc
    return records


def describe_errors(exc: ValidationError) -> str:
    """`field.path: message; ...` for the first five errors of a validation failure."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<line>"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)
