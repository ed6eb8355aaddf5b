#!/usr/bin/env bash
# The README's first command: install what building needs, build what the main job needs (the
# library, the command, the example and the simulator: the `quickstart` target), and run the main
# job -- `gpuwatch run` on an example that leaks device memory -- on the GPU when there is one,
# otherwise on gpuwatch's CUDA simulator. The README's second command (scripts/test.sh) builds
# and runs everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

echo "== installing the Debian packages the build needs (only those missing)"
scripts/install-deps.sh --build
echo "== configuring build/"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_COMPILER="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" >/dev/null
echo "== building the library, the command, the example and the simulator (about 2 minutes on 2 cores)"
cmake --build build -j "$(nproc)" --target quickstart

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
echo "== done in $((SECONDS - start)) s; the tests: scripts/test.sh"
