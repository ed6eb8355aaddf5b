#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment with a pinned CUDA build of PyTorch, pytest,
# memray and pytest-memray, for the tests that run real PyTorch on gpuwatch's CUDA simulator
# (tests/e2e/torch_test.cc). Prints the environment's python on its last line; the tests read
# it from GPUWATCH_TORCH_PYTHON (tests/README.md).
#
#   scripts/torch-env.sh [BUILD_DIR]     (default: build; the environment is BUILD_DIR/torch-env)
#
# Idempotent: a stamp file inside the environment holds the pins it was made with; when they
# match, nothing is installed (well under a second). Fails with one line when the package index
# cannot be reached.
#
# What is installed, and why so little of NVIDIA's (docs/pytorch.md, "Running on the
# simulator"): torch itself without its dependencies, its pure-Python requirements, and of
# NVIDIA's wheels only the libraries the CUDA toolkit at $CUDA_HOME lacks or has too old for this
# torch: NCCL (torch needs 2.30 symbols; the toolkit has an older one), cuSPARSELt, NVSHMEM and
# cuFile (not in the toolkit). The toolkit's cuBLAS, cuFFT, cuSPARSE, cuSOLVER, NVRTC, nvJitLink,
# cuRAND and cuDNN are linked into the directories torch's RPATH names. libcudart.so.13 and
# libcupti.so.13 are deliberately NOT put there: they come from LD_LIBRARY_PATH, so that the
# simulator's (or, on a GPU machine, the toolkit's) are the ones torch loads.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build}"
mkdir -p "$build_dir"
build_dir="$(cd "$build_dir" && pwd)"
env_dir="$build_dir/torch-env"
cuda_lib="${CUDA_HOME:-/usr/local/cuda}/lib64"

# The pins. Changing any of them rebuilds the environment's packages on the next run.
pins=(
  torch==2.15.0
  nvidia-nccl-cu13==2.30.7
  nvidia-cusparselt-cu13==0.8.1
  nvidia-nvshmem-cu13==3.7.2
  nvidia-cufile==1.17.1.22
  filelock==4.3.2 typing-extensions==4.16.0 sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1
  jinja2==3.1.6 markupsafe==3.0.4 fsspec==2026.9.0 numpy==2.4.6
  pytest==9.2.0 memray==1.20.0 pytest-memray==1.11.0
  # --no-deps below: pytest's and memray's own requirements, or neither imports
  iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 pygments==2.21.0
  rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 textual==8.2.8 mdit-py-plugins==0.7.0
  linkify-it-py==2.2.0 platformdirs==4.14.9
)
# Toolkit libraries torch links (and the cuDNN sub-libraries it opens), by the RPATH directory
# of torch/lib it is looked for in.
cu13_libs=(libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcusparse.so.12 libcusolver.so.12
  libnvrtc.so.13 libnvrtc-builtins.so.13.0 libnvJitLink.so.13 libcurand.so.10)
stamp_text="${pins[*]} | ${cu13_libs[*]} | $cuda_lib"

log() { echo "torch-env: $*" >&2; }
fail() {
  echo "torch-env: $*" >&2
  exit 1
}

python="$env_dir/bin/python"
stamp="$env_dir/.gpuwatch-torch-env"
if [ -x "$python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "$python"
  exit 0
fi

[ -f "$cuda_lib/libcublas.so.13" ] || fail "no CUDA 13 toolkit libraries in $cuda_lib (set CUDA_HOME)"
if [ ! -x "$python" ]; then
  python3 -m venv "$env_dir" || fail "python3 -m venv $env_dir failed (apt-get install python3-venv)"
fi

pip_log="$build_dir/torch-env.log"
start=$(date +%s)
log "installing ${pins[0]} and ${#pins[@]} other pins into $env_dir (about 800 MB of downloads; log: $pip_log)"
# --no-deps: torch's own requirements name every NVIDIA library (3 GB); the pins list what the
# simulator run needs instead. PIP_FIND_LINKS (a local wheel folder) is honoured if set.
if ! "$python" -m pip install --no-deps --disable-pip-version-check --retries 2 --timeout 60 \
  "${pins[@]}" >"$pip_log" 2>&1; then
  if grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|Temporary failure in name resolution|Network is unreachable|ProxyError|SSLError|Max retries exceeded' "$pip_log"; then
    reason=$(grep -m1 -oiE "Failed to establish a new connection: [^')]*|Temporary failure in name resolution|Network is unreachable|Read timed out|ProxyError|SSLError[^')]*" "$pip_log" || true)
    fail "cannot reach the package index (${PIP_INDEX_URL:-https://pypi.org/simple}): ${reason:-see $pip_log}"
  fi
  if grep -qiE 'No matching distribution' "$pip_log"; then
    fail "the package index has no wheel for this Python/platform: $(grep -m1 -iE 'No matching distribution' "$pip_log" | cut -c1-200)"
  fi
  fail "pip install failed: $(grep -m1 -iE '^error' "$pip_log" | cut -c1-200) (log: $pip_log)"
fi

site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/nvidia/cu13/lib" "$site/nvidia/cudnn/lib"
for lib in "${cu13_libs[@]}"; do
  [ -e "$cuda_lib/$lib" ] || fail "$cuda_lib/$lib is missing (torch links it)"
  ln -sf "$cuda_lib/$lib" "$site/nvidia/cu13/lib/$lib"
done
for lib in "$cuda_lib"/libcudnn*.so.9; do
  ln -sf "$lib" "$site/nvidia/cudnn/lib/$(basename "$lib")"
done
# The runtime and CUPTI must not be found through torch's RPATH (see the header).
for lib in libcudart.so.13 libcupti.so.13; do
  [ ! -e "$site/nvidia/cu13/lib/$lib" ] || fail "$site/nvidia/cu13/lib/$lib exists (remove $env_dir)"
done

# Every pinned tool must import (a missing requirement of a --no-deps pin shows here, not in a test).
if ! check=$("$python" -c 'import torch, pytest, memray, pytest_memray' 2>&1); then
  fail "the environment is incomplete: $(echo "$check" | tail -1)"
fi
echo "$stamp_text" >"$stamp"
log "ready in $(($(date +%s) - start)) s, $(du -sh "$env_dir" | cut -f1) on disk"
echo "$python"
