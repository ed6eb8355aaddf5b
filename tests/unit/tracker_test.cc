#include "libgpuwatch/record/tracker.h"

#include <gtest/gtest.h>

#include <mutex>

#include "libgpuwatch/record/tracker_shard.h"

#include <array>
#include <atomic>

#include <initializer_list>
#include <map>
#include <ostream>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace gpuwatch {
namespace {

AllocEvent Event(uint64_t address, uint64_t size, MemKind kind, uint32_t stack_id = 0) {
  return {.address = address, .size = size, .kind = kind, .stack_id = stack_id};
}

const KindTotals& Kind(const TrackerSnapshot& s, MemKind k) { return s.kinds[static_cast<int>(k)]; }

// What the tests check of a kind's totals, compared whole: bytes live now,
// the peak, allocations and frees ever made.
struct Counts {
  uint64_t current_bytes;
  uint64_t peak_bytes;
  uint64_t allocs;
  uint64_t frees;
  bool operator==(const Counts&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Counts& c) {
    return os << "{current " << c.current_bytes << ", peak " << c.peak_bytes << ", allocs "
              << c.allocs << ", frees " << c.frees << "}";
  }
};
Counts CountsOf(const TrackerSnapshot& s, MemKind k) {
  const KindTotals& t = Kind(s, k);
  return {t.current_bytes, t.peak_bytes, t.allocs, t.frees};
}

TEST(Tracker, CountsCurrentPeakAndKindsApart) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 100, MemKind::kDevice));
  t.OnAlloc(Event(0x2000, 50, MemKind::kDevice));
  t.OnAlloc(Event(0x3000, 1000, MemKind::kPinnedHost));
  EXPECT_TRUE(t.OnFree(0x1000));
  t.OnAlloc(Event(0x4000, 20, MemKind::kPool));
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(CountsOf(s, MemKind::kDevice), (Counts{50, 150, 2, 1}));
  EXPECT_EQ(CountsOf(s, MemKind::kPinnedHost), (Counts{1000, 1000, 1, 0}));
  // Pinned host bytes never count as device bytes.
  EXPECT_EQ(s.device_current_bytes, 70u);
  EXPECT_EQ(s.device_peak_bytes, 150u);
  EXPECT_EQ(s.live.size(), 3u);
}

// Allocation sizes per site, in buckets each 4 times the last (the report's
// sites[].sizes): the bounds belong to the lower bucket.
TEST(Tracker, CountsAllocationSizesPerSiteInBucketsOfFour) {
  const std::pair<uint64_t, int> bounds[] = {{0, 0},
                                             {1, 0},
                                             {1024, 0},
                                             {1025, 1},
                                             {4096, 1},
                                             {4097, 2},
                                             {65536, 3},
                                             {65537, 4},
                                             {uint64_t{1} << 20, 5},
                                             {4u << 20, 6},
                                             {64u << 20, 8},
                                             {uint64_t{1} << 30, 10},
                                             {(uint64_t{1} << 30) + 1, 11},
                                             {uint64_t{1} << 44, 11}};
  for (const auto& [size, bucket] : bounds) EXPECT_EQ(SizeBucket(size), bucket) << size;
  Tracker t;
  for (uint64_t i = 0; i < 3; ++i) t.OnAlloc(Event(0x1000 + i * 0x1000, 512, MemKind::kDevice, 4));
  t.OnAlloc(Event(0x10000, 64 << 10, MemKind::kPinnedHost, 4));
  t.OnAlloc(Event(0x20000, 1 << 20, MemKind::kDevice, 4));
  EXPECT_TRUE(t.OnFree(0x20000));  // frees leave the counts as they were
  t.OnAlloc(Event(0x30000, 100, MemKind::kDevice, 5));
  const TrackerSnapshot s = t.Snapshot();
  std::map<uint32_t, std::array<uint64_t, kSizeBuckets>> sizes;
  for (const auto& [id, totals] : s.sites) sizes[id] = totals.sizes;
  EXPECT_EQ(sizes[4], (std::array<uint64_t, kSizeBuckets>{3, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(sizes[5], (std::array<uint64_t, kSizeBuckets>{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

// gpuwatch_live(): bytes and allocations live now, by kinds and device; the
// counters (every device) and the walk of the table (one device) agree.
TEST(Tracker, LiveByKindsAndDevice) {
  Tracker t;
  const auto on = [](AllocEvent e, int device) {
    e.device = device;
    return e;
  };
  t.OnAlloc(on(Event(0x1000, 100, MemKind::kDevice), 0));
  t.OnAlloc(on(Event(0x2000, 50, MemKind::kDevice), 1));
  t.OnAlloc(on(Event(0x3000, 20, MemKind::kPool), 1));
  t.OnAlloc(on(Event(0x4000, 1000, MemKind::kPinnedHost), -1));
  t.OnAlloc(on(Event(0x5000, 7, MemKind::kDevice), 1));
  ASSERT_TRUE(t.OnFree(0x5000));
  const auto bits = [](std::initializer_list<MemKind> kinds) {
    uint32_t mask = 0;
    for (MemKind k : kinds) mask |= 1u << static_cast<int>(k);
    return mask;
  };
  const uint32_t device_kinds = bits({MemKind::kDevice, MemKind::kPool, MemKind::kManaged,
                                      MemKind::kVmm, MemKind::kArray, MemKind::kGraph});
  const auto live = [&t](uint32_t kinds, int device) {
    const Tracker::LiveFigures f = t.Live(kinds, device);
    return std::make_pair(f.bytes, f.count);
  };
  using Figures = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(live(device_kinds, -1), Figures(170, 3));
  EXPECT_EQ(live(device_kinds, 0), Figures(100, 1));
  EXPECT_EQ(live(device_kinds, 1), Figures(70, 2));
  EXPECT_EQ(live(device_kinds, 2), Figures(0, 0));
  EXPECT_EQ(live(bits({MemKind::kPool}), -1), Figures(20, 1));
  EXPECT_EQ(live(bits({MemKind::kDevice}), 1), Figures(50, 1));
  EXPECT_EQ(live(bits({MemKind::kPinnedHost}), -1), Figures(1000, 1));
  EXPECT_EQ(live(0, -1), Figures(0, 0));
}

// A point splits the live allocations into those made before it and after
// it, by millisecond and, within one, by the generation's tag.
// Issue 31: what an out-of-memory or context-destroy callback captures of
// the live memory comes from the per-site counters, never from the live
// table (whose 64 shard locks and copy took 0.1-0.2 s at 1,000,000 live
// allocations inside the failing call): every site's bytes by kind and its
// counts are exact, frees, undone frees, replaced and VMM-keyed entries
// included, and no shard is walked.
TEST(Tracker, LiveBySiteCountsEverySiteFromItsCountersWithoutWalkingTheLiveTable) {
  Tracker t;
  constexpr int kAllocs = 10000;
  for (int i = 0; i < kAllocs; ++i) {
    const auto site = static_cast<uint32_t>(1 + i % 7);
    const MemKind kind = i % 10 == 9  ? MemKind::kPinnedHost
                         : i % 2 == 0 ? MemKind::kDevice
                                      : MemKind::kPool;
    t.OnAlloc(Event(0x100000 + 0x1000 * static_cast<uint64_t>(i), 16 + i % 5, kind, site));
  }
  for (int i = 0; i < kAllocs; i += 3) ASSERT_TRUE(t.OnFree(0x100000 + 0x1000 * uint64_t(i)));
  LiveAlloc removed;
  ASSERT_TRUE(t.BeginFree(0x100000 + 0x1000 * 4, &removed));
  t.UndoFree(removed);
  t.OnAlloc(Event(0x100000 + 0x1000 * 5, 1000, MemKind::kDevice, 9));  // a free never seen
  AllocEvent imported = Event(0x900000000, 4096, MemKind::kIpcImported, 3);
  t.OnIpcOpen(imported);

  const TrackerSnapshot full = t.Snapshot();  // what the live table says
  const uint64_t walks = t.ShardWalks();
  const TrackerSnapshot by_site = t.LiveBySite();
  EXPECT_EQ(t.ShardWalks(), walks) << "LiveBySite walked the live table";
  EXPECT_TRUE(by_site.live_by_site);
  EXPECT_TRUE(by_site.live.empty());

  std::map<uint32_t, TrackerSnapshot::SiteLive> expected;
  for (const LiveAlloc& a : full.live) {
    TrackerSnapshot::SiteLive& e = expected[a.stack_id];
    (IsDeviceKind(a.kind) ? e.count : IsHostKind(a.kind) ? e.host_count : e.imported_count) += 1;
    e.kind_bytes[static_cast<int>(a.kind)] += a.size;
  }
  ASSERT_EQ(by_site.site_live.size(), expected.size());
  for (const auto& [id, live] : by_site.site_live) {
    SCOPED_TRACE(id);
    const TrackerSnapshot::SiteLive& e = expected[id];
    EXPECT_EQ(live.count, e.count);
    EXPECT_EQ(live.host_count, e.host_count);
    EXPECT_EQ(live.imported_count, e.imported_count);
    EXPECT_EQ(live.kind_bytes, e.kind_bytes);
  }
  EXPECT_EQ(expected[3].imported_count, 1u);
  EXPECT_EQ(expected[9].count, 1u);
  EXPECT_EQ(expected[9].kind_bytes[static_cast<int>(MemKind::kDevice)], 1000u);
  // The rest of the capture is the snapshot's: counters and sites alike.
  EXPECT_EQ(by_site.device_current_bytes, full.device_current_bytes);
  for (int k = 0; k < kNumMemKinds; ++k) {
    EXPECT_EQ(by_site.kinds[k].current_count, full.kinds[k].current_count) << k;
    EXPECT_EQ(by_site.kinds[k].current_bytes, full.kinds[k].current_bytes) << k;
  }
  ASSERT_EQ(by_site.sites.size(), full.sites.size());
  for (size_t i = 0; i < full.sites.size(); ++i) {
    EXPECT_EQ(by_site.sites[i].first, full.sites[i].first);
    EXPECT_EQ(by_site.sites[i].second.live_count, full.sites[i].second.live_count);
    EXPECT_EQ(by_site.sites[i].second.live_bytes, full.sites[i].second.live_bytes);
    EXPECT_EQ(by_site.sites[i].second.allocs, full.sites[i].second.allocs);
  }
  EXPECT_EQ(by_site.peak_sites, full.peak_sites);
}

TEST(Tracker, PointsOrderAllocationsByMillisecondThenGeneration) {
  const auto at = [](uint64_t generation, uint32_t ms) { return Tracker::Point{generation, ms}; };
  EXPECT_TRUE(Tracker::IsAfter(11, 0, at(5, 10)));       // a later millisecond
  EXPECT_FALSE(Tracker::IsAfter(9, 5, at(5, 10)));       // an earlier one
  EXPECT_TRUE(Tracker::IsAfter(10, 5, at(5, 10)));       // the same: the point's generation
  EXPECT_TRUE(Tracker::IsAfter(10, 9, at(5, 10)));       // a later point's
  EXPECT_FALSE(Tracker::IsAfter(10, 4, at(5, 10)));      // the one before
  EXPECT_TRUE(Tracker::IsAfter(10, 0, at(255, 10)));     // 256 wraps to tag 0: after 255
  EXPECT_FALSE(Tracker::IsAfter(10, 255, at(256, 10)));  // and 255 is before 256
  EXPECT_TRUE(Tracker::IsAfter(10, 132, at(5, 10)));     // 127 points later: still after
  EXPECT_FALSE(Tracker::IsAfter(10, 133, at(5, 10)));    // 128 later reads as 128 earlier
}

TEST(Tracker, LiveSinceAPointCountsWhatWasAllocatedAfterItAndIsStillLive) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 100, MemKind::kDevice, 1));  // before, stays live
  t.OnAlloc(Event(0x2000, 200, MemKind::kDevice, 2));  // before, freed after
  const Tracker::Point p = t.NewPoint();
  EXPECT_EQ(t.WindowPeak(), 300u);
  ASSERT_TRUE(t.OnFree(0x2000));
  t.OnAlloc(Event(0x2000, 40, MemKind::kDevice, 2));      // after, at the freed address
  t.OnAlloc(Event(0x3000, 8, MemKind::kDevice, 3));       // after, freed again
  t.OnAlloc(Event(0x4000, 16, MemKind::kPool, 3));        // after
  t.OnAlloc(Event(0x5000, 64, MemKind::kPinnedHost, 3));  // after, host memory
  ASSERT_TRUE(t.OnFree(0x3000));
  EXPECT_EQ(t.WindowPeak(), 300u);  // the level the window started at; 156 live now
  t.OnAlloc(Event(0x6000, 500, MemKind::kDevice, 4));
  ASSERT_TRUE(t.OnFree(0x6000));
  EXPECT_EQ(t.WindowPeak(), 656u);  // 156 + 500
  const auto since = [&t, &p](uint32_t kinds) {
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> out;
    const std::vector<Tracker::SiteRows> rows = t.LiveSince(p, {kinds});
    for (const auto& [id, f] : rows[0]) out.emplace_back(id, f.bytes, f.count);
    return out;
  };
  using Row = std::tuple<uint32_t, uint64_t, uint64_t>;
  const uint32_t device =
      (1u << static_cast<int>(MemKind::kDevice)) | (1u << static_cast<int>(MemKind::kPool));
  EXPECT_EQ(since(device), (std::vector<Row>{{2, 40, 1}, {3, 16, 1}}));
  EXPECT_EQ(since(1u << static_cast<int>(MemKind::kPinnedHost)), (std::vector<Row>{{3, 64, 1}}));
  // A newer point: nothing since it yet; the older one still sees its own.
  const Tracker::Point q = t.NewPoint();
  EXPECT_TRUE(t.LiveSince(q, {device})[0].empty());
  EXPECT_EQ(since(device).size(), 2u);
  // Groups in one walk: each allocation in the first group that has its kind.
  const uint32_t pinned = 1u << static_cast<int>(MemKind::kPinnedHost);
  const std::vector<Tracker::SiteRows> groups = t.LiveSince(p, {pinned, device | pinned});
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].size(), 1u);
  EXPECT_EQ(groups[0][0].first, 3u);
  EXPECT_EQ(groups[0][0].second.bytes, 64u);
  ASSERT_EQ(groups[1].size(), 2u);
  EXPECT_EQ(groups[1][1].first, 3u);
  EXPECT_EQ(groups[1][1].second.bytes, 16u);  // the pool's, not the pinned memory again
}

TEST(Tracker, UnknownFreeIsCountedNotFatal) {
  Tracker t;
  EXPECT_FALSE(t.OnFree(0xdead0000));
  t.OnAlloc(Event(0x1000, 8, MemKind::kDevice));
  EXPECT_TRUE(t.OnFree(0x1000));
  EXPECT_FALSE(t.OnFree(0x1000));  // double free
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(s.unknown_frees, 2u);
  EXPECT_EQ(s.device_current_bytes, 0u);
}

// An allocation at a live address means its free was missed (a context
// destroyed with it, say): the old one is counted as freed, whatever its size.
// (There is no "same allocation seen twice": the callback layer counts each
// allocation once, and a real driver hands a freed address out again at once.)
TEST(Tracker, AllocationAtALiveAddressReplacesIt) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 256, MemKind::kDevice));
  t.OnAlloc(Event(0x1000, 256, MemKind::kPool));
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(CountsOf(s, MemKind::kDevice), (Counts{0, 256, 1, 1}));
  EXPECT_EQ(CountsOf(s, MemKind::kPool), (Counts{256, 256, 1, 0}));
  EXPECT_EQ(s.device_current_bytes, 256u);
  t.OnAlloc(Event(0x1000, 512, MemKind::kPool));
  const TrackerSnapshot s2 = t.Snapshot();
  EXPECT_EQ(CountsOf(s2, MemKind::kPool), (Counts{512, 512, 2, 1}));
  EXPECT_EQ(s2.device_current_bytes, 512u);
  EXPECT_EQ(s2.live.size(), 1u);
}

// A free recorded at the entry of its call, then undone because the call
// failed: the allocation is back exactly as it was, and counted once.
TEST(Tracker, BeginFreeThenUndoRestoresTheAllocation) {
  Tracker t;
  t.OnAlloc(Event(0x2000, 4096, MemKind::kDevice, /*stack_id=*/3));
  LiveAlloc removed;
  ASSERT_TRUE(t.BeginFree(0x2000, &removed));
  EXPECT_EQ(removed.size, 4096u);
  EXPECT_EQ(removed.stack_id, 3u);
  EXPECT_EQ(t.DeviceCurrentBytes(), 0u);
  EXPECT_FALSE(t.BeginFree(0x2000, &removed)) << "gone until undone";
  t.UndoFree(removed);
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, 1u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).frees, 0u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).current_count, 1u);
  EXPECT_EQ(s.device_current_bytes, 4096u);
  EXPECT_EQ(s.unknown_frees, 0u);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].stack_id, 3u);
  const auto by_site = t.LiveDeviceBytesBySite();
  ASSERT_EQ(by_site.size(), 1u);
  EXPECT_EQ(by_site[0], std::make_pair(3u, uint64_t{4096}));
  EXPECT_TRUE(t.OnFree(0x2000));
  EXPECT_EQ(t.DeviceCurrentBytes(), 0u);
}

// The race that lost allocations: thread A frees X; the driver hands X to
// thread B's allocation before A's free is recorded. With the free recorded
// at A's entry, B's allocation is new and stays live.
TEST(Tracker, AddressReusedBeforeTheFreeingCallReturns) {
  Tracker t;
  t.OnAlloc(Event(0x3000, 8192, MemKind::kDevice, 1));
  LiveAlloc removed;
  ASSERT_TRUE(t.BeginFree(0x3000, &removed));           // A: cudaFree ENTER
  t.OnAlloc(Event(0x3000, 8192, MemKind::kDevice, 2));  // B: cudaMalloc EXIT, same address
  // A: cudaFree EXIT, success: nothing more to do.
  const TrackerSnapshot s = t.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].stack_id, 2u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, 2u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).frees, 1u);
  EXPECT_EQ(s.unknown_frees, 0u);
}

// Pinned and registered host memory is classified anywhere inside its range,
// other kinds at their base only.
TEST(Tracker, ClassifyUsesHostRangesAndLiveBases) {
  Tracker t;
  t.OnAlloc(Event(0x10000, 0x1000, MemKind::kPinnedHost));
  t.OnAlloc(Event(0x20000, 0x100, MemKind::kRegisteredHost));
  t.OnAlloc(Event(0x30000, 0x1000, MemKind::kManaged));
  MemKind kind = MemKind::kDevice;
  ASSERT_TRUE(t.Classify(0x10000, &kind));
  EXPECT_EQ(kind, MemKind::kPinnedHost);
  ASSERT_TRUE(t.Classify(0x10fff, &kind));
  EXPECT_EQ(kind, MemKind::kPinnedHost);
  EXPECT_FALSE(t.Classify(0x11000, &kind));
  ASSERT_TRUE(t.Classify(0x200ff, &kind));
  EXPECT_EQ(kind, MemKind::kRegisteredHost);
  ASSERT_TRUE(t.Classify(0x30000, &kind));
  EXPECT_EQ(kind, MemKind::kManaged);
  EXPECT_FALSE(t.Classify(0x30010, &kind));
  EXPECT_TRUE(t.OnFree(0x10000));
  EXPECT_FALSE(t.Classify(0x10800, &kind));
  LiveAlloc removed;
  ASSERT_TRUE(t.BeginFree(0x20000, &removed));
  EXPECT_FALSE(t.Classify(0x20000, &kind));
  t.UndoFree(removed);
  EXPECT_TRUE(t.Classify(0x20080, &kind));
}

// Sites say how much of what they allocated is host memory.
TEST(Tracker, SitesSplitHostFromDeviceAllocations) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 100, MemKind::kDevice, 5));
  t.OnAlloc(Event(0x2000, 300, MemKind::kPinnedHost, 5));
  t.OnAlloc(Event(0x3000, 50, MemKind::kArray, 6));
  const TrackerSnapshot s = t.Snapshot();
  for (const auto& [id, site] : s.sites) {
    if (id == 5) {
      EXPECT_EQ(site.allocs, 2u);
      EXPECT_EQ(site.alloc_bytes, 400u);
      EXPECT_EQ(site.host_allocs, 1u);
      EXPECT_EQ(site.host_alloc_bytes, 300u);
      EXPECT_EQ(site.live_bytes, 100u);
    } else if (id == 6) {
      EXPECT_EQ(site.host_allocs, 0u);
      EXPECT_EQ(site.live_bytes, 50u);  // arrays are device memory
    }
  }
  EXPECT_EQ(s.device_current_bytes, 150u);
}

TEST(Tracker, ConcurrentAllocAndFreeGiveExactTotals) {
  Tracker t;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, th] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t addr = (static_cast<uint64_t>(th) << 40) + (i + 1) * 512ULL;
        t.OnAlloc(Event(addr, 512, MemKind::kDevice));
        if (i % 2 == 0) t.OnFree(addr);
      }
    });
  }
  // A reader takes snapshots while the writers run.
  std::thread reader([&t] {
    for (int i = 0; i < 50; ++i) (void)t.Snapshot();
  });
  for (auto& th : threads) th.join();
  reader.join();
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(Kind(s, MemKind::kDevice).frees, uint64_t{kThreads} * kPerThread / 2);
  EXPECT_EQ(s.device_current_bytes, uint64_t{kThreads} * kPerThread / 2 * 512);
  EXPECT_EQ(s.live.size(), size_t{kThreads} * kPerThread / 2);
}

// The shards' locks under contention: eight
// threads free each other's allocations, so that every shard is taken by
// several at once, while a reader walks every shard. Counts stay exact, and
// no thread is left counted as holding a gpuwatch lock.
TEST(Tracker, ShardLocksUnderContentionKeepExactCounts) {
  Tracker t;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  std::atomic<int> still_holding{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, &still_holding, th] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t mine = (static_cast<uint64_t>(th) << 40) + (i + 1) * 256ULL;
        const uint64_t next = (static_cast<uint64_t>((th + 1) % kThreads) << 40) + (i + 1) * 256ULL;
        t.OnAlloc(Event(mine, 256, MemKind::kDevice));
        t.OnFree(next);  // the next thread's, allocated by now or not yet
      }
      if (HoldsGpuwatchLock()) still_holding.fetch_add(1);
    });
  }
  std::thread reader([&t] {
    for (int i = 0; i < 50; ++i) (void)t.Snapshot();
  });
  for (auto& th : threads) th.join();
  reader.join();
  const TrackerSnapshot s = t.Snapshot();
  const uint64_t frees = Kind(s, MemKind::kDevice).frees;
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(s.live.size(), uint64_t{kThreads} * kPerThread - frees);
  EXPECT_EQ(s.device_current_bytes, (uint64_t{kThreads} * kPerThread - frees) * 256);
  EXPECT_EQ(still_holding.load(), 0);
  EXPECT_FALSE(HoldsGpuwatchLock());
}

// The shards' own lock (tracker_shard.h): mutual exclusion with more threads
// than cores, so that waiters spin and then sleep in the kernel (a holder is
// preempted inside), and the count of gpuwatch locks held, as Mutex keeps it.
TEST(ShardMutex, ExcludesAndCountsTheLocksHeld) {
  tracker_internal::ShardMutex mu;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  uint64_t guarded = 0;  // a plain counter: exact only if the lock excludes
  std::atomic<int> still_holding{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::lock_guard lock(mu);
        const uint64_t seen = guarded;
        std::atomic_signal_fence(std::memory_order_seq_cst);  // a separate load and store
        guarded = seen + 1;
      }
      if (HoldsGpuwatchLock()) still_holding.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(guarded, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(still_holding.load(), 0);

  EXPECT_FALSE(HoldsGpuwatchLock());
  {
    const std::lock_guard lock(mu);
    EXPECT_EQ(t_gpuwatch_locks_held, 1);
    std::thread other([&] {
      EXPECT_FALSE(mu.try_lock());
      EXPECT_FALSE(HoldsGpuwatchLock()) << "a failed try_lock holds nothing";
    });
    other.join();
  }
  EXPECT_FALSE(HoldsGpuwatchLock());
  ASSERT_TRUE(mu.try_lock());
  EXPECT_TRUE(HoldsGpuwatchLock());
  mu.unlock();
  EXPECT_FALSE(HoldsGpuwatchLock());
}

}  // namespace
}  // namespace gpuwatch
