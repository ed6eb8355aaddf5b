#include "libgpuwatch/tracker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpuwatch {
namespace {

AllocEvent Event(uint64_t address, uint64_t size, MemKind kind) {
  AllocEvent e;
  e.address = address;
  e.size = size;
  e.kind = kind;
  return e;
}

const KindTotals& Kind(const TrackerSnapshot& s, MemKind k) { return s.kinds[static_cast<int>(k)]; }

TEST(Tracker, CountsCurrentPeakAndKindsApart) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 100, MemKind::kDevice));
  t.OnAlloc(Event(0x2000, 50, MemKind::kDevice));
  t.OnAlloc(Event(0x3000, 1000, MemKind::kPinnedHost));
  EXPECT_TRUE(t.OnFree(0x1000));
  t.OnAlloc(Event(0x4000, 20, MemKind::kPool));
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Kind(s, MemKind::kDevice).current_bytes, 50u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).peak_bytes, 150u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, 2u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).frees, 1u);
  EXPECT_EQ(Kind(s, MemKind::kPinnedHost).current_bytes, 1000u);
  // Pinned host bytes never count as device bytes.
  EXPECT_EQ(s.device_current_bytes, 70u);
  EXPECT_EQ(s.device_peak_bytes, 150u);
  EXPECT_EQ(s.live.size(), 3u);
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

// With injection the first runtime call's nested driver allocation is seen
// before the runtime's own EXIT: the same allocation, reported twice.
TEST(Tracker, SameAllocationSeenTwiceCountsOnce) {
  Tracker t;
  t.OnAlloc(Event(0x1000, 256, MemKind::kDevice));
  t.OnAlloc(Event(0x1000, 256, MemKind::kPool));
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Kind(s, MemKind::kDevice).allocs, 0u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).current_bytes, 0u);
  EXPECT_EQ(Kind(s, MemKind::kDevice).frees, 0u);
  EXPECT_EQ(Kind(s, MemKind::kPool).allocs, 1u);
  EXPECT_EQ(Kind(s, MemKind::kPool).current_bytes, 256u);
  EXPECT_EQ(s.device_current_bytes, 256u);
  // A different size at a live address is a free we never saw.
  t.OnAlloc(Event(0x1000, 512, MemKind::kPool));
  const TrackerSnapshot s2 = t.Snapshot();
  EXPECT_EQ(Kind(s2, MemKind::kPool).allocs, 2u);
  EXPECT_EQ(Kind(s2, MemKind::kPool).frees, 1u);
  EXPECT_EQ(s2.device_current_bytes, 512u);
}

TEST(Tracker, UnmapRangeFreesEveryMappingInside) {
  Tracker t;
  t.OnAlloc(Event(0x100000, 0x1000, MemKind::kVmm));
  t.OnAlloc(Event(0x101000, 0x1000, MemKind::kVmm));
  t.OnAlloc(Event(0x102000, 0x1000, MemKind::kVmm));
  t.OnUnmapRange(0x100000, 0x2000);
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Kind(s, MemKind::kVmm).current_bytes, 0x1000u);
  EXPECT_EQ(Kind(s, MemKind::kVmm).frees, 2u);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x102000u);
}

TEST(Tracker, ConcurrentAllocAndFreeGiveExactTotals) {
  Tracker t;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
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

}  // namespace
}  // namespace gpuwatch
