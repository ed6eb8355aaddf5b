#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main
# job -- `gpuwatch run` on an example that leaks device memory -- on the GPU
# when there is one, otherwise on gpuwatch's CUDA simulator.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_COMPILER="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" >/dev/null
cmake --build build -j "$(nproc)"

if nvidia-smi -L >/dev/null 2>&1; then
  echo "== gpuwatch run -- build/examples/leaky_loop (on the GPU)"
  build/bin/gpuwatch run -o build/leaky_loop.json -- build/examples/leaky_loop
else
  echo "== no GPU or CUDA driver found: running the example on gpuwatch's CUDA simulator (tests/sim)"
  LD_LIBRARY_PATH="$PWD/build/tests/sim/lib" \
    build/bin/gpuwatch run -o build/leaky_loop.json -- build/examples/leaky_loop
fi
echo "== gpuwatch report build/leaky_loop.json"
build/bin/gpuwatch report build/leaky_loop.json --top 5
