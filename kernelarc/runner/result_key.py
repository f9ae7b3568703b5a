"""The judge's result key, result signing and the process hardening that protects the key.

The host writes a fresh random key (hex, one line) to the runner's stdin and closes it. The
judge reads it only after the worker zygote was forked (so no worker's memory holds it), while
non-dumpable (so no same-uid process can ptrace it or open its /proc/PID/mem, fd/ or environ).
RESULT.json is `{"payload": "<JSON text of {traces: [...]}>", "hmac": "<hex>"}`, the HMAC-SHA256
of the payload's UTF-8 bytes under that key; the host (`kernelarc.sandboxes.result_file`)
accepts nothing else, so a candidate that writes RESULT.json itself forges nothing.

Imports nothing heavy: the entry point uses it before torch loads.
"""

import ctypes
import hashlib
import hmac
import json
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_MAX_KEY_LINE = 1024


def set_dumpable(dumpable: bool) -> bool:
    """prctl(PR_SET_DUMPABLE); False (with a warning) where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = bool(libc.prctl(_PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        done = False
    if not done:
        logger.warning("prctl(PR_SET_DUMPABLE, %d) failed", int(dumpable))
    return done


def read_result_key(*, keep_stdin: bool = False) -> bytes:
    """The key line from fd 0 (empty when none was given), then fd 0 becomes /dev/null; with
    `keep_stdin` (a resident judge, whose next go line comes later) fd 0 stays, and the line is
    read one byte at a time so that nothing after it is consumed."""
    data = b""
    try:
        if not os.isatty(0):
            while b"\n" not in data and len(data) < _MAX_KEY_LINE:
                chunk = os.read(0, 1 if keep_stdin else _MAX_KEY_LINE - len(data))
                if not chunk:
                    break
                data += chunk
    except OSError:
        data = b""
    if not keep_stdin:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    try:
        return bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        logger.warning("the result key on stdin is not hex; results will not verify")
        return b""


def signed_result(payload: dict[str, Any], key: bytes) -> str:
    """The RESULT.json text for a payload."""
    text = json.dumps(payload, allow_nan=False)
    digest = hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()
    return json.dumps({"payload": text, "hmac": digest})
