#!/usr/bin/env bash
# Installs the build into a temporary prefix, moves the prefix (the package
# files must be relocatable), and uses it as a user would:
#   - exactly the user's files are installed (no test program, no simulator);
#   - find_package(gpuwatch) + gpuwatch::gpuwatch build tests/install/consumer,
#     whose API calls are no-ops without gpuwatch attached and take effect
#     with the installed library preloaded on the CUDA simulator;
#   - pkg-config gives the prefix's include and lib directories, and a C
#     program builds and links with its flags alone;
#   - the installed `gpuwatch run` preloads the installed libgpuwatch.so.
# Everything is built and written under a temporary directory.
#
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR SIM_LIB_DIR CMAKE GENERATOR CXX CUDA_ROOT VERSION
set -euo pipefail

build=$1 source=$2 sim=$3 cmake=$4 generator=$5 cxx=$6 cuda_root=$7 version=$8

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuwatch-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# Nothing from the caller's environment may choose the library or attach it.
unset GPUWATCH_LIBRARY LD_PRELOAD CUDA_INJECTION64_PATH GPUWATCH_OUTPUT GPUWATCH_DISABLE

"$cmake" --install "$build" --prefix "$tmp/staged" >"$tmp/install.log" || {
  cat "$tmp/install.log" >&2
  fail "cmake --install failed"
}
mv "$tmp/staged" "$tmp/prefix"
prefix=$tmp/prefix

# --- what is installed ------------------------------------------------------
for f in bin/gpuwatch lib/libgpuwatch.so include/gpuwatch/gpuwatch.h include/gpuwatch/gtest.h \
  lib/cmake/gpuwatch/gpuwatchConfig.cmake lib/cmake/gpuwatch/gpuwatchConfigVersion.cmake \
  lib/pkgconfig/gpuwatch.pc share/gpuwatch/python/gpuwatch/__init__.py \
  share/gpuwatch/python/gpuwatch/pytest_plugin.py share/gpuwatch/python/gpuwatch/pytest_torch.py \
  share/gpuwatch/python/gpuwatch/sizes.py share/man/man1/gpuwatch.1 share/man/man1/gpuwatch-run.1 \
  share/bash-completion/completions/gpuwatch share/zsh/vendor-completions/_gpuwatch; do
  [ -f "$prefix/$f" ] || fail "$f is not installed"
done
# ... and docs/install.md's table names each of them: by its path, its name, a
# glob of either (`gpuwatchTargets*.cmake`), or a directory (`.../gpuwatch/`).
mapfile -t documented < <(grep '^| `' "$source/docs/install.md" | grep -o '`[^`]*`' | tr -d '`')
while IFS= read -r f; do
  named=0
  for d in "${documented[@]}"; do
    # shellcheck disable=SC2053 # $d is a glob on purpose
    if [[ $f == $d || ${f##*/} == $d || ($d == */ && $f == "$d"*) ]]; then
      named=1
      break
    fi
  done
  [ "$named" = 1 ] || fail "$f is installed but docs/install.md's table does not name it"
done < <(cd "$prefix" && find . -type f ! -path '*/__pycache__/*' | sed 's|^\./||' | sort)
[ "$(ls "$prefix/bin")" = "gpuwatch" ] || fail "bin/ holds more than gpuwatch: $(ls "$prefix/bin")"
if find "$prefix" -name 'libcuda*' -o -name 'libcupti*' -o -name 'libgwsim*' \
  -o -name 'leak_sites' -o -name 'leaky_loop' | grep .; then
  fail "the simulator or a test program is installed"
fi
diff -r "$prefix/include/gpuwatch" "$source/include/gpuwatch" >/dev/null ||
  fail "the installed headers are not include/gpuwatch"
diff -r -x __pycache__ "$prefix/share/gpuwatch/python/gpuwatch" "$source/python/gpuwatch" >/dev/null ||
  fail "the installed Python package is not python/gpuwatch"
[ "$("$prefix/bin/gpuwatch" --version)" = "$version" ] || fail "gpuwatch --version is not $version"

# --- find_package(gpuwatch) -------------------------------------------------
"$cmake" -S "$source/tests/install/consumer" -B "$tmp/consumer" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" -DCUDAToolkit_ROOT="$cuda_root" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/configure.log" 2>&1 || {
  cat "$tmp/configure.log" >&2
  fail "the consumer project does not configure"
}
grep -q "gpuwatch_DIR:PATH=$prefix/lib/cmake/gpuwatch" "$tmp/consumer/CMakeCache.txt" ||
  fail "find_package(gpuwatch) did not use $prefix: $(grep gpuwatch_DIR "$tmp/consumer/CMakeCache.txt")"
"$cmake" --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  fail "the consumer project does not build"
}
consumer=$tmp/consumer/consumer
leak_line=$(grep -n 'CONSUMER:leak' "$source/tests/install/consumer/main.cc" | cut -d: -f1)

# Linked, not attached: every call is a no-op, but a pause or resume, which holds from an attach
# that may still come (include/gpuwatch/gpuwatch.h), is taken.
out=$(LD_LIBRARY_PATH=$sim "$consumer" 2>"$tmp/err") || fail "consumer failed: $(cat "$tmp/err")"
expected="version $version active 0 mark -1 snapshot -1 pause 0 resume 0"
[ "$out" = "$expected" ] || fail "without gpuwatch attached: '$out', expected '$expected'"
[ ! -s "$tmp/err" ] || fail "without gpuwatch attached, stderr: $(cat "$tmp/err")"
# The library it loaded is the installed one. (The list is read whole before it is searched:
# `grep -q` in a pipe under pipefail can stop reading early and fail the loader with SIGPIPE.)
loaded=$(LD_LIBRARY_PATH=$sim LD_TRACE_LOADED_OBJECTS=1 "$consumer")
grep -q "libgpuwatch.so => $prefix/lib/libgpuwatch.so" <<<"$loaded" ||
  fail "the consumer does not load $prefix/lib/libgpuwatch.so: $loaded"

# Preloaded on the simulator: the calls take effect and the leak is reported.
mkdir "$tmp/preload"
out=$(cd "$tmp/preload" && LD_LIBRARY_PATH=$sim LD_PRELOAD=$prefix/lib/libgpuwatch.so \
  GPUWATCH_OUTPUT=$tmp/preload/consumer.json GPUWATCH_SUMMARY=0 "$consumer")
expected="version $version active 1 mark 0 snapshot 0 pause 0 resume 0"
[ "$out" = "$expected" ] || fail "with gpuwatch preloaded: '$out', expected '$expected'"
ls "$tmp/preload"/consumer.json.snapshot-* >/dev/null 2>&1 || fail "no snapshot report: $(ls "$tmp/preload")"
report=$("$prefix/bin/gpuwatch" report "$tmp/preload/consumer.json")
grep -q "Leaked device memory: 1.0 MiB in 1 allocation from 1 site" <<<"$report" ||
  fail "the report does not show the 1 MiB leak: $report"
grep -q "main.cc:$leak_line" <<<"$report" || fail "the report does not name main.cc:$leak_line: $report"

# --- pkg-config -------------------------------------------------------------
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs gpuwatch)
include_dir="" lib_dir="" links=0
for flag in $flags; do
  case $flag in
    -I*) include_dir=$(realpath -m "${flag#-I}") ;;
    -L*) lib_dir=$(realpath -m "${flag#-L}") ;;
    -lgpuwatch) links=1 ;;
  esac
done
[ "$include_dir" = "$(realpath "$prefix/include")" ] || fail "pkg-config --cflags: $flags"
[ "$lib_dir" = "$(realpath "$prefix/lib")" ] || fail "pkg-config --libs: $flags"
[ "$links" = 1 ] || fail "pkg-config --libs has no -lgpuwatch: $flags"
[ "$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion gpuwatch)" = "$version" ] ||
  fail "pkg-config --modversion is not $version"
cat >"$tmp/api.c" <<'C'
#include <gpuwatch/gpuwatch.h>
#include <stdio.h>
int main(void) {
  printf("%s %d %d\n", gpuwatch_version(), gpuwatch_is_active(), gpuwatch_mark(NULL));
  return 0;
}
C
# shellcheck disable=SC2086 # the flags are words
cc "$tmp/api.c" -o "$tmp/api" $flags || fail "a C program does not build with pkg-config's flags"
out=$(LD_LIBRARY_PATH=$prefix/lib "$tmp/api")
[ "$out" = "$version 0 -1" ] || fail "the C program printed '$out'"

# --- the installed `gpuwatch run` preloads the installed library ------------
mkdir "$tmp/run"
# shellcheck disable=SC2016 # the child's $LD_PRELOAD, expanded by the child
preload=$(cd "$tmp/run" && "$prefix/bin/gpuwatch" run -- sh -c 'printf "%s\n" "$LD_PRELOAD"' 2>/dev/null)
[ "$preload" = "$(realpath "$prefix/lib/libgpuwatch.so")" ] ||
  fail "installed gpuwatch run preloaded '$preload', not $prefix/lib/libgpuwatch.so"
out=$(cd "$tmp/run" && LD_LIBRARY_PATH=$sim "$prefix/bin/gpuwatch" run --no-summary \
  -o "$tmp/run/run.json" -- "$consumer" 2>"$tmp/run/err")
expected="version $version active 1 mark 0 snapshot 0 pause 0 resume 0"
[ "$out" = "$expected" ] || fail "under the installed gpuwatch run: '$out': $(cat "$tmp/run/err")"
grep -qx "gpuwatch: report written to $tmp/run/run.json" "$tmp/run/err" ||
  fail "gpuwatch run did not write its report: $(cat "$tmp/run/err")"
grep -q "main.cc:$leak_line" <<<"$("$prefix/bin/gpuwatch" report "$tmp/run/run.json")" ||
  fail "the report of gpuwatch run does not name main.cc:$leak_line"

# ... and puts the installed Python package on PYTHONPATH.
if command -v python3 >/dev/null; then
  out=$(cd "$tmp/run" && PYTHONPATH="" "$prefix/bin/gpuwatch" run --no-summary -o "$tmp/run/py.json" -- \
    python3 -c 'import gpuwatch; print(gpuwatch.__file__, gpuwatch.version())' 2>"$tmp/run/err")
  expected="$(realpath "$prefix/share/gpuwatch/python")/gpuwatch/__init__.py $version"
  [ "$out" = "$expected" ] || fail "python under the installed gpuwatch run: '$out': $(cat "$tmp/run/err")"
fi

echo "install test passed: $prefix"
