// The exit report of a big process: 1,000,000 live allocations over 10,000
// allocation sites, each site a deep stack, built through the library's own
// path (libgpuwatch/session: a Session's tables and a SessionReport, as
// interpose/agent/reports.cc's WriteReport does), phase by phase: the tables'
// snapshots, the analysis and the JSON (symbolization of every site
// included), the leaked bytes, WriteFileAtomically (fsync'ed) and the
// summary. `stacks:1` symbolizes with a fresh Symbolizer per report (a
// process's first report); `stacks:2` with one kept from report to report,
// as WriteReport keeps it for checkpoints and the exit report.
//
//   report_benchmark                                  # all variants
//   report_benchmark --benchmark_filter='live:1000000/sites:10000/stacks:1'
//
// Stacks are captured for real (libunwind) from 10,000 distinct call paths
// in this executable, which has debug information, so the report holds what
// a real one would: 44 frames per site, symbolized with file:line
// (frames_per_site counts them). The paths share their pcs (a few hundred
// distinct ones), so symbolization is cheap here; stack_benchmark's
// BM_Symbolize10kDistinct gives the cost per distinct pc to add.
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libgpuwatch/session/session.h"
#include "libgpuwatch/stacks/unwind.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {
namespace {

constexpr int kPcsPerStack = 44;

// Real stacks, captured: each site is a distinct path through kLevels levels
// of eight functions (Level<0..7>), each calling the next from one of eight
// call sites, under kPad plain frames; so the innermost frames differ from
// site to site and the outer ones are shared, as in a program whose
// allocations come from many call paths. 8^5 = 32,768 paths.
constexpr int kLevels = 5;
constexpr int kPad = 36;

struct PathContext {
  StackTable* table;
  uint32_t path;
  uint32_t id;
};

__attribute__((noinline)) void CaptureHere(PathContext* c) {
  uintptr_t pcs[kMaxCaptureDepth];
  const int n = CaptureStack(pcs, kPcsPerStack, 0);
  c->id = c->table->Intern(pcs, n);
  asm volatile("" ::: "memory");
}

template <int K>
__attribute__((noinline)) void Level(PathContext* c, int level) {
  if (level == kLevels) {
    CaptureHere(c);
  } else {
    switch ((c->path >> (3 * level)) & 7) {
      case 0:
        Level<0>(c, level + 1);
        break;
      case 1:
        Level<1>(c, level + 1);
        break;
      case 2:
        Level<2>(c, level + 1);
        break;
      case 3:
        Level<3>(c, level + 1);
        break;
      case 4:
        Level<4>(c, level + 1);
        break;
      case 5:
        Level<5>(c, level + 1);
        break;
      case 6:
        Level<6>(c, level + 1);
        break;
      default:
        Level<7>(c, level + 1);
        break;
    }
  }
  asm volatile("" ::: "memory");  // no tail calls: every level is a frame
}

__attribute__((noinline)) void Pad(PathContext* c, int n) {
  if (n > 0) {
    Pad(c, n - 1);
  } else {
    Level<0>(c, 0);
  }
  asm volatile("" ::: "memory");
}

// Counts occurrences of `needle` in `text`.
// Frames per listed site: the entries of every "stack" array (indices into
// the report's frame table) over the number of such arrays.
double FramesPerSite(const std::string& json) {
  static constexpr char kKey[] = "\"stack\": [";
  size_t sites = 0;
  size_t frames = 0;
  for (size_t at = json.find(kKey); at != std::string::npos; at = json.find(kKey, at + 1)) {
    ++sites;
    const size_t open = at + sizeof(kKey) - 1;
    const size_t close = json.find(']', open);
    if (close == std::string::npos) break;
    const std::string_view body(json.data() + open, close - open);
    if (body.find_first_of("0123456789") == std::string_view::npos) continue;
    frames += 1 + static_cast<size_t>(std::count(body.begin(), body.end(), ','));
  }
  return static_cast<double>(frames) / static_cast<double>(std::max<size_t>(1, sites));
}

// GPUWATCH_DEPTH=32 (or 0: no stack table), no event trace.
Config BenchConfig(bool with_stacks) {
  Config config;
  config.depth = with_stacks ? 32 : 0;
  config.trace_events = 0;
  return config;
}

struct Fixture {
  Session session;
  Recording& r = session.recording();
  Tracker& tracker = r.tracker;
  Transfers& transfers = r.transfers;
  KernelTable& kernels = r.kernels;
  Timeline& timeline = r.timeline;
  bool ok = false;

  Fixture(int64_t live, int64_t sites, bool with_stacks) : session(BenchConfig(with_stacks)) {
    if (FallbackUnwindMethod() != UnwindMethod::kLibunwind) return;
    std::vector<uint32_t> ids;
    for (int64_t site = 0; site < sites; ++site) {
      if (session.stacks() == nullptr) {  // GPUWATCH_DEPTH=0: sites without frames
        ids.push_back(static_cast<uint32_t>(site + 1));
        continue;
      }
      // Spread over the path space so that every level varies.
      PathContext c{session.stacks(), static_cast<uint32_t>(site * 32768 / sites), 0};
      Pad(&c, kPad);
      ids.push_back(c.id);
    }
    if (session.stacks() != nullptr && session.stacks()->size() != static_cast<uint32_t>(sites)) {
      return;
    }
    // 95% device memory, 5% pinned host; sizes 512 B .. 4 MiB. Every tenth
    // allocation is freed again, so that the totals are not trivial.
    uint64_t address = 0x7f0000000000ULL;
    for (int64_t i = 0; i < live + live / 10; ++i) {
      AllocEvent e;
      e.address = address;
      e.size = 512ULL << (i % 14);
      address += 512 + e.size;
      e.kind = i % 20 == 19 ? MemKind::kPinnedHost : MemKind::kDevice;
      e.stack_id = ids[static_cast<size_t>(i % sites)];
      tracker.OnAlloc(e);
      if (i % 11 == 10) tracker.OnFree(e.address);
    }
    // Copies and kernels, so that every section of the report has content.
    for (uint32_t c = 1; c <= 1000; ++c) {
      CopyCall call;
      call.correlation = c;
      call.stack_id = ids[c % ids.size()];
      call.bytes = 4096;
      call.kind = CopyKind::kHostToDevice;
      transfers.OnCopyCall(call, false);
      tracker.OnCopy(CopyEvent{call.bytes, call.kind, false});
    }
    for (int k = 0; k < 1000; ++k) {
      kernels.OnLaunch(k % 2 == 0 ? "_Z4stepPf" : "_Z6reducePfS_");
      tracker.OnLaunch();
    }
    // A timeline of 16 samples, each of every site's live bytes (the
    // timeline keeps the largest 1,024 per sample).
    std::vector<std::pair<uint32_t, uint64_t>> scan;
    for (int t = 0; t < 16; ++t) {
      tracker.LiveDeviceBytesBySite(&scan);
      timeline.AddPeriodic(1000000000ULL * t, tracker.DeviceCurrentBytes(), &scan);
    }
    ok = true;
  }
};

// live allocations, sites, stacks (0: GPUWATCH_DEPTH=0, the JSON and
// grouping work alone; 1: 44-pc stacks, symbolized).
void BM_ExitReport(benchmark::State& state) {
  const int64_t live = state.range(0);
  const int64_t sites = state.range(1);
  const bool with_stacks = state.range(2) != 0;
  static Symbolizer* kept = nullptr;  // stacks:2, across repetitions like reports in a process
  if (state.range(2) == 2 && kept == nullptr) kept = new Symbolizer();
  Fixture f(live, sites, with_stacks);
  if (!f.ok) {
    state.SkipWithError("could not build the fixture (libunwind.so.8 missing?)");
    return;
  }
  const char* tmp = std::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe): single-threaded
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/gpuwatch_bench_report." +
                           std::to_string(getpid()) + ".json";
  using Clock = std::chrono::steady_clock;
  // Seconds per phase, summed over iterations, in the order they run; the
  // counters' names. build_json_s holds symbolization, analysis and JSON.
  static constexpr const char* kPhases[] = {"snapshot_s", "build_json_s", "leaked_bytes_s",
                                            "write_s", "summary_s"};
  std::array<double, std::size(kPhases)> phase_s{};
  size_t report_bytes = 0;
  double frames_per_site = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    std::array<Clock::time_point, std::size(kPhases) + 1> t;
    t[0] = Clock::now();
    f.transfers.Settle();
    ReportRequest request;
    request.context.trigger = "exit";
    request.context.pid = getpid();
    request.context.host = "bench";
    request.context.command = {"report_benchmark"};
    request.context.attach_mode = "preload";
    request.symbolizer = state.range(2) == 2 ? kept : nullptr;
    SessionReport report(f.session, std::move(request));
    t[1] = Clock::now();
    report.Build();
    const std::string& json = report.json();
    t[2] = Clock::now();
    benchmark::DoNotOptimize(report.leaked_device_bytes());
    t[3] = Clock::now();
    std::string error;
    if (!WriteFileAtomically(path, json, &error)) state.SkipWithError(error.c_str());
    t[4] = Clock::now();
    benchmark::DoNotOptimize(report.Summary(path));
    t[5] = Clock::now();
    for (size_t i = 0; i < phase_s.size(); ++i) {
      phase_s[i] += std::chrono::duration<double>(t[i + 1] - t[i]).count();
    }
    report_bytes = json.size();
    frames_per_site = FramesPerSite(json);
  }
  unlink(path.c_str());
  const auto avg = [&](double total) {
    return benchmark::Counter(total / static_cast<double>(state.iterations()));
  };
  for (size_t i = 0; i < phase_s.size(); ++i) state.counters[kPhases[i]] = avg(phase_s[i]);
  state.counters["report_MB"] = static_cast<double>(report_bytes) / 1e6;
  state.counters["frames_per_site"] = frames_per_site;
}
BENCHMARK(BM_ExitReport)
    ->ArgNames({"live", "sites", "stacks"})
    ->Args({1000000, 10000, 1})  // the target: at most 2 s
    ->Args({1000000, 10000, 2})  // the symbolizer kept from the report before
    ->Args({1000000, 10000, 0})  // no stacks
    ->Args({1000, 10, 1})
    ->Args({10000, 100, 1})
    ->Args({100000, 1000, 1})
    ->Args({1000000, 1000, 1})
    ->Args({10000000, 10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(false);

// What an out-of-memory or context-destroy callback captures of the live
// memory, inside the failing call (interpose/agent/reports.cc): 0, the whole live
// table (Tracker::Snapshot, what it took before issue 31: every shard's lock
// and a copy of every allocation); 1, the live memory by site
// (Tracker::LiveBySite: the per-site counters, no shard lock).
void BM_OomCapture(benchmark::State& state) {
  const int64_t live = state.range(0);
  const int64_t sites = state.range(1);
  const bool by_site = state.range(2) != 0;
  Fixture f(live, sites, /*with_stacks=*/false);
  if (!f.ok) {
    state.SkipWithError("could not build the fixture (libunwind.so.8 missing?)");
    return;
  }
  size_t rows = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    const TrackerSnapshot captured = by_site ? f.tracker.LiveBySite() : f.tracker.Snapshot();
    rows = by_site ? captured.site_live.size() : captured.live.size();
    benchmark::DoNotOptimize(captured.sites.data());
  }
  state.counters["rows"] = static_cast<double>(rows);  // sites, or allocations
}
BENCHMARK(BM_OomCapture)
    ->ArgNames({"live", "sites", "by_site"})
    ->Args({1000000, 10000, 0})
    ->Args({1000000, 10000, 1})
    ->Args({1000000, 1000, 0})
    ->Args({1000000, 1000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

// Tracker::Snapshot's copying pattern alone, on LiveAlloc records: 64 shards
// appended to one vector with reserve(size() + shard) before each (exact
// reserve: libstdc++ then reallocates and copies everything so far, 64 times)
// against one reserve of the total. Arg: live allocations; 0/1: per shard / once.
void BM_SnapshotCopyPattern(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const bool once = state.range(1) != 0;
  constexpr size_t kShards = 64;
  std::vector<std::vector<LiveAlloc>> shards(kShards);
  for (size_t i = 0; i < n; ++i) shards[i % kShards].push_back(LiveAlloc{});
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    std::vector<LiveAlloc> live;
    if (once) live.reserve(n);
    for (const auto& shard : shards) {
      if (!once) live.reserve(live.size() + shard.size());
      live.insert(live.end(), shard.begin(), shard.end());
    }
    benchmark::DoNotOptimize(live.data());
  }
}
BENCHMARK(BM_SnapshotCopyPattern)
    ->ArgNames({"live", "once"})
    ->Args({1000000, 0})
    ->Args({1000000, 1})
    ->Args({10000000, 0})
    ->Args({10000000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace gpuwatch

BENCHMARK_MAIN();
