// The event API (libgpuwatch/session/events.h): what interpose records goes
// through Session::events() into the current recording's tables, with exact
// bytes and counts, and into a fork child's own tables once it records.
#include "libgpuwatch/session/events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "libgpuwatch/session/session.h"

namespace gpuwatch {
namespace {

Config NoStacks() {
  Config config;
  config.depth = 0;
  return config;
}

AllocEvent Device(uint64_t address, uint64_t size, uint32_t stack_id = 0) {
  return {.address = address, .size = size, .kind = MemKind::kDevice, .stack_id = stack_id};
}

CopyCall Call(uint32_t correlation, uint64_t bytes, CopyKind kind) {
  CopyCall call;
  call.correlation = correlation;
  call.bytes = bytes;
  call.kind = kind;
  call.host = HostKind::kPinned;
  return call;
}

const KindTotals& DeviceTotals(const TrackerSnapshot& snap) {
  return snap.kinds[static_cast<int>(MemKind::kDevice)];
}

TEST(Events, AnAllocationAndItsFreeLandInTheTrackerWithExactBytes) {
  const Session session(NoStacks());
  Events events = session.events();
  ASSERT_TRUE(events.enabled());
  events.Allocated(Device(0x1000, 4096, 7));
  events.Allocated(Device(0x9000, 512, 7));
  LiveAlloc removed;
  ASSERT_TRUE(events.FreeBegun(0x1000, &removed));
  EXPECT_EQ(removed.size, 4096u);
  const TrackerSnapshot snap = session.recording().tracker.Snapshot();
  EXPECT_EQ(DeviceTotals(snap).allocs, 2u);
  EXPECT_EQ(DeviceTotals(snap).alloc_bytes, 4608u);
  EXPECT_EQ(DeviceTotals(snap).frees, 1u);
  EXPECT_EQ(snap.device_current_bytes, 512u);
  EXPECT_EQ(snap.device_peak_bytes, 4608u);
  ASSERT_EQ(snap.live.size(), 1u);
  EXPECT_EQ(snap.live[0].address, 0x9000u);
  ASSERT_EQ(snap.sites.size(), 1u);
  EXPECT_EQ(snap.sites[0].first, 7u);
  EXPECT_EQ(snap.sites[0].second.live_bytes, 512u);
  EXPECT_EQ(snap.sites[0].second.live_count, 1u);
}

TEST(Events, AFailedFreeIsUndoneAndAnUnknownOneCounted) {
  const Session session(NoStacks());
  Events events = session.events();
  events.Allocated(Device(0x2000, 256));
  LiveAlloc removed;
  ASSERT_TRUE(events.FreeBegun(0x2000, &removed));
  events.FreeUndone(removed);
  EXPECT_FALSE(events.FreeBegun(0x5000, &removed));
  events.UnknownFree();
  events.Freed(0x2000);
  const TrackerSnapshot snap = session.recording().tracker.Snapshot();
  EXPECT_EQ(DeviceTotals(snap).allocs, 1u);
  EXPECT_EQ(DeviceTotals(snap).frees, 1u);
  EXPECT_EQ(snap.unknown_frees, 1u);
  EXPECT_EQ(snap.device_current_bytes, 0u);
  EXPECT_TRUE(snap.live.empty());
}

// A free done (its call succeeded) counts for the allocation's site: its
// frees, a churn cycle when it left the site with none of its kind live, and
// the calls' time (allocation and free, in Ticks()).
TEST(Events, AFreeDoneCountsForItsSiteWithTheCallsTime) {
  const Session session(NoStacks());
  Events events = session.events();
  AllocEvent first = Device(0x1000, 4096, 7);
  first.call_ticks = 1000;
  events.Allocated(first);
  events.Allocated(Device(0x2000, 4096, 7));
  LiveAlloc removed;
  ASSERT_TRUE(events.FreeBegun(0x1000, &removed));
  events.FreeDone(removed, 500);  // 0x2000 still live: no cycle
  ASSERT_TRUE(events.FreeBegun(0x2000, &removed));
  events.FreeDone(removed, 500);  // none left: a cycle
  AllocEvent pooled = Device(0x3000, 4096, 7);
  pooled.kind = MemKind::kPool;
  events.Allocated(pooled);
  ASSERT_TRUE(events.FreeBegun(0x3000, &removed));
  events.FreeDone(removed, 0);  // stream-ordered: freed, never a cycle
  const TrackerSnapshot snap = session.recording().tracker.Snapshot();
  ASSERT_EQ(snap.sites.size(), 1u);
  const SiteTotals& t = snap.sites[0].second;
  EXPECT_EQ(t.frees, 3u);
  EXPECT_EQ(t.churn_cycles, 1u);
  EXPECT_GT(t.call_ns, 0u);
}

TEST(Events, CopiesLandInTheTrackerAndTheTransfersTable) {
  const Session session(NoStacks());
  Events events = session.events();
  events.Copied(CopyEvent{1000, CopyKind::kHostToDevice, false, 0});
  events.CopyCalled(Call(11, 1000, CopyKind::kHostToDevice), /*activity=*/false);
  events.Copied(CopyEvent{300, CopyKind::kDeviceToHost, true, 0});
  events.CopyCalled(Call(12, 300, CopyKind::kDeviceToHost), /*activity=*/false);
  // A copy registered for its activity record, whose call then failed: not counted.
  events.CopyCalled(Call(13, 5000, CopyKind::kHostToDevice), /*activity=*/true);
  events.CopyFailed(13);
  const TrackerSnapshot snap = session.recording().tracker.Snapshot();
  EXPECT_EQ(snap.copies[static_cast<int>(CopyKind::kHostToDevice)].count, 1u);
  EXPECT_EQ(snap.copies[static_cast<int>(CopyKind::kHostToDevice)].bytes, 1000u);
  EXPECT_EQ(snap.copies[static_cast<int>(CopyKind::kDeviceToHost)].count, 1u);
  EXPECT_EQ(snap.copies[static_cast<int>(CopyKind::kDeviceToHost)].bytes, 300u);
  const TransfersSnapshot transfers = session.recording().transfers.Snapshot();
  const TransferStats& h2d =
      transfers
          .totals[static_cast<int>(CopyKind::kHostToDevice)][static_cast<int>(HostKind::kPinned)];
  const TransferStats& d2h =
      transfers
          .totals[static_cast<int>(CopyKind::kDeviceToHost)][static_cast<int>(HostKind::kPinned)];
  EXPECT_EQ(h2d.count, 1u);
  EXPECT_EQ(h2d.bytes, 1000u);
  EXPECT_EQ(d2h.count, 1u);
  EXPECT_EQ(d2h.bytes, 300u);
}

TEST(Events, LaunchesAreCountedByKernelName) {
  const Session session(NoStacks());
  Events events = session.events();
  events.Launched(0, "k_a");
  events.Launched(0, "k_a");
  events.Launched(0, "k_b");
  EXPECT_EQ(session.recording().tracker.Snapshot().launches, 3u);
  uint64_t a = 0;
  uint64_t b = 0;
  for (const KernelStats& k : session.recording().kernels.Snapshot()) {
    if (k.name == "k_a") a = k.launches;
    if (k.name == "k_b") b = k.launches;
  }
  EXPECT_EQ(a, 2u);
  EXPECT_EQ(b, 1u);
}

// The launch path's common case (KernelLaunchedAgain) records a launch as
// Launched and KernelQueued do, and declines, recording nothing, each case
// it leaves to them: the first launch, a kernel without its site, a context
// without the first ring, a name never launched, a null one.
TEST(Events, ALaunchOfAKnownKernelOnTheFirstContextIsRecordedInline) {
  const Session session(NoStacks());
  Events events = session.events();
  static const char kName[] = "k";  // one pointer for every launch, as CUPTI's symbolName
  EXPECT_FALSE(events.launched());
  EXPECT_FALSE(events.KernelLaunchedAgain(0, kName, 1, 0x5, Ticks()));
  const uint32_t id = events.Launched(0, kName);
  EXPECT_TRUE(events.launched());
  EXPECT_NE(session.recording().lifecycle.first_launch_ns.load(), 0u);
  EXPECT_TRUE(events.KernelSiteNeeded(id));
  EXPECT_FALSE(events.KernelLaunchedAgain(0, kName, 1, 0x5, Ticks()));
  events.KernelSiteSeen(id, 0);  // none could be captured: not asked again
  EXPECT_FALSE(events.KernelSiteNeeded(id));
  EXPECT_FALSE(events.KernelLaunchedAgain(0, kName, 1, 0x5, Ticks()));  // no ring yet
  events.KernelQueued(1, id, 0x5, Ticks());

  EXPECT_TRUE(events.KernelLaunchedAgain(0, kName, 1, 0x6, Ticks()));
  EXPECT_FALSE(events.KernelLaunchedAgain(0, kName, 2, 0x7, Ticks()));  // another context
  EXPECT_FALSE(events.KernelLaunchedAgain(0, "k2", 1, 0x7, Ticks()));
  EXPECT_FALSE(events.KernelLaunchedAgain(0, nullptr, 1, 0x7, Ticks()));
  const Recording& r = session.recording();
  EXPECT_EQ(r.tracker.Snapshot().launches, 2u);
  EXPECT_EQ(r.kernels.launches(), 2u);

  CudaErrorEvent fault;
  fault.api = "cudaDeviceSynchronize";
  fault.code = 700;  // sticky: the context's ring is kept
  fault.context_uid = 1;
  fault.now_ns = events.NowNs();
  EXPECT_TRUE(events.CallFailed(fault));
  const CudaErrorsSnapshot snap = r.errors.Snapshot(r.kernels);
  ASSERT_EQ(snap.sticky.size(), 1u);
  ASSERT_EQ(snap.sticky[0].kernels.size(), 2u);
  EXPECT_EQ(snap.sticky[0].kernels[0].name, "k");
  EXPECT_EQ(snap.sticky[0].kernels[0].stream, 0x5u);
  EXPECT_EQ(snap.sticky[0].kernels[1].name, "k");
  EXPECT_EQ(snap.sticky[0].kernels[1].stream, 0x6u);
  EXPECT_EQ(snap.sticky[0].kernels[1].stack_id, 0u);
}

TEST(Events, AreNotEnabledWhilePausedAndMarkTheFirstCallOnce) {
  const Session session(NoStacks());
  Events events = session.events();
  EXPECT_FALSE(events.first_call_seen());
  EXPECT_TRUE(events.FirstCall());
  EXPECT_TRUE(events.first_call_seen());
  EXPECT_FALSE(events.FirstCall());
  EXPECT_NE(session.recording().lifecycle.first_call_ns.load(), 0u);
  session.recording().tracker.SetPaused(true);
  EXPECT_FALSE(session.events().enabled());
}

// Threads racing to the first call: one of them is it (the hook that writes
// the "cuda" line and registers the exit handler runs once).
TEST(Events, OfThreadsRacingToTheFirstCallOneIsIt) {
  const Session session(NoStacks());
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::atomic<int> firsts{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      if (session.events().FirstCall()) firsts.fetch_add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(firsts.load(), 1);
  Lifecycle lifecycle;
  EXPECT_TRUE(lifecycle.FirstCall(5));
  EXPECT_FALSE(lifecycle.FirstCall(7));
  EXPECT_EQ(lifecycle.first_call_ns.load(), 5u);
}

TEST(Events, AContextDestroyedFreesItsMemoryUnlessAnotherContextSharesTheDevice) {
  const Session session(NoStacks());
  Events events = session.events();
  events.Allocated(Device(0x1000, 100));
  events.Allocated(Device(0x2000, 20));
  events.ContextCreated(0);
  events.ContextCreated(0);
  events.ContextCreated(1);    // another device's: not sharing device 0
  events.ContextDestroyed(0);  // the other context on device 0 keeps the memory
  EXPECT_EQ(session.recording().tracker.Snapshot().device_current_bytes, 120u);
  events.ContextDestroyed(0);
  const Lifecycle& lifecycle = session.recording().lifecycle;
  EXPECT_EQ(lifecycle.contexts_destroyed.load(), 2u);
  EXPECT_EQ(lifecycle.context_destroys_kept.load(), 1u);
  EXPECT_EQ(lifecycle.context_freed_count.load(), 2u);
  EXPECT_EQ(lifecycle.context_freed_bytes.load(), 120u);
  EXPECT_EQ(session.recording().tracker.Snapshot().device_current_bytes, 0u);
}

TEST(Events, AForkChildsRecordingReceivesTheEventsAfterStartChildRecording) {
  Session session(NoStacks());
  Recording& parent = session.recording();
  session.events().Allocated(Device(0x1000, 64));
  session.events().Launched(0, "before_fork");

  session.StartChildRecording();
  Recording& child = session.recording();
  ASSERT_NE(&child, &parent);
  Events events = session.events();
  events.Allocated(Device(0x3000, 2048));
  events.Copied(CopyEvent{4096, CopyKind::kDeviceToDevice, true, 0});
  events.Launched(0, "after_fork");
  LiveAlloc removed;
  EXPECT_FALSE(events.FreeBegun(0x1000, &removed)) << "the parent's allocation is not the child's";

  const TrackerSnapshot in_child = child.tracker.Snapshot();
  EXPECT_EQ(DeviceTotals(in_child).allocs, 1u);
  EXPECT_EQ(in_child.device_current_bytes, 2048u);
  EXPECT_EQ(in_child.copies[static_cast<int>(CopyKind::kDeviceToDevice)].bytes, 4096u);
  EXPECT_EQ(in_child.launches, 1u);
  ASSERT_EQ(child.kernels.Snapshot().size(), 1u);
  EXPECT_EQ(child.kernels.Snapshot()[0].name, "after_fork");
  // The parent's tables are left as they were.
  const TrackerSnapshot in_parent = parent.tracker.Snapshot();
  EXPECT_EQ(DeviceTotals(in_parent).allocs, 1u);
  EXPECT_EQ(in_parent.device_current_bytes, 64u);
  EXPECT_EQ(in_parent.launches, 1u);
  EXPECT_EQ(in_parent.copies[static_cast<int>(CopyKind::kDeviceToDevice)].count, 0u);
}

TEST(Events, AMarkAndASampleRecordTheDeviceBytesEachSiteHolds) {
  const Session session(NoStacks());
  Events events = session.events();
  events.Allocated(Device(0x1000, 300, 1));
  events.Allocated(Device(0x2000, 700, 2));
  AllocEvent host = Device(0x3000, 50, 2);
  host.kind = MemKind::kPinnedHost;
  events.Allocated(host);  // host memory: not in the device figures
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  EXPECT_EQ(events.Marked("step", &scan), 1u);
  events.Freed(0x1000);
  EXPECT_EQ(events.Marked(nullptr, &scan), 2u);
  events.Sampled(&scan);
  const std::vector<GrowthSample> marks = events.LastMarks();
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].label, "step");
  EXPECT_EQ(marks[0].device_bytes, 1000u);
  const std::vector<std::pair<uint32_t, uint64_t>> both = {{1, 300}, {2, 700}};
  EXPECT_EQ(marks[0].sites, both);
  EXPECT_EQ(marks[1].label, "");
  EXPECT_EQ(marks[1].device_bytes, 700u);
  const TimelineSnapshot timeline = session.recording().timeline.Snapshot();
  EXPECT_EQ(timeline.marks_total, 2u);
  ASSERT_EQ(timeline.periodic.size(), 1u);
  EXPECT_EQ(timeline.periodic[0].device_bytes, 700u);
  const std::vector<std::pair<uint32_t, uint64_t>> one = {{2, 700}};
  EXPECT_EQ(timeline.periodic[0].sites, one);
  EXPECT_EQ(events.DeviceCurrentBytes(), 700u);
  EXPECT_EQ(events.DevicePeakBytes(), 1000u);
}

TEST(Events, PoolRegionsLandInTheRegionTable) {
  const Session session(NoStacks());
  Events events = session.events();
  events.HeapRegistered({0xA, 0x10000, 1 << 20, 0, events.NowMs()});
  PoolRegion region;
  region.heap = 0xA;
  region.address = 0x10000;
  region.size = 4096;
  events.RegionRegistered(region);
  region.address = 0x20000;
  events.RegionRegistered(region);
  events.RegionResized(0x20000, 8192);
  events.RegionUnregistered(0x10000);
  const RegionsSnapshot snap = session.recording().regions.Snapshot();
  ASSERT_EQ(snap.live.size(), 1u);
  EXPECT_EQ(snap.live[0].address, 0x20000u);
  EXPECT_EQ(snap.live[0].size, 8192u);
  EXPECT_EQ(snap.counters.registered, 2u);
  EXPECT_EQ(snap.counters.resized, 1u);
  EXPECT_EQ(snap.counters.unregistered, 1u);
  ASSERT_EQ(snap.heaps.size(), 1u);
  EXPECT_EQ(snap.heaps[0].size, uint64_t{1} << 20);
}

TEST(Events, ARegionUnregisteredByAChainedToolsHandleLeavesTheTable) {
  const Session session(NoStacks());
  Events events = session.events();
  PoolRegion region;
  region.address = 0x40000;
  region.size = 256;
  events.RegionRegistered(region);
  events.RegionHandleMade(0xBEEF, 0x40000);
  events.RegionUnregisteredByHandle(0xBEEF);
  events.RegionUnregisteredByHandle(0xBEEF);  // forgotten with its region: unknown now
  const RegionsSnapshot snap = session.recording().regions.Snapshot();
  EXPECT_TRUE(snap.live.empty());
  EXPECT_EQ(snap.counters.unregistered, 1u);
  EXPECT_EQ(snap.counters.unknown_unregisters, 1u);
}

}  // namespace
}  // namespace gpuwatch
