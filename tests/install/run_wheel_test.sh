#!/usr/bin/env bash
# `pip install ./python` in a fresh virtual environment, as a user runs it:
# pip fetches the build backend (scikit-build-core), which builds the library
# and the command with the repository's CMake project (python/pyproject.toml).
# Then, with nothing but the environment's bin/ on PATH:
#   - the environment holds the command, the library and the Python package
#     (bin/gpuwatch, lib/libgpuwatch.so, share/gpuwatch/python, site-packages),
#     all of the project's version, and pytest's entry point for the plugin;
#   - `gpuwatch run -- python train.py` preloads the environment's library into
#     a script that uses CUDA (the simulator's libcudart, through ctypes) and
#     the report names the script's leak at train.py:<line>;
#   - `pip uninstall gpuwatch` leaves none of those files behind.
# The wheel's CMake build is BUILD_DIR-wheel, beside the build tree (the same
# depth), with the build tree's compilers: where the build tree was compiled
# through ccache with CCACHE_BASEDIR=SOURCE_DIR and CCACHE_NOHASHDIR set (as
# .ci/run does), the wheel's objects come from the cache. The wheel is kept in
# BUILD_DIR-wheel/dist.
#
# Usage: run_wheel_test.sh BUILD_DIR SOURCE_DIR SIM_LIB_DIR PYTHON VERSION CC CXX
set -euo pipefail

build=$1 source=$2 sim=$3 python=$4 version=$5
export CC=$6 CXX=$7
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

# shellcheck source=tests/install/common.sh
source "$(dirname "$0")/common.sh" wheel
unset VIRTUAL_ENV PYTHONHOME PIP_TARGET PIP_PREFIX PIP_USER
export PIP_DISABLE_PIP_VERSION_CHECK=1

start=$SECONDS
"$python" -m venv "$tmp/venv" || fail "$python -m venv failed (Debian: python3-venv)"
venv=$tmp/venv
wheel_build=${build%/}-wheel
rm -rf "$wheel_build"
# `pip install ./python` in two steps, as pip takes them, to keep the wheel: the
# e2e gates tests (PytestPlugin.WheelInstalled...) install it too.
"$venv/bin/python" -m pip wheel --no-deps -w "$wheel_build/dist" -C build-dir="$wheel_build" \
  "$source/python" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  fail "pip wheel $source/python failed"
}
wheels=("$wheel_build"/dist/gpuwatch-"$version"-py3-none-*.whl)
if [ ${#wheels[@]} != 1 ] || [ ! -f "${wheels[0]}" ]; then
  fail "not one wheel: $(ls "$wheel_build/dist")"
fi
"$venv/bin/python" -m pip install "${wheels[0]}" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  fail "pip install ${wheels[0]} failed"
}
echo "pip install ./python (venv, build backend, configure, build, install): $((SECONDS - start)) s"

# --- what is installed ------------------------------------------------------
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for f in bin/gpuwatch lib/libgpuwatch.so share/gpuwatch/python/gpuwatch/__init__.py \
  share/gpuwatch/python/gpuwatch/torch_shim/sitecustomize.py; do
  [ -f "$venv/$f" ] || fail "the environment has no $f"
done
[ -x "$venv/bin/gpuwatch" ] || fail "bin/gpuwatch is not executable"
[ "$("$venv/bin/gpuwatch" --version)" = "$version" ] || fail "gpuwatch --version is not $version"
# The package where the environment's Python finds it, of the project's version.
out=$("$venv/bin/python" -c 'import gpuwatch; print(gpuwatch.__file__, gpuwatch.__version__)')
[ "$out" = "$site/gpuwatch/__init__.py $version" ] || fail "import gpuwatch: '$out'"
out=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("gpuwatch"))')
[ "$out" = "$version" ] || fail "the installed distribution's version: '$out'"
out=$("$venv/bin/python" -c 'import importlib.metadata as m
print(" ".join(e.name + "=" + e.value for e in m.distribution("gpuwatch").entry_points if e.group == "pytest11"))')
[ "$out" = "gpuwatch.pytest_plugin=gpuwatch.pytest_plugin" ] || fail "pytest11 entry points: '$out'"
# Nothing else: no headers, CMake or pkg-config files, docs, test programs.
extra=$(cd "$venv" && find . -path './lib/python3*' -prune -o -type f -print |
  grep -i -e gpuwatch -e cuda | grep -v -x -e ./bin/gpuwatch -e ./lib/libgpuwatch.so \
  -e './share/gpuwatch/python/gpuwatch/.*' || true)
[ -z "$extra" ] || fail "the wheel installed more than the command, the library and the package: $extra"

# --- gpuwatch run -- python train.py ----------------------------------------
mkdir "$tmp/run"
cat >"$tmp/run/train.py" <<'PY'
import ctypes
import os

import gpuwatch

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
kept = []
for step in range(3):
    scratch = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(scratch), 4 << 20) == 0
    assert cudart.cudaFree(scratch) == 0
    weights = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(weights), 1 << 20) == 0  # TRAIN:leak
    kept.append(weights)
    gpuwatch.mark("step")
print("attached", gpuwatch.attached(), "preload", os.environ.get("LD_PRELOAD"))
PY
leak_line=$(grep -n 'TRAIN:leak' "$tmp/run/train.py" | cut -d: -f1)
# As in an activated environment: `gpuwatch` and `python` are the environment's.
out=$(cd "$tmp/run" && PATH="$venv/bin:$PATH" LD_LIBRARY_PATH=$sim gpuwatch run --no-summary \
  -o "$tmp/run/train.json" -- python train.py 2>"$tmp/run/err") ||
  fail "gpuwatch run -- python train.py failed: $(cat "$tmp/run/err")"
[ "$out" = "attached True preload $(realpath "$venv/lib/libgpuwatch.so")" ] ||
  fail "train.py under the environment's gpuwatch run printed '$out': $(cat "$tmp/run/err")"
grep -qx "gpuwatch: report written to $tmp/run/train.json" "$tmp/run/err" ||
  fail "gpuwatch run wrote no report: $(cat "$tmp/run/err")"
report=$("$venv/bin/gpuwatch" report "$tmp/run/train.json")
grep -q "Leaked device memory: 3.0 MiB in 3 allocations from 1 site" <<<"$report" ||
  fail "the report does not show train.py's 3 x 1 MiB: $report"
grep -q "train.py:$leak_line" <<<"$report" || fail "the report does not name train.py:$leak_line: $report"

# --- pip uninstall ----------------------------------------------------------
"$venv/bin/python" -m pip uninstall -y gpuwatch >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  fail "pip uninstall gpuwatch failed"
}
# No file, and no folder but the empty share/gpuwatch/python: pip removes the
# folders of the files it installed, not their empty parents.
left=$(cd "$venv" && find . \( -iname '*gpuwatch*' -o -path './share/gpuwatch/*' \) \
  ! -path ./share/gpuwatch ! -path ./share/gpuwatch/python)
[ -z "$left" ] || fail "pip uninstall left these behind: $left"
[ -z "$(ls -A "$venv/share/gpuwatch/python")" ] || fail "share/gpuwatch/python is not empty"

echo "wheel test passed in $((SECONDS - start)) s"
