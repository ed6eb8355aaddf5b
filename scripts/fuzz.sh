#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz (clang, ASan + UBSan) and runs
# each for a bounded time on a copy of its seed corpus, so the checked-in
# corpora never change by a run:
#   report_reader_fuzzer  the report reader and the subcommands (tests/fuzz/corpus)
#   cfi_rule_fuzzer       the CFI walker's unwind-table reader (tests/fuzz/cfi_corpus)
#
#   scripts/fuzz.sh [SECONDS]      default 60 for each; FUZZ_JOBS=N runs N workers
#
# A crash, leak or UB report stops the run with a non-zero status and leaves the
# input in build-fuzz/findings/ (crash-*, leak-*, timeout-*): add it to the
# target's corpus and a regression test (tests/unit/report_reader_test.cc,
# tests/unit/cfi_unwind_test.cc).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWATCH_BUILD_FUZZERS=ON -DGPUWATCH_BUILD_TESTS=OFF -DGPUWATCH_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_HOST_COMPILER=g++ >/dev/null
fi
ninja -C "$build" -j "${FUZZ_BUILD_JOBS:-2}" report_reader_fuzzer cfi_rule_fuzzer >/dev/null
mkdir -p "$build/findings"

# run TARGET CORPUS [libFuzzer options...]
run() {
  local target="$1" corpus="$2"
  shift 2
  local work="$build/fuzz-corpus-$target"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$corpus"/* "$work/"
  "$build/tests/fuzz/$target" "$work" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/findings/" \
    ${FUZZ_JOBS:+-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"} "$@"
}

# -close_fd_mask=2: the commands' error lines would flood the log; libFuzzer
# and the sanitizers keep reporting on their own copy of stderr.
run report_reader_fuzzer tests/fuzz/corpus -dict=tests/fuzz/report.dict -max_len=16384 \
  -close_fd_mask=2
run cfi_rule_fuzzer tests/fuzz/cfi_corpus -max_len=4096
