#include "libgpuwatch/record/regions.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/report/report.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {
namespace {

PoolRegion Region(uint64_t heap, uint64_t address, uint64_t size, uint32_t time_ms = 5) {
  PoolRegion r;
  r.heap = heap;
  r.address = address;
  r.size = size;
  r.stack_id = 7;
  r.time_ms = time_ms;
  return r;
}

uint64_t LiveBytes(const RegionsSnapshot& s) {
  uint64_t bytes = 0;
  for (const PoolRegion& r : s.live) bytes += r.size;
  return bytes;
}

TEST(RegionTable, RegisterResizeUnregister) {
  RegionTable t;
  t.RegisterHeap({0x1000, 0x1000, 1 << 20, 3, 0});
  t.Register(Region(0x1000, 0x1000, 4096));
  t.Register(Region(0x1000, 0x2000, 8192));
  EXPECT_TRUE(t.Resize(0x2000, 1024));
  EXPECT_FALSE(t.Resize(0x3000, 1));  // no region there
  EXPECT_TRUE(t.Unregister(0x1000));
  EXPECT_FALSE(t.Unregister(0x1000));  // twice
  const RegionsSnapshot s = t.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x2000u);
  EXPECT_EQ(s.live[0].size, 1024u);
  EXPECT_EQ(s.live[0].stack_id, 7u);
  ASSERT_EQ(s.heaps.size(), 1u);
  EXPECT_EQ(s.heaps[0].size, 1u << 20);
  EXPECT_EQ(s.counters.registered, 2u);
  EXPECT_EQ(s.counters.unregistered, 1u);
  EXPECT_EQ(s.counters.resized, 1u);
  EXPECT_EQ(s.counters.unknown_resizes, 1u);
  EXPECT_EQ(s.counters.unknown_unregisters, 1u);
  EXPECT_EQ(t.live_count(), 1u);
}

TEST(RegionTable, AResetEndsTheRegionsOfItsHeapOnly) {
  RegionTable t;
  t.RegisterHeap({0xa000, 0xa000, 0x1000, 0, 0});
  t.RegisterHeap({0xb000, 0xb000, 0x1000, 0, 0});
  for (uint64_t i = 0; i < 100; ++i) t.Register(Region(0xa000, 0x100000 + i * 64, 64));
  t.Register(Region(0xb000, 0xb000, 512));
  t.Register(Region(0, 0xc000, 256));  // the process-wide heap
  EXPECT_EQ(t.ResetHeap(0xa000), 100u);
  RegionsSnapshot s = t.Snapshot();
  EXPECT_EQ(s.live.size(), 2u);
  EXPECT_EQ(LiveBytes(s), 768u);
  EXPECT_EQ(s.counters.released_by_reset, 100u);
  EXPECT_EQ(s.counters.heaps_reset, 1u);
  EXPECT_EQ(t.ResetHeap(0), 1u);  // the process-wide heap's own
  EXPECT_EQ(t.Snapshot().live.size(), 1u);
  EXPECT_EQ(t.live_count(), 1u);
}

TEST(RegionTable, UnregisteringAHeapLeavesItsRegionsLive) {
  RegionTable t;
  t.RegisterHeap({0xa000, 0xa000, 0x1000, 0, 0});
  t.Register(Region(0xa000, 0xa000, 64));
  EXPECT_TRUE(t.UnregisterHeap(0xa000));
  EXPECT_FALSE(t.UnregisterHeap(0xa000));
  const RegionsSnapshot s = t.Snapshot();
  EXPECT_TRUE(s.heaps.empty());
  EXPECT_EQ(s.live.size(), 1u);  // the pool was torn down with it out
  EXPECT_EQ(s.counters.heaps_unregistered, 1u);
}

TEST(RegionTable, RegistrationAtALiveAddressReplaces) {
  RegionTable t;
  t.Register(Region(0x9000, 0xa000, 64));  // a heap never registered
  t.Register(Region(0, 0xa000, 128));
  const RegionsSnapshot s = t.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].size, 128u);
  EXPECT_EQ(s.counters.replaced, 1u);
  EXPECT_EQ(s.counters.unknown_heaps, 1u);
  EXPECT_EQ(t.live_count(), 1u);
}

TEST(RegionTable, HeapsPastTheCapAreCountedNotKept) {
  RegionTable t;
  for (uint64_t i = 0; i < RegionTable::kMaxHeaps + 3; ++i) {
    t.RegisterHeap({(i + 1) << 12, (i + 1) << 12, 4096, 0, 0});
  }
  const RegionsSnapshot s = t.Snapshot();
  EXPECT_EQ(s.heaps.size(), RegionTable::kMaxHeaps);
  EXPECT_EQ(s.counters.heaps_dropped, 3u);
}

TEST(RegionTable, ThreadsRegisterAndUnregisterConcurrently) {
  RegionTable t;
  constexpr int kThreads = 4;
  constexpr uint64_t kEach = 20000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, th] {
      const uint64_t base = (uint64_t{1} << 40) * (th + 1);
      for (uint64_t i = 0; i < kEach; ++i) t.Register(Region(0, base + i * 256, 256));
      // Every other one given back.
      for (uint64_t i = 0; i < kEach; i += 2) t.Unregister(base + i * 256);
    });
  }
  for (std::thread& th : threads) th.join();
  const RegionsSnapshot s = t.Snapshot();
  EXPECT_EQ(s.live.size(), kThreads * kEach / 2);
  EXPECT_EQ(LiveBytes(s), kThreads * kEach / 2 * 256);
  EXPECT_EQ(s.counters.registered, kThreads * kEach);
  EXPECT_EQ(s.counters.unregistered, kThreads * kEach / 2);
}

// The report finds the allocation that holds each region: inside a live
// allocation made no later than the region; not past its end; not in an
// allocation made after it (the address was reused).
TEST(RegionsReport, RegionsAreShownInsideTheAllocationThatHoldsThem) {
  TrackerSnapshot snap;
  LiveAlloc segment;
  segment.address = 0x100000;
  segment.size = 0x10000;
  segment.time_ms = 2;
  segment.stack_id = 1;
  LiveAlloc reused = segment;
  reused.address = 0x200000;
  reused.time_ms = 9;  // made after the region below
  snap.live = {segment, reused};
  RegionsSnapshot regions;
  regions.live = {Region(0x100000, 0x100000, 0x1000),    // inside
                  Region(0x100000, 0x10f000, 0x1000),    // inside, to the last byte
                  Region(0x100000, 0x10f800, 0x1000),    // past the end
                  Region(0x200000, 0x200000, 0x100, 5),  // older than the allocation there
                  Region(0, 0x50000, 0x10)};             // below every allocation
  regions.counters.registered = 5;
  ReportContext context;
  context.trigger = "exit";
  context.regions = &regions;
  SiteResolver sites(nullptr);
  const nlohmann::json report = nlohmann::json::parse(BuildReportJson(snap, context, &sites));
  const nlohmann::json& r = report["regions"];
  EXPECT_EQ(r["live_count"], 5);
  EXPECT_EQ(r["live_bytes"], 0x3110);
  EXPECT_EQ(r["outside_count"], 3);
  EXPECT_EQ(r["outside_bytes"], 0x1110);
  ASSERT_EQ(r["segments"].size(), 1u);
  EXPECT_EQ(r["segments"][0]["address"], "0x100000");
  EXPECT_EQ(r["segments"][0]["region_count"], 2);
  EXPECT_EQ(r["segments"][0]["region_bytes"], 0x2000);
  EXPECT_EQ(r["counters"]["registered"], 5);
}

TEST(RegionsReport, NoSectionWhenNothingWasRegistered) {
  TrackerSnapshot snap;
  RegionsSnapshot regions;
  ReportContext context;
  context.trigger = "exit";
  context.regions = &regions;
  SiteResolver sites(nullptr);
  const nlohmann::json report = nlohmann::json::parse(BuildReportJson(snap, context, &sites));
  EXPECT_FALSE(report.contains("regions"));
}

}  // namespace
}  // namespace gpuwatch
