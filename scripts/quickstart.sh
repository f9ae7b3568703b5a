#!/usr/bin/env bash
# The README's first command: set up .venv (the runtime only) and run a real offline campaign
# (no API key, no GPU, no Docker) on a built-in problem. The campaign ends with one block of
# next steps (export the best kernel, check it, open MLflow), commands that run from the
# checkout. Extra arguments are passed to `kernelarc campaign` as Hydra overrides.
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install.sh
installed=$(date +%s)
export MLFLOW_DISABLE_TELEMETRY=true
run_dir="outputs/quickstart/$(date +%Y-%m-%d_%H-%M-%S)"
echo "[quickstart] campaign -> ${run_dir}"
.venv/bin/kernelarc campaign name=quickstart problem=rmsnorm budget.candidates=6 \
  "hydra.run.dir=${run_dir}" "$@"
end=$(date +%s)
echo "[quickstart] done in $(( end - start )) s (install $(( installed - start )) s, campaign $(( end - installed )) s)"
if [ "$here" != "$PWD" ]; then
  echo "[quickstart] run the commands above from $PWD"
fi
