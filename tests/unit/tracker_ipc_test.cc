// CUDA IPC mappings in the tracker: another process's memory, live at the
// open's site but counted in its kind's totals only, with the references the
// driver counts (a second open of a live mapping adds none of memory), a
// close recorded at ENTER and undone when it fails.
#include <gtest/gtest.h>

#include <cstdint>

#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kAt = 0x7f4000000000;  // where the driver mapped it

AllocEvent Opened(uint64_t size, uint32_t stack_id, uint64_t address = kAt) {
  AllocEvent e;
  e.address = address;
  e.size = size;
  e.kind = MemKind::kIpcImported;
  e.stack_id = stack_id;
  return e;
}

const KindTotals& Ipc(const TrackerSnapshot& s) {
  return s.kinds[static_cast<int>(MemKind::kIpcImported)];
}

bool Close(Tracker* t, uint64_t address) {
  Tracker::IpcClose c;
  return t->BeginIpcClose(address, &c);
}

TEST(TrackerIpc, AnOpeningIsLiveAtItsSiteAndNoMemoryOfThisProcess) {
  Tracker t;
  t.OnAlloc(AllocEvent{0x1000, kMiB, MemKind::kDevice, 0, 0, 3, 0});
  t.OnIpcOpen(Opened(3 * kMiB, 7));
  TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Ipc(s).allocs, 1u);
  EXPECT_EQ(Ipc(s).alloc_bytes, 3 * kMiB);
  EXPECT_EQ(Ipc(s).current_bytes, 3 * kMiB);
  EXPECT_EQ(Ipc(s).current_count, 1u);
  EXPECT_EQ(s.device_current_bytes, kMiB);
  EXPECT_EQ(s.device_peak_bytes, kMiB);
  EXPECT_EQ(s.device_bytes_by_device[0], kMiB);
  ASSERT_EQ(s.live.size(), 2u);
  for (const LiveAlloc& a : s.live) {
    if (a.address != kAt) continue;
    EXPECT_EQ(a.kind, MemKind::kIpcImported);
    EXPECT_EQ(a.stack_id, 7u);
    EXPECT_EQ(a.size, 3 * kMiB);
  }
  // No site figures: the site allocated nothing of this process's.
  for (const auto& site : s.sites) EXPECT_NE(site.first, 7u);
  EXPECT_EQ(t.Live(kDeviceKinds, -1).bytes, kMiB);
  EXPECT_EQ(t.Live(kHostKinds, -1).bytes, 0u);
  EXPECT_EQ(t.Live(kImportedKinds, -1).bytes, 3 * kMiB);
  EXPECT_EQ(t.Live(kImportedKinds, 0).count, 1u);
  // Copies from or into it are device memory's.
  MemKind kind = MemKind::kPinnedHost;
  EXPECT_TRUE(t.Classify(kAt, &kind));
  EXPECT_EQ(kind, MemKind::kIpcImported);
  EXPECT_FALSE(t.ClassifyHost(kAt, &kind));
  // What a per-test gate asks for (device and host kinds) does not see it.
  const auto rows = t.LiveSince(Tracker::kStart, {kDeviceKinds, kHostKinds});
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].size(), 1u);
  EXPECT_EQ(rows[0][0].first, 3u);
  EXPECT_TRUE(rows[1].empty());
}

TEST(TrackerIpc, OpenedTwiceClosedTwiceBalances) {
  Tracker t;
  t.OnIpcOpen(Opened(2 * kMiB, 4));
  t.OnIpcOpen(Opened(2 * kMiB, 5));  // the same mapping again: a reference
  TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Ipc(s).allocs, 1u);
  EXPECT_EQ(Ipc(s).current_bytes, 2 * kMiB);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].stack_id, 4u) << "the site of the open that mapped it";
  EXPECT_TRUE(Close(&t, kAt));
  s = t.Snapshot();
  EXPECT_EQ(s.live.size(), 1u) << "one reference left";
  EXPECT_EQ(Ipc(s).frees, 0u);
  EXPECT_TRUE(Close(&t, kAt));
  s = t.Snapshot();
  EXPECT_TRUE(s.live.empty());
  EXPECT_EQ(Ipc(s).frees, 1u);
  EXPECT_EQ(Ipc(s).current_bytes, 0u);
  EXPECT_EQ(Ipc(s).current_count, 0u);
  EXPECT_EQ(Ipc(s).peak_bytes, 2 * kMiB);
  EXPECT_FALSE(Close(&t, kAt)) << "a third close names no mapping";
  EXPECT_EQ(s.unknown_frees, 0u);
}

TEST(TrackerIpc, AFailedCloseIsUndone) {
  Tracker t;
  t.OnIpcOpen(Opened(kMiB, 2));
  Tracker::IpcClose c;
  ASSERT_TRUE(t.BeginIpcClose(kAt, &c));
  EXPECT_TRUE(c.unmapped);
  EXPECT_EQ(t.Snapshot().live.size(), 0u) << "unmapped before the call runs";
  t.UndoIpcClose(c);
  TrackerSnapshot s = t.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].stack_id, 2u);
  EXPECT_EQ(Ipc(s).current_bytes, kMiB);
  EXPECT_EQ(Ipc(s).frees, 0u);
  EXPECT_TRUE(s.sites.empty()) << "no host range or site came back with it";
  MemKind kind = MemKind::kDevice;
  EXPECT_FALSE(t.ClassifyHost(kAt, &kind));
  // The reference came back too: one close unmaps it.
  EXPECT_TRUE(Close(&t, kAt));
  EXPECT_TRUE(t.Snapshot().live.empty());
}

// The driver unmapped it without a close gpuwatch saw (its context was
// destroyed): the next open at the address maps it anew.
TEST(TrackerIpc, AMappingGoneUnseenIsMappedAnew) {
  Tracker t;
  t.OnIpcOpen(Opened(kMiB, 2));
  t.OnContextDestroyed(0, 1u << static_cast<int>(MemKind::kIpcImported));
  EXPECT_TRUE(t.Snapshot().live.empty());
  t.OnIpcOpen(Opened(kMiB, 6));
  const TrackerSnapshot s = t.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].stack_id, 6u);
  EXPECT_EQ(Ipc(s).allocs, 2u);
  EXPECT_EQ(Ipc(s).frees, 1u);
  EXPECT_TRUE(Close(&t, kAt));
  EXPECT_TRUE(t.Snapshot().live.empty());
}

TEST(TrackerIpc, WhilePausedAnOpeningIsKnownNotCounted) {
  Tracker t;
  t.SetPaused(true);
  t.OnIpcOpen(Opened(kMiB, 0));
  t.SetPaused(false);
  TrackerSnapshot s = t.Snapshot();
  EXPECT_TRUE(s.live.empty());
  EXPECT_EQ(Ipc(s).allocs, 0u);
  Tracker::IpcClose c;
  EXPECT_TRUE(t.BeginIpcClose(kAt, &c)) << "its close is no unknown free";
  EXPECT_FALSE(c.unmapped);
  EXPECT_EQ(t.Snapshot().unknown_frees, 0u);
}

}  // namespace
}  // namespace gpuwatch
