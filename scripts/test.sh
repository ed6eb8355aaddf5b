#!/usr/bin/env bash
# The README's second command: install what the tests need, build everything (the tests, the
# simulator's tests, the benchmarks; what scripts/quickstart.sh built is reused), and run the
# whole test suite. Arguments go to ctest (e.g. -R Torch, --timeout 300).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing the Debian packages the tests need (only those missing)"
scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  echo "== configuring build/"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CUDA_COMPILER="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" >/dev/null
fi
echo "== building everything (the first time about 20 minutes on 2 cores: the tests are most of it)"
cmake --build build -j "$(nproc)"
echo "== running the tests"
ctest --test-dir build --output-on-failure -j 2 "$@"
