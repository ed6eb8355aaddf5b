// The live view's work on gpuwatch's background thread (interpose/agent/live.cc),
// in the core, with a tracker holding 100,000 live device allocations over
// 10,000 sites (bench/live_poll.py measures the same load end to end):
//
//   BM_LiveSitesScan     Tracker::LiveDeviceBytesBySite, what each tick and
//                        each answer starts with
//   BM_LiveTick          what LiveTick does each second: the totals, the
//                        scan, LiveHistory::Add (the 256 largest kept)
//   BM_TimelineSample    what the timeline sample does each second
//                        (GPUWATCH_SAMPLE_MS, not the live view): the scan,
//                        Timeline::AddPeriodic
//   BM_BuildLiveState    one answer, `top N` sites, with a full minute of
//                        history (61 samples), without symbolization (a
//                        SiteResolver with no stack table: the answer's
//                        ranking, history lookups and JSON)
//
// All run hot (in a loop); the background thread does each once a second,
// with its caches cold and its heap given back in between.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/report/live_state.h"

namespace gpuwatch {
namespace {

constexpr uint32_t kSites = 10000;
constexpr uint32_t kPerSite = 10;
constexpr uint64_t kBytes = 4096;

Tracker& LoadedTracker() {
  static Tracker& tracker = []() -> Tracker& {
    auto* t = new Tracker();
    uint64_t address = 0x10000000;
    for (uint32_t site = 1; site <= kSites; ++site) {
      for (uint32_t i = 0; i < kPerSite; ++i) {
        AllocEvent e;
        e.address = address;
        e.size = kBytes;
        e.kind = MemKind::kDevice;
        e.device = 0;
        e.stack_id = site;
        t->OnAlloc(e);
        address += kBytes;
      }
    }
    return *t;
  }();
  return tracker;
}

void BM_LiveSitesScan(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  for (auto _ : state) {  // NOLINT: the idiom
    auto sites = tracker.LiveDeviceBytesBySite();
    benchmark::DoNotOptimize(sites.data());
  }
  state.counters["sites"] = static_cast<double>(tracker.LiveDeviceBytesBySite().size());
}
BENCHMARK(BM_LiveSitesScan)->Unit(benchmark::kMicrosecond);

// The scan into a buffer reused from call to call, as gpuwatch's thread does.
void BM_LiveSitesScanReused(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (auto _ : state) {  // NOLINT: the idiom
    tracker.LiveDeviceBytesBySite(&scan);
    benchmark::DoNotOptimize(scan.data());
  }
}
BENCHMARK(BM_LiveSitesScanReused)->Unit(benchmark::kMicrosecond);

void BM_LiveTick(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  LiveHistory history;
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (auto _ : state) {  // NOLINT: the idiom
    const TrackerSnapshot totals = tracker.Totals();
    tracker.LiveDeviceBytesBySite(&scan);
    history.Add(totals.time_ns, totals.device_current_bytes,
                totals.copies[static_cast<int>(CopyKind::kHostToDevice)].bytes,
                totals.copies[static_cast<int>(CopyKind::kDeviceToHost)].bytes, &scan);
  }
}
BENCHMARK(BM_LiveTick)->Unit(benchmark::kMicrosecond);

void BM_TimelineSample(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  Timeline timeline(1000);
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (auto _ : state) {  // NOLINT: the idiom
    tracker.LiveDeviceBytesBySite(&scan);
    timeline.AddPeriodic(tracker.NowNs(), tracker.DeviceCurrentBytes(), &scan);
  }
}
BENCHMARK(BM_TimelineSample)->Unit(benchmark::kMicrosecond);

// gpuwatch_mark()'s sample: a scan (fresh, or into a buffer reused from mark
// to mark) and Timeline::AddMark.
void BM_MarkSample(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  Timeline timeline(1000);
  const bool reused = state.range(0) != 0;
  std::vector<std::pair<uint32_t, uint64_t>> kept_scan;
  for (auto _ : state) {  // NOLINT: the idiom
    std::vector<std::pair<uint32_t, uint64_t>> fresh;
    auto* scan = reused ? &kept_scan : &fresh;
    tracker.LiveDeviceBytesBySite(scan);
    timeline.AddMark(tracker.NowNs(), "step", tracker.DeviceCurrentBytes(), scan);
  }
}
BENCHMARK(BM_MarkSample)->ArgName("reused")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_BuildLiveState(benchmark::State& state) {
  const Tracker& tracker = LoadedTracker();
  LiveHistory history;
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (size_t i = 0; i < LiveHistory::kSamples; ++i) {
    const TrackerSnapshot totals = tracker.Totals();
    tracker.LiveDeviceBytesBySite(&scan);
    history.Add(totals.time_ns + i * 1000000000ULL, totals.device_current_bytes, 0, 0, &scan);
  }
  SiteResolver resolver(nullptr);
  size_t bytes = 0;
  for (auto _ : state) {  // NOLINT: the idiom
    const TrackerSnapshot totals = tracker.Totals();
    LiveInputs in;
    in.pid = 1;
    in.host = "host";
    in.command = {"live_load"};
    in.totals = &totals;
    in.sites = tracker.LiveDeviceBytesBySite();
    in.history = &history;
    in.top = static_cast<size_t>(state.range(0));
    const std::string answer = BuildLiveState(in, &resolver);
    bytes = answer.size();
    benchmark::DoNotOptimize(answer.data());
  }
  state.counters["answer_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_BuildLiveState)->Arg(50)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuwatch

BENCHMARK_MAIN();
