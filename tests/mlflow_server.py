"""A real `mlflow server` on 127.0.0.1 that a test can start, kill (an outage) and restart.

One worker and no job runner (about 10 s to start on two cores); the store (SQLite) and the
artifacts live under the given root, so a restarted server serves the same data.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class MlflowServer:
    """One `mlflow server` process group over a fixed store and port."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / f"server-{self._starts}.log"

    def start(self, timeout_s: float = 120) -> None:
        """Start the server and wait until /health answers (fails the test otherwise)."""
        self._starts += 1
        mlflow_bin = Path(sys.executable).parent / "mlflow"
        env = {
            **os.environ,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "MLFLOW_DISABLE_TELEMETRY": "true",
        }
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    str(mlflow_bin),
                    "server",
                    "--workers",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--backend-store-uri",
                    f"sqlite:///{self.root}/mlflow.db",
                    "--artifacts-destination",
                    str(self.root / "artifacts"),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_healthy(timeout_s)

    def kill(self) -> None:
        """SIGKILL the whole process group: the server vanishes mid-request, like a crash."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # Workers of the group may outlive the parent for a moment; wait until the port is free.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._answers():
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM the process group and wait (SIGKILL after 20 s)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait_healthy(self, timeout_s: float) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = self.log_path.read_text()[-3000:]
                pytest.fail(f"mlflow server exited with {proc.returncode}:\n{log}")
            if self._answers():
                return
            time.sleep(0.5)
        pytest.fail(f"mlflow server not healthy after {timeout_s} s:\n{self.log_path.read_text()}")
