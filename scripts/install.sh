#!/usr/bin/env bash
# Create .venv in the checkout and install KernelArc: the runtime only (what a campaign needs),
# or with --dev also the dev tools (pytest, ruff, mypy), Ray and the multirun launchers (what
# ./scripts/test.sh needs; a user adds Ray or the launchers with `pip install -e '.[ray]'`,
# `'.[launchers]'`).
# On a machine without an NVIDIA GPU the CPU build of torch goes in first, so the loose
# `torch` requirement of the package does not pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${KERNELARC_TORCH_VERSION:-2.13.0}
TRITON_VERSION=${KERNELARC_TRITON_VERSION:-3.7.1}   # the Triton that torch 2.13 is built against
export PIP_DISABLE_PIP_VERSION_CHECK=1
target="."
case "${1:-}" in
  --dev) target=".[dev,ray,launchers]" ;;
  "") ;;
  *) echo "usage: $0 [--dev]" >&2; exit 2 ;;
esac

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install -q)

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; }

if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if has_gpu; then
    echo "[install] NVIDIA GPU found: installing the default (CUDA) torch build"
    "${PIP[@]}" "torch==${TORCH_VERSION}"
  else
    echo "[install] no NVIDIA GPU: installing the CPU build of torch ${TORCH_VERSION}"
    "${PIP[@]}" "torch==${TORCH_VERSION}+cpu" 2>/dev/null \
      || "${PIP[@]}" "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu
    # The CPU wheel does not depend on Triton; the Triton interpreter runs kernels on the CPU.
    "${PIP[@]}" "triton==${TRITON_VERSION}"
  fi
fi
if [ "$target" = "." ]; then
  echo "[install] installing kernelarc (editable), runtime only"
else
  echo "[install] installing kernelarc (editable) with dev tools, Ray and the multirun launchers"
fi
"${PIP[@]}" -e "$target"
.venv/bin/kernelarc --version
