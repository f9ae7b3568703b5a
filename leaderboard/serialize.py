"""Byte-stable JSON and text output of the exporter: sorted keys, `\n` line ends, UTF-8."""

import json
from pathlib import Path


def dump_json(data: object, indent: int | None = None) -> str:
    """JSON with sorted keys and a final newline; NaN and infinities are an error."""
    separators = (",", ": ") if indent is not None else (",", ":")
    text = json.dumps(data, indent=indent, sort_keys=True, separators=separators, allow_nan=False)
    return text + "\n"


def write_text(path: Path, text: str) -> Path:
    """Write text as UTF-8 bytes, with no newline translation; return the path."""
    path.write_bytes(text.encode("utf-8"))
    return path
