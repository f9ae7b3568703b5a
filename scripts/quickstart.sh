#!/usr/bin/env bash
# The README's first command: set everything up on a fresh machine and run a real offline
# campaign (no API key, no GPU, no Docker) on a built-in problem, then export the best kernel.
# Extra arguments are passed to `kernelarc campaign` as Hydra overrides.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install.sh
export MLFLOW_DISABLE_TELEMETRY=true
run_dir="outputs/quickstart/$(date +%Y-%m-%d_%H-%M-%S)"
echo "[quickstart] campaign -> ${run_dir}"
.venv/bin/kernelarc campaign name=quickstart problem=rmsnorm budget.candidates=6 \
  "hydra.run.dir=${run_dir}" "$@"
.venv/bin/kernelarc export "${run_dir}" --out "${run_dir}/export" >/dev/null
echo
echo "[quickstart] done in $(( $(date +%s) - start )) s"
echo "  attempts:      ${run_dir}/attempts.jsonl"
echo "  best kernel:   ${run_dir}/export/rmsnorm/solution.json (+ traces.jsonl)"
echo "  check it:      .venv/bin/kernelarc eval rmsnorm --solution ${run_dir}/export/rmsnorm/solution.json"
echo "  MLflow UI:     .venv/bin/mlflow ui --backend-store-uri sqlite:///$(pwd)/mlflow.db --port 5000"
echo "                 then open http://127.0.0.1:5000 (experiment 'quickstart')"
