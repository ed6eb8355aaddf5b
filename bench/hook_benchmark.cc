// What gpuwatch's core adds to each CUDA event, measured on the real classes
// (libgpuwatch/), without CUPTI: the work interpose/callbacks/callbacks.cc does per
// allocation, free, copy and launch once it has parsed the callback; the live
// table's insert and erase from 1,000 to 10,000,000 entries; and the memory
// each live allocation and each interned stack costs.
//
//   hook_benchmark --benchmark_filter=Hook           # per-event costs
//   hook_benchmark --benchmark_filter=Table          # insert / erase scaling
//   hook_benchmark --benchmark_filter=Memory         # bytes per allocation / stack
//
// The end-to-end figures (CUPTI dispatch included, on the simulator) come from
// bench/overhead.py; docs/BENCHMARKS.md puts the two together.
#include <malloc.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "libgpuwatch/base/address_map.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch {
namespace {

// GPUWATCH_DEPTH's default, and the frames a capture unwinds on top of it
// (gpuwatch's, CUPTI's, the driver's and the runtime's, left out of the stored
// stack: CaptureUserStack): 7 on the simulator (the report's `tool_frames`).
constexpr int kUserDepth = 32;
constexpr int kToolFrames = 7;
constexpr int kCaptureFrames = kUserDepth + kToolFrames;
// The application's stack under the CUDA call: deeper than what is captured,
// so every capture is full.
constexpr int kRecursion = 48;

// Device-like addresses: 512-byte aligned, as cudaMalloc returns them.
constexpr uint64_t kBase = 0x7f0000000000ULL;
constexpr uint64_t Addr(uint64_t i) { return kBase + i * 512; }

// The live table stores this per slot: the address (key) and a
// LiveAlloc packed in 16 bytes (tracker.cc's LiveRecord).
constexpr size_t kSlotBytes = sizeof(uint64_t) + 16;

AllocEvent Alloc(uint64_t i, uint32_t stack_id) {
  AllocEvent e;
  e.address = Addr(i);
  e.size = 4096 + (i & 1023) * 512;
  e.kind = MemKind::kDevice;
  e.stack_id = stack_id;
  return e;
}

// Runs `body` at the bottom of a `depth`-deep recursion of real frames, so
// that a capture inside it walks a realistic stack and only the loop is timed.
template <typename Body>
__attribute__((noinline)) void AtDepth(int depth, Body& body) {
  if (depth > 0) {
    AtDepth(depth - 1, body);
    asm volatile("" ::: "memory");  // keeps every level a real frame
    return;
  }
  body();
}

// What callbacks.cc's CaptureSite does: capture, then intern, before any lock.
__attribute__((noinline)) uint32_t CaptureSite(StackTable* stacks) {
  uintptr_t pcs[kMaxCaptureDepth];
  const int n = CaptureStack(pcs, kCaptureFrames, 0);
  const int tool = std::min(n, kToolFrames);  // stored from the user's frame on
  return stacks->Intern(pcs + tool, n - tool);
}

StackTable& SharedStacks() {
  static StackTable& table = *new StackTable(1u << 20, size_t{256} << 20);
  return table;
}

bool RequireLibunwind(benchmark::State& state) {
  if (FallbackUnwindMethod() != UnwindMethod::kLibunwind) {
    state.SkipWithError("libunwind.so.8 not available: captures would use the slow fallback");
    return false;
  }
  return true;
}

// --- Per-event hook costs ---------------------------------------------------
//
// Each benchmark does what one callback does for one event, in steady state:
// the stack was interned before (the 1,001st allocation at a site), and 1,000
// allocations per thread stay live while others come and go.

constexpr uint64_t kLive = 1000;

Tracker& SharedTracker() {
  static Tracker& tracker = *new Tracker();
  return tracker;
}

// One allocation plus one free: Tracker::OnAlloc (clock, thread id, shard
// lock, table insert, per-kind/per-site/peak accounting) and OnFree.
void BM_HookAllocFree_NoStack(benchmark::State& state) {
  Tracker& tracker = SharedTracker();
  const uint64_t first = static_cast<uint64_t>(state.thread_index()) << 32;
  uint64_t next = first;
  for (; next < first + kLive; ++next) tracker.OnAlloc(Alloc(next, 0));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    tracker.OnAlloc(Alloc(next, 0));
    benchmark::DoNotOptimize(tracker.OnFree(Addr(next - kLive)));
    ++next;
  }
  for (uint64_t i = next - kLive; i < next; ++i) tracker.OnFree(Addr(i));
  state.counters["events"] = benchmark::Counter(
      2, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_HookAllocFree_NoStack)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

// The same with a 32-frame native stack (39 pcs captured: depth +
// kToolFrames, as CaptureUserStack does on the simulator; 32 stored) captured
// and interned at the allocation.
void BM_HookAllocFree_Stack32(benchmark::State& state) {
  if (!RequireLibunwind(state)) return;
  Tracker& tracker = SharedTracker();
  StackTable& stacks = SharedStacks();
  const uint64_t first = static_cast<uint64_t>(state.thread_index()) << 32;
  uint64_t next = first;
  auto body = [&] {
    for (; next < first + kLive; ++next) tracker.OnAlloc(Alloc(next, CaptureSite(&stacks)));
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
      tracker.OnAlloc(Alloc(next, CaptureSite(&stacks)));
      benchmark::DoNotOptimize(tracker.OnFree(Addr(next - kLive)));
      ++next;
    }
  };
  AtDepth(kRecursion, body);
  for (uint64_t i = next - kLive; i < next; ++i) tracker.OnFree(Addr(i));
}
BENCHMARK(BM_HookAllocFree_Stack32)->ThreadRange(1, 2)->UseRealTime();

// The parts of the above, one at a time (single thread).
void BM_HookPart_Capture39(benchmark::State& state) {
  if (!RequireLibunwind(state)) return;
  auto body = [&] {
    uintptr_t pcs[kMaxCaptureDepth];
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
      benchmark::DoNotOptimize(CaptureStack(pcs, kCaptureFrames, 0));
    }
  };
  AtDepth(kRecursion, body);
}
BENCHMARK(BM_HookPart_Capture39);

void BM_HookPart_CaptureFrames(benchmark::State& state) {
  if (!RequireLibunwind(state)) return;
  const int frames = static_cast<int>(state.range(0));
  auto body = [&] {
    uintptr_t pcs[kMaxCaptureDepth];
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
      benchmark::DoNotOptimize(CaptureStack(pcs, frames, 0));
    }
  };
  AtDepth(80, body);
  state.counters["ns_per_frame"] = benchmark::Counter(
      frames, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_HookPart_CaptureFrames)->Arg(8)->Arg(16)->Arg(32)->Arg(39)->Arg(64);

void BM_HookPart_InternHit32(benchmark::State& state) {
  StackTable& stacks = SharedStacks();
  uintptr_t pcs[kUserDepth];
  for (int i = 0; i < kUserDepth; ++i)
    pcs[i] = 0x555555554000ULL + 977ULL * static_cast<uint64_t>(i);
  stacks.Intern(pcs, kUserDepth);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    benchmark::DoNotOptimize(stacks.Intern(pcs, kUserDepth));
  }
}
BENCHMARK(BM_HookPart_InternHit32);

void BM_HookPart_OnAlloc(benchmark::State& state) {
  // Insert only: the table grows by one per iteration (amortised doubling
  // included). BM_Table* below separates growth from steady state.
  Tracker& tracker = *new Tracker();
  uint64_t next = 0;
  for (auto _ : state) tracker.OnAlloc(Alloc(next++, 1));  // NOLINT: the idiom
  delete &tracker;                                         // after the loop: not timed
}
BENCHMARK(BM_HookPart_OnAlloc);

// gpuwatch_live(): every device (counters: range 0), or one device (a walk
// of the live table), with range(0) live allocations spread over 2 devices.
void BM_LiveQuery(benchmark::State& state) {
  Tracker& tracker = *new Tracker();
  const auto live = static_cast<uint64_t>(state.range(0));
  for (uint64_t i = 0; i < live; ++i) {
    AllocEvent e = Alloc(i, 1);
    e.device = static_cast<int32_t>(i & 1);
    tracker.OnAlloc(e);
  }
  const int device = static_cast<int>(state.range(1));
  uint64_t bytes = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    bytes += tracker.Live(1u << static_cast<int>(MemKind::kDevice), device).bytes;
  }
  benchmark::DoNotOptimize(bytes);
  delete &tracker;
}
BENCHMARK(BM_LiveQuery)
    ->ArgsProduct({{1000, 1000000}, {-1, 0}})
    ->ArgNames({"live", "device"})
    ->Unit(benchmark::kMicrosecond);

// A per-test gate's question (gpuwatch_live_since()'s walk): range(0) live
// allocations over 10,000 sites, of which the last 100 came after the test's
// point. The walk reads every live record; the rows are the sites since.
void BM_LiveSince(benchmark::State& state) {
  Tracker& tracker = *new Tracker();
  const auto live = static_cast<uint64_t>(state.range(0));
  for (uint64_t i = 0; i + 100 < live; ++i) tracker.OnAlloc(Alloc(i, 1 + i % 10000));
  const Tracker::Point point = tracker.NewPoint();
  for (uint64_t i = live - 100; i < live; ++i) tracker.OnAlloc(Alloc(i, 1 + i % 10000));
  size_t rows = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    rows += tracker.LiveSince(point, {1u << static_cast<int>(MemKind::kDevice)})[0].size();
  }
  benchmark::DoNotOptimize(rows);
  delete &tracker;
}
BENCHMARK(BM_LiveSince)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

void BM_HookPart_NowNs(benchmark::State& state) {
  Tracker& tracker = SharedTracker();
  for (auto _ : state) benchmark::DoNotOptimize(tracker.NowNs());  // NOLINT: the idiom
}
BENCHMARK(BM_HookPart_NowNs);

// Calibration: what the building blocks of the hot path cost on this machine.
void BM_Calibrate_AtomicFetchAdd(benchmark::State& state) {
  static std::atomic<uint64_t> counter{0};
  for (auto _ : state) counter.fetch_add(1, std::memory_order_relaxed);  // NOLINT: the idiom
}
BENCHMARK(BM_Calibrate_AtomicFetchAdd);

void BM_Calibrate_MutexLockUnlock(benchmark::State& state) {
  static std::mutex mu;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    std::lock_guard<std::mutex> lock(mu);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Calibrate_MutexLockUnlock);

void BM_HookPart_OnFreeThenAlloc_NoAccounting(benchmark::State& state) {
  // The live table alone under a mutex: the floor of OnAlloc + OnFree
  // without the per-kind, per-site and peak counters.
  AddressMap<LiveAlloc> map;
  std::mutex mu;
  LiveAlloc v;
  LiveAlloc old;
  bool dropped = false;
  uint64_t next = 0;
  for (; next < kLive; ++next) map.Upsert(Addr(next), v, &old, &dropped);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    {
      std::lock_guard<std::mutex> lock(mu);
      v.address = Addr(next);
      map.Upsert(v.address, v, &old, &dropped);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      benchmark::DoNotOptimize(map.Erase(Addr(next - kLive), &old));
    }
    ++next;
  }
}
BENCHMARK(BM_HookPart_OnFreeThenAlloc_NoAccounting);

// A kernel launch: Tracker::OnLaunch and KernelTable::OnLaunch (no stack).
void BM_HookLaunch(benchmark::State& state) {
  Tracker& tracker = SharedTracker();
  static KernelTable& kernels = *new KernelTable();
  static const char* const kNames[] = {"_Z4stepPf", "_Z6reducePfS_", "_Z4gemmPKfS0_Pf",
                                       "_Z7softmaxPf"};
  size_t i = static_cast<size_t>(state.thread_index());
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    tracker.OnLaunch();
    kernels.OnLaunch(kNames[i++ & 3]);
  }
}
BENCHMARK(BM_HookLaunch)->ThreadRange(1, 2)->UseRealTime();

// A copy: at ENTER the stack is captured and the call registered under its
// correlation id (Transfers::OnCopyCall); at EXIT Tracker::OnCopy; later the
// activity record joins it (OnCopyRecord). Records trail the calls by a
// buffer's worth (about 8,000 MEMCPY records fill CUPTI's 1 MiB buffer).
constexpr uint32_t kRecordLag = 8192;

template <bool kWithStack>
void CopyLoop(benchmark::State& state) {
  Tracker& tracker = SharedTracker();
  Transfers transfers;
  StackTable& stacks = SharedStacks();
  uint32_t correlation = 1;
  auto record_for = [](uint32_t c) {
    CopyRecord r;
    r.correlation = c;
    r.runtime_correlation = c;
    r.bytes = 4096;
    r.kind = CopyKind::kHostToDevice;
    r.host = HostKind::kPageable;
    r.start_ns = 1000ULL * c;
    r.end_ns = r.start_ns + 500;
    return r;
  };
  auto body = [&] {
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
      CopyCall call;
      call.correlation = correlation;
      call.bytes = 4096;
      call.kind = CopyKind::kHostToDevice;
      call.stack_id = kWithStack ? CaptureSite(&stacks) : 0;
      transfers.OnCopyCall(call, true);
      tracker.OnCopy(CopyEvent{call.bytes, call.kind, false});
      if (correlation > kRecordLag) transfers.OnCopyRecord(record_for(correlation - kRecordLag));
      ++correlation;
    }
  };
  AtDepth(kRecursion, body);
}

void BM_HookCopy_NoStack(benchmark::State& state) { CopyLoop<false>(state); }
BENCHMARK(BM_HookCopy_NoStack);

void BM_HookCopy_Stack32(benchmark::State& state) {
  if (!RequireLibunwind(state)) return;
  CopyLoop<true>(state);
}
BENCHMARK(BM_HookCopy_Stack32);

// Allocations that keep raising the device peak (a warm-up, a growing cache)
// from `sites` distinct sites. Up to 1,024 sites, every new peak walks all of
// them under peak_mu_ (Tracker::MaybeCapturePeak); above, captures are
// rate-limited to 1/64 of growth.
void BM_HookAllocGrowingPeak(benchmark::State& state) {
  const auto sites = static_cast<uint32_t>(state.range(0));
  constexpr uint64_t kAllocs = 100000;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    state.PauseTiming();
    auto* tracker = new Tracker();
    for (uint32_t s = 1; s <= sites; ++s) {  // every site has allocated once, then freed
      tracker->OnAlloc(Alloc(s, s));
      tracker->OnFree(Addr(s));
    }
    state.ResumeTiming();
    for (uint64_t i = 0; i < kAllocs; ++i) {
      tracker->OnAlloc(Alloc(sites + 1 + i, 1 + static_cast<uint32_t>(i % sites)));
    }
    state.PauseTiming();
    delete tracker;
    state.ResumeTiming();
  }
  state.counters["ns_per_alloc"] = benchmark::Counter(
      kAllocs, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_HookAllocGrowingPeak)
    ->Arg(1)
    ->Arg(64)
    ->Arg(1000)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// --- The live table: insert and erase from 1,000 to 10,000,000 -----------
//
// Tracker::OnAlloc/OnFree with no stack, all entries live at once: the cost
// per operation as the table grows (doubling included) and as it drains.
// Flat per-op figures mean no operation is worse than O(1) amortised.

void SetPerOp(benchmark::State& state, int64_t ops) {
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
}

void BM_TableInsert(benchmark::State& state) {
  const int64_t n = state.range(0);
  double worst_us = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    state.PauseTiming();
    auto* tracker = new Tracker();
    state.ResumeTiming();
    for (int64_t i = 0; i < n; ++i) tracker->OnAlloc(Alloc(static_cast<uint64_t>(i), 1));
    state.PauseTiming();
    // The worst single insert: a shard doubling rehashes under its lock.
    // Measured separately, one clock read per insert, on a fresh tracker.
    delete tracker;
    tracker = new Tracker();
    for (int64_t i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      tracker->OnAlloc(Alloc(static_cast<uint64_t>(i), 1));
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      worst_us = std::max(worst_us, us);
    }
    delete tracker;
    state.ResumeTiming();
  }
  SetPerOp(state, n);
  state.counters["worst_insert_us"] = worst_us;
}

void BM_TableErase(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    state.PauseTiming();
    auto* tracker = new Tracker();
    for (int64_t i = 0; i < n; ++i) tracker->OnAlloc(Alloc(static_cast<uint64_t>(i), 1));
    state.ResumeTiming();
    // Freed in a different order than allocated: a training step frees what
    // it allocated in no particular order.
    for (int64_t i = 0; i < n; ++i) {
      const auto j = static_cast<uint64_t>((i * 7919) % n);  // 7919 is prime: a permutation
      benchmark::DoNotOptimize(tracker->OnFree(Addr(j)));
    }
    state.PauseTiming();
    delete tracker;
    state.ResumeTiming();
  }
  SetPerOp(state, n);
}

// Steady state at `live` entries: one insert and one erase per iteration.
void BM_TableSteady(benchmark::State& state) {
  const auto live = static_cast<uint64_t>(state.range(0));
  auto* tracker = new Tracker();
  for (uint64_t i = 0; i < live; ++i) tracker->OnAlloc(Alloc(i, 1));
  uint64_t next = live;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    tracker->OnAlloc(Alloc(next, 1));
    benchmark::DoNotOptimize(tracker->OnFree(Addr(next - live)));
    ++next;
  }
  delete tracker;
}

// The table alone (AddressMap<LiveAlloc>, no lock, no accounting).
void BM_TableRawAddressMap(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    auto* map = new AddressMap<LiveAlloc>();
    LiveAlloc v;
    LiveAlloc old;
    bool dropped = false;
    for (int64_t i = 0; i < n; ++i) {
      v.address = Addr(static_cast<uint64_t>(i));
      map->Upsert(v.address, v, &old, &dropped);
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto j = static_cast<uint64_t>((i * 7919) % n);
      benchmark::DoNotOptimize(map->Erase(Addr(j), &old));
    }
    state.PauseTiming();  // the destructor's free is not timed
    delete map;
    state.ResumeTiming();
  }
  SetPerOp(state, 2 * n);
}

void TableSizes(benchmark::internal::Benchmark* b) {
  for (int64_t n = 1000; n <= 10000000; n *= 10) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_TableInsert)->Apply(TableSizes)->Iterations(1);
BENCHMARK(BM_TableErase)->Apply(TableSizes)->Iterations(1);
BENCHMARK(BM_TableSteady)->Apply(TableSizes)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TableRawAddressMap)->Apply(TableSizes)->Iterations(1);

// --- Memory ------------------------------------------------------------------

size_t HeapBytes() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // in use from the arena, plus mmap'ed blocks
}

size_t RssBytes() {
  long pages = 0;
  long resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Heap bytes per live allocation in the live table: the open-addressing slot
// (8-byte key + LiveAlloc) divided by the load factor, which moves between
// 7/16 (just after a doubling) and 7/8 (just before). Sizes 1.5 x 10^k sit
// mid-way; the counters give the slot size and the load.
void BM_MemoryPerLiveAlloc(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  double per_alloc = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    auto* tracker = new Tracker();
    const size_t before = HeapBytes();
    for (uint64_t i = 0; i < n; ++i) tracker->OnAlloc(Alloc(i, 1 + (i % 10000)));
    per_alloc = static_cast<double>(HeapBytes() - before) / static_cast<double>(n);
    delete tracker;
  }
  state.counters["bytes_per_live_alloc"] = per_alloc;
  state.counters["slot_bytes"] = static_cast<double>(kSlotBytes);
  state.counters["load_factor"] = kSlotBytes / per_alloc;
}
BENCHMARK(BM_MemoryPerLiveAlloc)
    ->Arg(1000)
    ->Arg(1500)
    ->Arg(10000)
    ->Arg(15000)
    ->Arg(100000)
    ->Arg(150000)
    ->Arg(1000000)
    ->Arg(1500000)
    ->Arg(10000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Per interned stack: the arena record (8-byte header + 8 per pc) and the
// index pages touched (hash slots and id array, mapped up front for the 1M
// cap and faulted in as used), from the resident set. 32 pcs: what
// GPUWATCH_DEPTH=32 stores (the tool frames above the user's are not stored).
void BM_MemoryPerStack(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  const int pcs_per_stack = static_cast<int>(state.range(1));
  double arena = 0;
  double resident = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    const size_t rss_before = RssBytes();
    auto* table = new StackTable(1u << 20, size_t{256} << 20);  // gpuwatch's caps
    std::mt19937_64 rng(n);
    std::vector<uintptr_t> pcs(static_cast<size_t>(pcs_per_stack));
    for (uint32_t i = 0; i < n; ++i) {
      for (auto& pc : pcs) pc = 0x7f0000000000ULL + (rng() & 0xFFFFFFF);
      table->Intern(pcs.data(), pcs_per_stack);
    }
    arena = static_cast<double>(table->bytes_used()) / n;
    resident = static_cast<double>(RssBytes() - rss_before) / n;
    if (table->size() != n) state.SkipWithError("not every stack was stored");
    delete table;
  }
  state.counters["arena_bytes_per_stack"] = arena;
  state.counters["resident_bytes_per_stack"] = resident;
}
BENCHMARK(BM_MemoryPerStack)
    ->Args({1000, 32})
    ->Args({10000, 32})
    ->Args({100000, 32})
    ->Args({1000000, 32})  // 256 MiB (the arena cap) holds about 1,016,000 records of 32 pcs
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuwatch

BENCHMARK_MAIN();
