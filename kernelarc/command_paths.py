"""How to spell a command of this installation so the user can paste it: `kernelarc`,
`.venv/bin/kernelarc` or an absolute path.

Place in the flow: the closing lines of a campaign ("Next steps") and the MLflow UI hint print
commands; a fresh quickstart checkout has `kernelarc` and `mlflow` in `.venv/bin`, not on PATH,
so a bare `kernelarc export ...` would not run there.
"""

import shutil
import sys
from pathlib import Path


def command(name: str) -> str:
    """`name` when the shell finds this installation's `name` on PATH; else its path (relative
    to the current dir when it is below it, e.g. `.venv/bin/kernelarc`)."""
    here = Path(sys.executable).parent / name
    if not here.is_file():
        return name
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == here.resolve():
        return name
    return display_path(here)


def display_path(path: Path) -> str:
    """`path` relative to the current dir when it is below it, else absolute; never resolved
    through symlinks (a venv's python is one)."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
