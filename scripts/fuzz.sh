#!/usr/bin/env bash
# Builds the report reader's libFuzzer target in build-fuzz (clang, ASan +
# UBSan) and runs it for a bounded time on a copy of the seed corpus
# (tests/fuzz/corpus), so the checked-in corpus never changes by a run.
#
#   scripts/fuzz.sh [SECONDS]      default 60; FUZZ_JOBS=N runs N workers
#
# A crash, leak or UB report stops the run with a non-zero status and leaves the
# input in build-fuzz/findings/ (crash-*, leak-*, timeout-*): add it to
# tests/fuzz/corpus and a regression test to tests/unit/report_reader_test.cc.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWATCH_BUILD_FUZZERS=ON -DGPUWATCH_BUILD_TESTS=OFF -DGPUWATCH_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_HOST_COMPILER=g++ >/dev/null
fi
ninja -C "$build" -j "${FUZZ_BUILD_JOBS:-2}" report_reader_fuzzer >/dev/null

work="$build/fuzz-corpus"
rm -rf "$work"
mkdir -p "$work" "$build/findings"
cp tests/fuzz/corpus/* "$work/"
# -close_fd_mask=2: the commands' error lines would flood the log; libFuzzer
# and the sanitizers keep reporting on their own copy of stderr.
"$build/tests/fuzz/report_reader_fuzzer" "$work" \
  -dict=tests/fuzz/report.dict -max_total_time="$seconds" -max_len=16384 \
  -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 -print_final_stats=1 \
  -artifact_prefix="$build/findings/" \
  ${FUZZ_JOBS:+-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"}
