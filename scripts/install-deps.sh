#!/usr/bin/env bash
# Installs the Debian packages gpuwatch needs.
#
#   scripts/install-deps.sh            what building and testing need (scripts/test.sh)
#   scripts/install-deps.sh --build    what building needs (scripts/quickstart.sh): no test
#                                      tools, servers or clang
#
# Idempotent: installs only what is missing, and runs apt-get update only then.
# The CUDA toolkit itself (nvcc, headers, CUPTI) is not a Debian package here:
# it is expected at $CUDA_HOME or /usr/local/cuda.
set -euo pipefail

# Configuring (CMakeLists.txt finds all of these, the test libraries included) and building.
build=(
  build-essential cmake ninja-build pkg-config git python3
  libunwind-dev libdw-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev
  prometheus-cpp-dev  # gpuwatch exporter (tools/commands/exporter_command.cc)
)
# Running the tests and the checks.
tests=(
  python3-pip python3-venv        # tests/install/run_wheel_test.sh: pip install ./python in a venv
                                  # (pip fetches scikit-build-core from the package index)
  python3-pytest                  # tests/e2e/gates_test.cc: the pytest plugin
  tmux                            # tests/live/check_top_tmux.py: gpuwatch top in a terminal
  zsh                             # tests/cli/check_docs.sh: the zsh completion loads
  prometheus                      # the exporter's tests: the server and promtool
  systemd                         # tests/prometheus/check_unit.sh: systemd-analyze verify
  clang-format clang-tidy
  clang libclang-rt-14-dev        # scripts/fuzz.sh: clang with the libFuzzer runtime
)

case "${1:-}" in
  --build) packages=("${build[@]}") ;;
  "") packages=("${build[@]}" "${tests[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (use --build or nothing)" >&2; exit 2 ;;
esac

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
