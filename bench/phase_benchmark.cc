// Phases: what an NVTX range push and pop costs the program with gpuwatch
// taking them (through NVTX's own nvtxRangePushA/nvtxRangePop, with this
// binary as NVTX's statically injected tool), and the parts under it.
// docs/BENCHMARKS.md records the figures. NVTX finds gpuwatch through
// InitializeInjectionNvtx2_fnptr (phase_benchmark_injection.cc) when no
// NVTX_INJECTION64_PATH is set, as it would call libgpuwatch.so's
// InitializeInjectionNvtx2.
#include <benchmark/benchmark.h>
#include <nvtx3/nvToolsExt.h>

#include <string>

#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"

namespace {

// Counted as in a process gpuwatch attached to: the session's stats, with
// the event trace on (the default: each range is a slice, two clock reads and
// a trace record) or off (GPUWATCH_TRACE_EVENTS=0).
struct Counting {
  gpuwatch::Tracker tracker;
  gpuwatch::Trace trace{gpuwatch::Trace::kDefaultCapacity};
  gpuwatch::PhaseStats stats{&gpuwatch::ProcessPhases(), &tracker};
  Counting() { gpuwatch::ProcessPhases().SetStats(&stats); }
};
Counting& Counted(bool traced = false) {
  static auto* counting = new Counting();
  counting->stats.SetTrace(traced ? &counting->trace : nullptr);
  return *counting;
}

// nvtxRangePushA + nvtxRangePop, at depth `state.range(0)` (ranges open
// around it), on one or two threads.
void BM_NvtxPushPop(benchmark::State& state) {
  Counted();
  for (int64_t i = 0; i < state.range(0); ++i) nvtxRangePushA("outer");
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    nvtxRangePushA("forward");
    nvtxRangePop();
  }
  for (int64_t i = 0; i < state.range(0); ++i) nvtxRangePop();
}
BENCHMARK(BM_NvtxPushPop)->Arg(0)->Arg(3)->ThreadRange(1, 2)->UseRealTime();

// The same with the event trace on: every range a slice.
void BM_NvtxPushPopTraced(benchmark::State& state) {
  Counted(true);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    nvtxRangePushA("forward");
    nvtxRangePop();
  }
  Counted(false);
}
BENCHMARK(BM_NvtxPushPopTraced);

// The same through a registered string (no text to hash).
void BM_NvtxPushPopRegistered(benchmark::State& state) {
  Counted();
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("bench");
  static nvtxStringHandle_t name = nvtxDomainRegisterStringA(domain, "forward");
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);
  }
}
BENCHMARK(BM_NvtxPushPopRegistered);

// gpuwatch_phase_push/pop's work (PushPhase/PopPhase), without NVTX.
void BM_PhasePushPop(benchmark::State& state) {
  Counted();
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    gpuwatch::PushPhase("forward");
    gpuwatch::PopPhase();
  }
}
BENCHMARK(BM_PhasePushPop);

// The parts: interning a name seen before, and the phase read on every
// allocation, copy and launch.
void BM_PhasePart_InternName(benchmark::State& state) {
  gpuwatch::PhaseTable& table = gpuwatch::ProcessPhases();
  const std::string name = "forward";
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    benchmark::DoNotOptimize(table.InternName(name));
  }
}
BENCHMARK(BM_PhasePart_InternName);

void BM_PhasePart_CurrentPhase(benchmark::State& state) {
  gpuwatch::PushPhase("forward");
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    benchmark::DoNotOptimize(gpuwatch::CurrentPhase());
  }
  gpuwatch::PopPhase();
}
BENCHMARK(BM_PhasePart_CurrentPhase);

// A device allocation and its free in the tracker, made in a phase
// (state.range(0) 1: counted in its path, and its (path, site) live bytes
// kept for the site that held the most at the path's peak) or outside every
// phase (0). The peak is reached once: this is the steady state.
void BM_PhaseAllocFree(benchmark::State& state) {
  Counting& c = Counted();
  gpuwatch::PushPhase("alloc");
  const uint32_t phase = state.range(0) != 0 ? gpuwatch::CurrentPhase() : 0;
  gpuwatch::AllocEvent e;
  e.stack_id = 3;
  e.phase = phase;
  e.size = 4096;
  uint64_t address = 0x100000000;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    e.address = address;
    c.tracker.OnAlloc(e);
    c.tracker.OnFree(address);
    address += 0x1000;
  }
  gpuwatch::PopPhase();
}
BENCHMARK(BM_PhaseAllocFree)->Arg(0)->Arg(1);

// An allocation in a phase that raises the phase's peak by more than 1/64,
// so that the site holding the most is found again: one pass over the
// (path, site) cells, of which state.range(0) are in use.
void BM_PhaseTopSiteCapture(benchmark::State& state) {
  gpuwatch::Tracker tracker;
  gpuwatch::PhaseStats stats(&gpuwatch::ProcessPhases(), &tracker);
  tracker.SetPhases(&stats);
  gpuwatch::PushPhase("capture");
  gpuwatch::AllocEvent e;
  e.phase = gpuwatch::CurrentPhase();
  e.size = 1;
  uint64_t address = 0x100000000;
  for (int64_t i = 0; i < state.range(0); ++i) {  // the cells in use, 1 byte each
    e.address = address++;
    e.stack_id = static_cast<uint32_t>(i + 1);
    tracker.OnAlloc(e);
  }
  e.stack_id = 1;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    e.address = address++;
    e.size = tracker.DeviceCurrentBytes() / 32 + 1;  // +3%: a new capture each time
    tracker.OnAlloc(e);
  }
  gpuwatch::PopPhase();
}
BENCHMARK(BM_PhaseTopSiteCapture)->Arg(10)->Arg(1000)->Arg(10000)->Iterations(300);

}  // namespace

BENCHMARK_MAIN();
