#!/usr/bin/env bash
# The README's second command (and what .ci/run calls): lint, type-check and run the tests.
# Installs the dev tools, Ray and the launchers first when .venv lacks them (a fresh clone, or a
# .venv the quickstart made with the runtime only).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! [ -x .venv/bin/kernelarc ] || ! [ -x .venv/bin/pytest ] \
  || ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None \
       for m in ('ray', 'hydra_plugins.hydra_joblib_launcher')))" 2>/dev/null; then
  ./scripts/install.sh --dev
fi
export MLFLOW_DISABLE_TELEMETRY=true
echo "[test] ruff"
.venv/bin/ruff check kernelarc leaderboard conf tests scripts
.venv/bin/ruff format --check kernelarc leaderboard conf tests scripts
echo "[test] mypy"
.venv/bin/mypy
echo "[test] pytest"
set +e
# Two workers (CI has 2 cores; most tests wait on sandboxed subprocesses); a test file stays in one
# worker so its module fixtures (dockerd, mlflow server) start once. KERNELARC_TEST_WORKERS=0: serial.
# --no-loadscope-reorder: hand files out in collection order, where tests/conftest.py puts the
# files with slow tests first (xdist's default order, most tests first, started the long files
# of few tests last). --durations=25: the slowest test phases at the end of the log.
workers=${KERNELARC_TEST_WORKERS:-2}
if [ "$workers" -gt 0 ]; then
  .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder \
    --durations=25 "$@"
else
  .venv/bin/python -m pytest --durations=25 "$@"
fi
rc=$?
set -e
# pytest exits 5 when no test was collected (e.g. a -k filter matched nothing): not a failure
# of the code, but say so loudly.
if [ "$rc" -eq 5 ]; then echo "[test] no tests were collected"; exit 0; fi
exit "$rc"
