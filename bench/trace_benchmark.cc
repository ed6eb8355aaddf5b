// The cost of the event trace (libgpuwatch/record/trace.h): one Trace::Record, and
// what it adds to an allocation plus a free in the tracker (two memory
// events). docs/BENCHMARKS.md has the figures.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {
namespace {

Trace& SharedTrace() {
  static Trace& trace = *new Trace(Trace::kDefaultCapacity);
  return trace;
}

// One event into a ring that is full (steady state: every write overwrites).
void BM_TraceRecord(benchmark::State& state) {
  Trace& trace = SharedTrace();
  uint64_t i = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    trace.Memory(i, 0, i);
    ++i;
  }
}
BENCHMARK(BM_TraceRecord)->ThreadRange(1, 2)->UseRealTime();

AllocEvent Alloc(uint64_t n) {
  AllocEvent e;
  e.address = n << 8;
  e.size = 256;
  return e;
}

// An allocation and a free with 1,000 live, as in hook_benchmark's
// BM_HookAllocFree_NoStack; Arg(1) with the trace, Arg(0) without.
void BM_TrackerAllocFree(benchmark::State& state) {
  static Tracker& traced = []() -> Tracker& {
    auto* t = new Tracker();
    t->SetTrace(&SharedTrace());
    return *t;
  }();
  static Tracker& plain = *new Tracker();
  Tracker& tracker = state.range(0) != 0 ? traced : plain;
  const uint64_t first = (static_cast<uint64_t>(state.thread_index()) << 32) + 1;
  uint64_t next = first;
  for (; next < first + 1000; ++next) tracker.OnAlloc(Alloc(next));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    tracker.OnAlloc(Alloc(next));
    benchmark::DoNotOptimize(tracker.OnFree(Alloc(next - 1000).address));
    ++next;
  }
  for (uint64_t i = next - 1000; i < next; ++i) tracker.OnFree(Alloc(i).address);
}
BENCHMARK(BM_TrackerAllocFree)->Arg(0)->Arg(1)->ThreadRange(1, 2)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace gpuwatch

BENCHMARK_MAIN();
