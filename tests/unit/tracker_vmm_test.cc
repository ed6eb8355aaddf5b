// VMM memory in the tracker, per physical handle as the driver counts it:
// allocated by cuMemCreate, freed once every mapping is unmapped and the
// handle released, in either order; imported handles counted apart.
#include <gtest/gtest.h>

#include <cstdint>

#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kA = 0x7f0000000000;  // mapping addresses
constexpr uint64_t kB = kA + 64 * kMiB;

AllocEvent Created(uint64_t size, uint32_t stack_id, int device = 0, MemKind kind = MemKind::kVmm) {
  AllocEvent e;
  e.size = size;
  e.kind = kind;
  e.device = device;
  e.stack_id = stack_id;
  return e;
}

const KindTotals& Vmm(const TrackerSnapshot& s) { return s.kinds[static_cast<int>(MemKind::kVmm)]; }
const KindTotals& Imported(const TrackerSnapshot& s) {
  return s.kinds[static_cast<int>(MemKind::kVmmImported)];
}

void Release(Tracker* t, uint64_t handle) {
  Tracker::VmmRelease r;
  EXPECT_TRUE(t->BeginVmmRelease(handle, &r)) << handle;
}

TEST(TrackerVmm, AHandleMappedTwiceIsCountedOnce) {
  Tracker t;
  t.OnVmmCreate(1, Created(4 * kMiB, 5, 1));
  EXPECT_EQ(t.DeviceCurrentBytes(), 4 * kMiB);  // allocated by cuMemCreate, before any mapping
  ASSERT_TRUE(t.OnVmmMap(1, kA, 4 * kMiB));
  ASSERT_TRUE(t.OnVmmMap(1, kB, 4 * kMiB));
  TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Vmm(s).current_bytes, 4 * kMiB);
  EXPECT_EQ(Vmm(s).allocs, 1u);
  EXPECT_EQ(s.device_peak_bytes, 4 * kMiB);
  EXPECT_EQ(s.device_bytes_by_device[1], 4 * kMiB);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_TRUE(Tracker::IsVmmKey(s.live[0].address));
  EXPECT_EQ(s.live[0].stack_id, 5u);  // cuMemCreate's site
  EXPECT_EQ(s.live[0].kind, MemKind::kVmm);
  // Unmapped everywhere but not released: still allocated.
  t.OnVmmUnmap(kA, 4 * kMiB);
  t.OnVmmUnmap(kB, 4 * kMiB);
  EXPECT_EQ(t.DeviceCurrentBytes(), 4 * kMiB);
  Release(&t, 1);
  s = t.Snapshot();
  EXPECT_EQ(Vmm(s).current_bytes, 0u);
  EXPECT_EQ(Vmm(s).frees, 1u);
  EXPECT_EQ(s.unknown_frees, 0u);
  EXPECT_TRUE(s.live.empty());
}

TEST(TrackerVmm, AHandleReleasedWhileMappedIsFreedAtItsLastUnmap) {
  Tracker t;
  t.OnVmmCreate(7, Created(2 * kMiB, 1));
  ASSERT_TRUE(t.OnVmmMap(7, kA, 2 * kMiB));
  ASSERT_TRUE(t.OnVmmMap(7, kB, 2 * kMiB));
  Release(&t, 7);
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  EXPECT_FALSE(t.OnVmmMap(7, kA + 2 * kMiB, 2 * kMiB));  // its value is gone
  t.OnVmmUnmap(kA, 2 * kMiB);
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  t.OnVmmUnmap(kB, 2 * kMiB);
  EXPECT_EQ(t.DeviceCurrentBytes(), 0u);
  EXPECT_EQ(Vmm(t.Snapshot()).frees, 1u);
}

// cuMemRetainAllocationHandle adds a reference to the handle mapped at an
// address; the cuMemRelease that pairs with it frees nothing, and the memory
// goes only with the last reference and the last mapping. A retain through the
// mapping of a handle released while mapped makes it known again; a failed
// release of a retained reference is undone.
TEST(TrackerVmm, ARetainedReferenceIsReleasedWithoutAFree) {
  Tracker t;
  t.OnVmmCreate(7, Created(2 * kMiB, 1));
  ASSERT_TRUE(t.OnVmmMap(7, kA, 2 * kMiB));
  t.OnVmmRetain(7, kA + 4096);
  Tracker::VmmRelease r;
  ASSERT_TRUE(t.BeginVmmRelease(7, &r));
  EXPECT_TRUE(r.retained);
  EXPECT_FALSE(r.freed);
  t.UndoVmmRelease(r);  // failed: the reference is back
  Release(&t, 7);
  t.OnVmmUnmap(kA, 2 * kMiB);  // the creating reference still holds it
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  ASSERT_TRUE(t.OnVmmMap(7, kB, 2 * kMiB));  // its value is still known
  Release(&t, 7);                            // the last reference: mapped, so not yet
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  t.OnVmmRetain(7, kB);  // released while mapped: known again through the mapping
  t.OnVmmUnmap(kB, 2 * kMiB);
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  Release(&t, 7);
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Vmm(s).current_bytes, 0u);
  EXPECT_EQ(Vmm(s).allocs, 1u);
  EXPECT_EQ(Vmm(s).frees, 1u);
  EXPECT_EQ(s.unknown_frees, 0u);
  t.OnVmmRetain(8, kA);  // nothing mapped there: nothing known
  EXPECT_FALSE(t.BeginVmmRelease(8, &r));
}

TEST(TrackerVmm, OneUnmapEndsEveryMappingInItsRange) {
  Tracker t;
  for (uint64_t h = 1; h <= 40; ++h) {
    t.OnVmmCreate(h, Created(2 * kMiB, 1));
    ASSERT_TRUE(t.OnVmmMap(h, kA + (h - 1) * 2 * kMiB, 2 * kMiB));
    Release(&t, h);
  }
  t.OnVmmUnmap(kA, 39 * 2 * kMiB);  // more mappings than one batch
  EXPECT_EQ(t.DeviceCurrentBytes(), 2 * kMiB);
  EXPECT_EQ(Vmm(t.Snapshot()).frees, 39u);
  t.OnVmmUnmap(kA, 2 * kMiB);  // nothing mapped there any more
  EXPECT_EQ(t.Snapshot().unknown_frees, 1u);
}

TEST(TrackerVmm, AFailedReleaseIsUndone) {
  Tracker t;
  t.OnVmmCreate(3, Created(2 * kMiB, 1));
  Tracker::VmmRelease r;
  ASSERT_TRUE(t.BeginVmmRelease(3, &r));
  EXPECT_TRUE(r.freed);
  EXPECT_EQ(t.DeviceCurrentBytes(), 0u);
  t.UndoVmmRelease(r);
  TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Vmm(s).current_bytes, 2 * kMiB);
  EXPECT_EQ(Vmm(s).frees, 0u);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_TRUE(t.OnVmmMap(3, kA, 2 * kMiB));  // the handle is known again
  EXPECT_FALSE(t.BeginVmmRelease(99, &r));   // never seen
}

// The driver may give a released handle's value to the next cuMemCreate
// while the old memory is still mapped.
TEST(TrackerVmm, AReusedHandleValueIsANewAllocation) {
  Tracker t;
  t.OnVmmCreate(5, Created(2 * kMiB, 1));
  ASSERT_TRUE(t.OnVmmMap(5, kA, 2 * kMiB));
  Release(&t, 5);
  t.OnVmmCreate(5, Created(4 * kMiB, 2));
  EXPECT_EQ(t.DeviceCurrentBytes(), 6 * kMiB);
  t.OnVmmUnmap(kA, 2 * kMiB);  // the first one's last mapping
  EXPECT_EQ(t.DeviceCurrentBytes(), 4 * kMiB);
  Release(&t, 5);
  EXPECT_EQ(t.DeviceCurrentBytes(), 0u);
  EXPECT_EQ(Vmm(t.Snapshot()).frees, 2u);
}

TEST(TrackerVmm, ImportedMemoryIsCountedApartAndNeverLive) {
  Tracker t;
  t.OnVmmImport(9);
  ASSERT_TRUE(t.OnVmmMap(9, kA, 2 * kMiB));
  ASSERT_TRUE(t.OnVmmMap(9, kB, 2 * kMiB));
  TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Imported(s).allocs, 1u);
  EXPECT_EQ(Imported(s).alloc_bytes, 2 * kMiB);  // its first mapping's size
  EXPECT_EQ(Imported(s).current_bytes, 2 * kMiB);
  EXPECT_EQ(Imported(s).current_count, 1u);
  EXPECT_EQ(s.device_current_bytes, 0u);
  EXPECT_EQ(Vmm(s).allocs, 0u);
  EXPECT_TRUE(s.live.empty());
  MemKind kind = MemKind::kDevice;
  EXPECT_TRUE(t.Classify(kB + 4096, &kind));
  EXPECT_EQ(kind, MemKind::kVmmImported);
  EXPECT_EQ(t.Live(kDeviceKinds, -1).bytes, 0u);
  EXPECT_EQ(t.Live(1u << static_cast<int>(MemKind::kVmmImported), -1).count, 1u);
  Release(&t, 9);
  t.OnVmmUnmap(kA, 2 * kMiB);
  t.OnVmmUnmap(kB, 2 * kMiB);
  s = t.Snapshot();
  EXPECT_EQ(Imported(s).current_bytes, 0u);
  EXPECT_EQ(Imported(s).current_count, 0u);
  EXPECT_EQ(Imported(s).frees, 1u);
  EXPECT_EQ(Imported(s).peak_bytes, 2 * kMiB);
}

TEST(TrackerVmm, MappingsClassifyCopies) {
  Tracker t;
  t.OnVmmCreate(1, Created(2 * kMiB, 1, 1));
  t.OnVmmCreate(2, Created(2 * kMiB, 1, 0, MemKind::kPinnedHost));
  ASSERT_TRUE(t.OnVmmMap(1, kA, 2 * kMiB));
  ASSERT_TRUE(t.OnVmmMap(2, kB, 2 * kMiB));
  MemKind kind = MemKind::kDevice;
  int device = -1;
  EXPECT_TRUE(t.Classify(kA + 100, &kind, &device));
  EXPECT_EQ(kind, MemKind::kVmm);
  EXPECT_EQ(device, 1);
  EXPECT_FALSE(t.Classify(kA + 2 * kMiB, &kind));
  EXPECT_TRUE(t.ClassifyHost(kB + 100, &kind));  // host memory mapped for the device
  EXPECT_EQ(kind, MemKind::kPinnedHost);
  t.OnVmmUnmap(kB, 2 * kMiB);
  EXPECT_FALSE(t.ClassifyHost(kB + 100, &kind));
  EXPECT_EQ(t.Snapshot().kinds[static_cast<int>(MemKind::kPinnedHost)].current_bytes, 2 * kMiB);
}

TEST(TrackerVmm, AHandleMadeWhilePausedIsKnownButNotCounted) {
  Tracker t;
  t.SetPaused(true);
  t.OnVmmCreate(4, Created(2 * kMiB, 1));
  t.SetPaused(false);
  EXPECT_TRUE(t.OnVmmMap(4, kA, 2 * kMiB));
  t.OnVmmUnmap(kA, 2 * kMiB);
  Release(&t, 4);
  const TrackerSnapshot s = t.Snapshot();
  EXPECT_EQ(Vmm(s).allocs, 0u);
  EXPECT_EQ(Vmm(s).frees, 0u);
  EXPECT_EQ(s.unknown_frees, 0u);
  EXPECT_EQ(s.device_peak_bytes, 0u);
}

}  // namespace
}  // namespace gpuwatch
