#!/usr/bin/env bash
# Every figure of docs/BENCHMARKS.md, into one directory.
#
#   bench/run_all.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, bench-results)
#
# Build first:  ninja -C BUILD_DIR stack_benchmark hook_benchmark report_benchmark bench_overhead_deps \
#                 bench_live_deps live_benchmark bench_fixed_cost_deps
# Takes about 40 minutes on a 2-core machine; run it on an otherwise idle machine
# (wall-clock figures are medians, but a busy machine inflates them all).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
out=${2:-bench-results}
mkdir -p "$out"
bench=$build/bench

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$here/.." rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel: $(uname -r)"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

run_gbench() {  # name binary filter extra-args...
  local name=$1 bin=$2 filter=$3
  shift 3
  echo "== $name"
  "$bin" --benchmark_filter="$filter" --benchmark_out="$out/$name.json" \
    --benchmark_out_format=json "$@" | tee "$out/$name.txt"
}

# Per-event hook costs (core, no CUPTI): median of 5 repetitions.
run_gbench hooks "$bench/hook_benchmark" 'Hook|Calibrate' --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
# Live table insert/erase from 1e3 to 1e7, and memory per allocation and stack.
run_gbench table "$bench/hook_benchmark" 'Table|Memory'
# Stack capture, interning, symbolization.
run_gbench stacks "$bench/stack_benchmark" '.' --benchmark_min_time=0.2
# The exit report: 1e6 live allocations over 1e4 sites, and around it.
run_gbench report "$bench/report_benchmark" '.'

# End to end through CUPTI on the simulator (or the GPU), with heaptrack.
echo "== overhead"
python3 "$here/overhead.py" --build "$build" --events 200000 --repeat 7 --scaling \
  --callgrind --json "$out/overhead.json" | tee "$out/overhead.md"
# The live view (gpuwatch top): the background thread's CPU idle and polled,
# 100,000 live allocations over 10,000 sites (about 7 minutes), and its parts.
echo "== live"
python3 "$here/live_poll.py" --build "$build" --seconds 20 --repeat 3 \
  --json "$out/live.json" | tee "$out/live.md"
run_gbench live_core "$bench/live_benchmark" '.' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true
# A process's fixed cost (a tiny process, start to exit), the exit report and
# resident memory at 1,000,000 live allocations (about 7 minutes).
echo "== fixed cost"
python3 "$here/fixed_cost.py" --build "$build" --rounds 9 --exit-rounds 3 \
  --json "$out/fixed_cost.json" | tee "$out/fixed_cost.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
echo "results in $out"
