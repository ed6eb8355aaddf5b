// Costs of the stack pipeline: capture (hot path), interning (hot path) and
// symbolization (report time).
//
//   stack_benchmark --benchmark_filter=Capture
//
// Capture is measured 32 frames deep from a recursion 40 deep, the default
// GPUWATCH_DEPTH under a realistic stack.
#include <link.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/stacks/unwind.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {
namespace {

constexpr int kDepth = 32;
constexpr int kRecursion = 40;

__attribute__((noinline)) int CaptureAtDepth(int depth, UnwindMethod method, uintptr_t* pcs) {
  int n = 0;
  if (depth == 0) {
    n = CaptureStackWith(method, pcs, kDepth, 0);
  } else {
    n = CaptureAtDepth(depth - 1, method, pcs);
  }
  asm volatile("" ::: "memory");  // keeps every level a real frame
  return n;
}

// The loop runs at the bottom of the recursion so that only the capture is
// timed.
__attribute__((noinline)) void CaptureLoop(int depth, benchmark::State& state,
                                           UnwindMethod method) {
  if (depth > 0) {
    CaptureLoop(depth - 1, state, method);
    asm volatile("" ::: "memory");
    return;
  }
  uintptr_t pcs[kDepth];
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    const int n = CaptureStackWith(method, pcs, kDepth, 0);
    benchmark::DoNotOptimize(n);
    if (n != kDepth) state.SkipWithError("short stack");
  }
}

void BM_CaptureStack(benchmark::State& state) {
  const auto method = static_cast<UnwindMethod>(state.range(0));
  if (method != UnwindMethod::kGccUnwind && FallbackUnwindMethod() != UnwindMethod::kLibunwind) {
    state.SkipWithError("libunwind not available");
    return;
  }
  state.SetLabel(UnwindMethodName(method));
  CaptureLoop(kRecursion, state, method);
}
BENCHMARK(BM_CaptureStack)
    ->Arg(static_cast<int>(UnwindMethod::kCfi))
    ->Arg(static_cast<int>(UnwindMethod::kLibunwind))
    ->Arg(static_cast<int>(UnwindMethod::kGccUnwind))
    ->ThreadRange(1, 2)
    ->UseRealTime();

// --- Interning -----------------------------------------------------------

std::vector<uintptr_t> MakeStack(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uintptr_t> s(kDepth);
  for (auto& pc : s) pc = 0x7f0000000000ULL + (rng() & 0xFFFFFF);
  return s;
}

// Stored stacks looked up over and over: the steady state of a training
// loop. 1,000 stacks stay in cache; 100,000 stacks (more call sites than any
// real job) pay a cache and TLB miss on the slot and on the record.
struct ExistingStacks {
  explicit ExistingStacks(int count)
      : table(1 << 18, 256 << 20), count(count), pcs(static_cast<size_t>(count) * kDepth) {
    for (int i = 0; i < count; ++i) {
      const std::vector<uintptr_t> s = MakeStack(i);
      std::copy(s.begin(), s.end(), pcs.begin() + static_cast<ptrdiff_t>(i) * kDepth);
      table.Intern(Stack(i), kDepth);
    }
  }
  const uintptr_t* Stack(size_t i) const { return pcs.data() + i * kDepth; }
  StackTable table;
  size_t count;
  // One contiguous array read in order: the hardware prefetcher keeps the
  // input hot, as a capture buffer on the caller's stack would be, so the
  // figure is the table's own cost.
  std::vector<uintptr_t> pcs;
};

void BM_InternExisting(benchmark::State& state) {
  // Leaked, like gpuwatch's own table; built once per size, before the timed
  // loops (static initialisation is thread-safe).
  static ExistingStacks& small = *new ExistingStacks(1000);
  static ExistingStacks& large = *new ExistingStacks(100000);
  ExistingStacks& existing = state.range(0) == 1000 ? small : large;
  size_t i = static_cast<size_t>(state.thread_index()) * existing.count / 2;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    benchmark::DoNotOptimize(existing.table.Intern(existing.Stack(i), kDepth));
    if (++i == existing.count) i = 0;
  }
}
BENCHMARK(BM_InternExisting)->Arg(1000)->Arg(100000)->ThreadRange(1, 2)->UseRealTime();

// Every call interns a stack never seen before (the first allocation at
// each new site). Fixed iteration count so the table's cap is never hit.
constexpr int kNewIterations = 200000;
StackTable* g_new_table = nullptr;

void BM_InternNew(benchmark::State& state) {
  std::vector<uintptr_t> s = MakeStack(42);
  uint64_t counter = static_cast<uint64_t>(state.thread_index()) << 40;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    s[0] = ++counter;
    s[5] = counter * 7;
    benchmark::DoNotOptimize(g_new_table->Intern(s.data(), kDepth));
  }
  if (g_new_table->dropped() != 0) state.SkipWithError("table full");
}
BENCHMARK(BM_InternNew)
    ->Setup([](const benchmark::State&) { g_new_table = new StackTable(1 << 20, 512 << 20); })
    ->Teardown([](const benchmark::State&) {
      delete g_new_table;
      g_new_table = nullptr;
    })
    ->Iterations(kNewIterations)
    ->ThreadRange(1, 2)
    ->UseRealTime();

// --- Symbolization -------------------------------------------------------

// `count` distinct pcs spread evenly over the executable segments of the
// modules whose path contains `needle` ("" = the main program).
std::vector<uintptr_t> PcsIn(const char* needle, size_t count) {
  struct Ctx {
    const char* needle;
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  } ctx{needle, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* c = static_cast<Ctx*>(data);
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const bool match =
            c->needle[0] == '\0' ? name.empty() : name.find(c->needle) != std::string::npos;
        if (!match) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0) {
            c->ranges.emplace_back(info->dlpi_addr + ph.p_vaddr, ph.p_memsz);
          }
        }
        return 0;
      },
      &ctx);
  uintptr_t total = 0;
  for (const auto& r : ctx.ranges) total += r.second;
  std::vector<uintptr_t> pcs;
  if (total == 0) return pcs;
  const uintptr_t stride = std::max<uintptr_t>(1, total / count);
  for (const auto& [start, size] : ctx.ranges) {
    for (uintptr_t off = 1; off < size && pcs.size() < count; off += stride)
      pcs.push_back(start + off);
  }
  return pcs;
}

// A fresh Symbolizer per iteration: the cost of a report's first pass over
// 10,000 distinct pcs, DWARF loading included.
void SymbolizeDistinct(benchmark::State& state, const char* needle) {
  const std::vector<uintptr_t> pcs = PcsIn(needle, 10000);
  if (pcs.size() < 10000) {
    state.SkipWithError("not enough code to sample");
    return;
  }
  size_t with_line = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    Symbolizer symbolizer;
    with_line = 0;
    for (const uintptr_t pc : pcs) with_line += symbolizer.Symbolize(pc).line > 0;
  }
  state.counters["pcs"] = static_cast<double>(pcs.size());
  state.counters["with_line"] = static_cast<double>(with_line);
  state.counters["ns_per_pc"] = benchmark::Counter(
      static_cast<double>(pcs.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Symbolize10kDistinct_Executable(benchmark::State& state) { SymbolizeDistinct(state, ""); }
BENCHMARK(BM_Symbolize10kDistinct_Executable)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Symbolize10kDistinct_Libstdcxx(benchmark::State& state) {
  SymbolizeDistinct(state, "libstdc++");
}
BENCHMARK(BM_Symbolize10kDistinct_Libstdcxx)->Unit(benchmark::kMillisecond)->UseRealTime();

// Cache hits: the same sites seen again in other stacks of the report.
void BM_SymbolizeCached(benchmark::State& state) {
  const std::vector<uintptr_t> pcs = PcsIn("", 10000);
  Symbolizer symbolizer;
  for (const uintptr_t pc : pcs) symbolizer.Symbolize(pc);
  size_t i = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    benchmark::DoNotOptimize(&symbolizer.Symbolize(pcs[i]));
    if (++i == pcs.size()) i = 0;
  }
}
BENCHMARK(BM_SymbolizeCached);

}  // namespace
}  // namespace gpuwatch

BENCHMARK_MAIN();
