"""The installed `kernelarc` command run as a user's shell runs it: a subprocess with stdout and
stderr piped (not a terminal), with a temp dir of its own (so what it leaves there can be
checked)."""

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

KERNELARC = Path(sys.executable).parent / "kernelarc"
"""The console script of this environment (`.venv/bin/kernelarc`)."""

SAMPLES = Path(__file__).resolve().parent / "samples"
VECTOR_ADD = SAMPLES / "problems" / "vector_add"


def copy_vector_add(tmp_path: Path) -> Path:
    """The vector_add sample problem copied to `tmp_path/my_problem` (a user's own problem dir)."""
    folder = tmp_path / "my_problem"
    shutil.copytree(VECTOR_ADD, folder)
    return folder


@contextmanager
def private_tmpdir() -> Iterator[Path]:
    """A fresh TMPDIR directly under the system temp dir, world-usable like /tmp (the jailed
    runner, another user, must reach its eval dir there), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="kernelarc-test-tmp-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def kernelarc_env(
    tmpdir: Path | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a piped run: no MLflow telemetry, no COLUMNS, TMPDIR if given."""
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    env.pop("COLUMNS", None)
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    env.update(extra or {})
    return env


def run_kernelarc(
    args: list[str],
    cwd: Path,
    tmpdir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run `kernelarc ARGS` in `cwd`, piped; never raises on a non-zero exit."""
    return subprocess.run(
        [str(KERNELARC), *args],
        cwd=cwd,
        env=kernelarc_env(tmpdir, extra_env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def leftovers(tmpdir: Path) -> list[str]:
    """KernelArc's lock files and sandbox dirs in a private TMPDIR."""
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("kernelarc"))
