#!/usr/bin/env bash
# Installs the Debian packages that building and testing gpuwatch need.
# Idempotent: installs only what is missing, and runs apt-get update only then.
# The CUDA toolkit itself (nvcc, headers, CUPTI) is not a Debian package here:
# it is expected at $CUDA_HOME or /usr/local/cuda.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  python3-pip python3-setuptools  # tests/e2e/python_test.cc: pip install ./python
  python3-pytest                  # tests/e2e/gates_test.cc: the pytest plugin
  tmux                            # tests/live/check_top_tmux.py: gpuwatch top in a terminal
  libunwind-dev libdw-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev
  prometheus-cpp-dev  # gpuwatch exporter (tools/commands/exporter_command.cc)
  prometheus          # its tests: the server and promtool (tests/e2e/exporter_test.cc)
  clang-format clang-tidy
  clang libclang-rt-14-dev  # scripts/fuzz.sh: clang with the libFuzzer runtime
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda_home/bin/nvcc" ] || [ ! -f "$cuda_home/include/cupti.h" ]; then
  echo "install-deps: the CUDA 13 toolkit was not found at $cuda_home (set CUDA_HOME)" >&2
  exit 1
fi
