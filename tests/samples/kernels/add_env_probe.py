import os
import re
from pathlib import Path


def run(x, y):
    leaked = sorted(k for k in os.environ if re.search("KEY|TOKEN|SECRET", k, re.I))
    if leaked:
        raise RuntimeError(f"secret-looking variables leaked into the sandbox: {leaked}")
    if Path(os.environ["HOME"]).resolve() != Path.cwd().resolve():
        raise RuntimeError("HOME is not the private temp dir")
    if os.environ.get("KERNELARC_PROBE") != "visible":
        raise RuntimeError("extra_env was not passed through")
    if (Path.cwd() / "definition.json").exists() or not (Path.cwd() / "src").is_dir():
        raise RuntimeError("unexpected staging layout")
    return x + y
