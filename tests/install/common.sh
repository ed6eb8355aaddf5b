# shellcheck shell=bash
# Sourced by tests/install's scripts (bash): $tmp, a temporary folder removed at
# exit, named after $1; fail MESSAGE; and an environment in which nothing of the
# caller's chooses gpuwatch's library, attaches it, or keeps Python from
# writing its caches.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuwatch-$1.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
unset GPUWATCH_LIBRARY LD_PRELOAD CUDA_INJECTION64_PATH GPUWATCH_OUTPUT GPUWATCH_DISABLE PYTHONPATH \
  PYTHONDONTWRITEBYTECODE
