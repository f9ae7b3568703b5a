"""Screenshot the MLflow UI on a KernelArc experiment (docs/img/mlflow-ui.png).

Starts `mlflow ui` on the given store, opens the experiment's runs table through a small
same-origin proxy whose first page presets the UI's view in localStorage (campaign runs only,
grouped by an arm tag, KernelArc columns, the assistant panel closed), and takes the screenshot
with headless Chromium (Debian: `apt-get install chromium`). The localStorage layout is MLflow
3.17's; another MLflow version may ignore it and show its default view.

    .venv/bin/python scripts/mlflow_ui_screenshot.py --backend-store-uri sqlite:///$PWD/mlflow.db \\
        --experiment guard-ablation --group-by kernelarc.choice.guard --out docs/img/mlflow-ui.png
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

COLUMNS = {
    "metrics.`campaign/final_best_speedup`": 215,
    "metrics.`campaign/final_best_sol_score`": 215,
    "metrics.`campaign/final_passed`": 165,
    "tags.`kernelarc.seed`": 110,
    "tags.`kernelarc.best_agent`": 150,
    "tags.`kernelarc.hardware`": 130,
}
"""Columns shown, with their widths in pixels."""
SETUP_PATH = "/kernelarc-setup"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend-store-uri", required=True)
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--group-by", default="kernelarc.choice.guard", help="tag to group by")
    parser.add_argument("--out", type=Path, default=Path("docs/img/mlflow-ui.png"))
    parser.add_argument("--size", default="1600,900", help="window width,height")
    parser.add_argument("--wait-ms", type=int, default=25000, help="virtual time for the page")
    ns = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    experiment_id = _experiment_id(ns.backend_store_uri, ns.experiment)
    ui_port, proxy_port = _free_port(), _free_port()
    ui = _start_ui(ns.backend_store_uri, ui_port)
    try:
        _wait_healthy(f"http://127.0.0.1:{ui_port}")
        target = _target(experiment_id)
        state = _view_state(ns.group_by)
        proxy = _start_proxy(proxy_port, ui_port, experiment_id, target, state)
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="kernelarc-chromium-") as profile:
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--user-data-dir={profile}",
                    f"--window-size={ns.size}",
                    f"--virtual-time-budget={ns.wait_ms}",
                    f"--screenshot={ns.out.resolve()}",
                    f"http://127.0.0.1:{proxy_port}{SETUP_PATH}",
                ],
                check=True,
                timeout=300,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        proxy.shutdown()
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)
    print(f"wrote {ns.out}")
    return 0


def _experiment_id(uri: str, name: str) -> str:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    experiment = MlflowClient(tracking_uri=uri).get_experiment_by_name(name)
    if experiment is None:
        msg = f"experiment {name!r} not found at {uri}"
        raise SystemExit(msg)
    return str(experiment.experiment_id)


def _target(experiment_id: str) -> str:
    query = urllib.parse.urlencode({"searchFilter": "tags.`kernelarc.kind` = 'campaign'"})
    return f"/#/experiments/{experiment_id}/runs?{query}"


def _view_state(group_by: str) -> dict[str, object]:
    """The runs table's persisted state (MLflow 3.17 `ExperimentPage` component state)."""
    return {
        "searchFilter": "tags.`kernelarc.kind` = 'campaign'",
        "orderByKey": "metrics.`campaign/final_best_speedup`",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": list(COLUMNS),
        # Widths apply only to the columns named in columnOrder (ag-grid column state).
        "columnOrder": list(COLUMNS),
        "columnWidths": COLUMNS,
        "runsExpanded": {},
        "runsPinned": [],
        "runsHidden": [],
        "runsVisibilityMap": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "groupBy": {
            "aggregateFunction": "average",
            "groupByKeys": [{"mode": "tag", "groupByData": group_by}],
        },
        "groupsExpanded": {},
        "autoRefreshEnabled": False,
    }


def _setup_page(experiment_id: str, target: str, state: dict[str, object]) -> bytes:
    items = {
        f'MLflowLocalStorage-1.1-ExperimentPage-["{experiment_id}"]-ReactComponentState': state,
        "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": True,
        "mlflow.assistant.panelOpen_v1": False,
    }
    script = "".join(
        f"localStorage.setItem({json.dumps(k)}, {json.dumps(json.dumps(v))});"
        for k, v in items.items()
    )
    page = f"<!DOCTYPE html><script>{script}location.replace({json.dumps(target)});</script>"
    return page.encode()


def _start_proxy(
    port: int, ui_port: int, experiment_id: str, target: str, state: dict[str, object]
) -> http.server.ThreadingHTTPServer:
    setup = _setup_page(experiment_id, target, state)
    upstream = f"http://127.0.0.1:{ui_port}"

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == SETUP_PATH:
                self._reply(200, {"Content-Type": "text/html"}, setup)
            else:
                self._forward(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._forward(self.rfile.read(length))

        def _forward(self, body: bytes | None) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host",)}
            request = urllib.request.Request(
                upstream + self.path, data=body, headers=headers, method=self.command
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self._reply(response.status, dict(response.headers), response.read())
            except urllib.error.HTTPError as exc:
                self._reply(exc.code, dict(exc.headers), exc.read())

        def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _start_ui(uri: str, port: int) -> "subprocess.Popen[bytes]":
    mlflow = Path(sys.executable).parent / "mlflow"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    args = ["ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(
        [str(mlflow), *args, "--workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_healthy(base: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    msg = f"mlflow ui at {base} not healthy after {timeout_s} s"
    raise SystemExit(msg)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


if __name__ == "__main__":
    raise SystemExit(main())
