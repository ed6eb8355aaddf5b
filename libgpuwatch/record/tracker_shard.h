// The tracker's live table inside: the 16-byte live record and a shard of
// the table (tracker.h). For tracker.cc, tracker_vmm.cc and tracker_ipc.cc only.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "libgpuwatch/base/address_map.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {

namespace tracker_internal {

// What the live table stores per allocation, in 16 bytes (a 24-byte slot with
// its key, the address): size, kind, device and the phase's low bits packed
// into one word, the time to the millisecond, the site with the phase's high
// bits and the point tag.
struct LiveRecord {
  uint64_t packed = 0;   // size (bits 0-43), kind (44-47), device + 1 (48-54), phase (55-63)
  uint32_t time_ms = 0;  // since the tracker started; saturates after 49 days
  uint32_t site = 0;     // stack id (bits 0-20; larger ids are site 0), phase >> 9 (21-23),
                         // point tag (24-31)
};
static_assert(sizeof(LiveRecord) == 16);

constexpr uint32_t kMaxRecordedStack = (1u << 21) - 1;
static_assert(Tracker::kDefaultMaxSites <= kMaxRecordedStack);
static_assert(kMaxPhasePaths < (1u << 12));
constexpr int kSizeBits = 44;
constexpr uint64_t kMaxRecordedSize = (uint64_t{1} << kSizeBits) - 1;
constexpr int kMaxRecordedDevice = 126;

inline LiveRecord RecordOf(const LiveAlloc& a) {
  const auto device = static_cast<uint64_t>(std::clamp<int>(a.device, -1, kMaxRecordedDevice) + 1);
  const uint32_t phase = a.phase <= kMaxPhasePaths ? a.phase : 0;
  LiveRecord r;
  r.packed = std::min(a.size, kMaxRecordedSize) | uint64_t{static_cast<uint8_t>(a.kind)} << 44 |
             device << 48 | uint64_t{phase & 0x1ff} << 55;
  r.time_ms = a.time_ms;
  const uint32_t id = a.stack_id <= kMaxRecordedStack ? a.stack_id : 0;
  r.site = id | (phase >> 9) << 21 | uint32_t{a.point_tag} << 24;
  return r;
}

inline LiveAlloc AllocOf(uint64_t address, const LiveRecord& r) {
  LiveAlloc a;
  a.address = address;
  a.size = r.packed & kMaxRecordedSize;
  a.time_ms = r.time_ms;
  a.stack_id = r.site & kMaxRecordedStack;
  a.point_tag = static_cast<uint8_t>(r.site >> 24);
  a.phase = static_cast<uint16_t>((r.packed >> 55) | ((r.site >> 21) & 7) << 9);
  a.device = static_cast<int16_t>(static_cast<int>((r.packed >> 48) & 0x7f) - 1);
  a.kind = static_cast<MemKind>((r.packed >> 44) & 0xf);
  return a;
}

inline int DeviceSlot(int device) {
  return device < 0 ? 0 : std::min(device, kMaxTrackedDevices - 1);
}

inline void RaiseTo(std::atomic<uint64_t>& peak, uint64_t value) {
  uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Adds to a counter that only one thread at a time writes (under a shard's
// lock): a plain load and store, no locked read-modify-write. Readers without
// the lock see the old or the new value.
inline void Add(std::atomic<uint64_t>& counter, uint64_t delta) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}
inline void Sub(std::atomic<uint64_t>& counter, uint64_t delta) {
  counter.store(counter.load(std::memory_order_relaxed) - delta, std::memory_order_relaxed);
}

}  // namespace tracker_internal

// Counts of one kind of memory in one shard, written under the shard's lock.
// The live count is allocs - frees (an allocation recorded twice is taken
// back from allocs).
struct KindCounts {
  std::atomic<uint64_t> allocs{0};
  std::atomic<uint64_t> alloc_bytes{0};
  std::atomic<uint64_t> frees{0};
};

// Laid out in cache lines: the lock with the device kind's counts, then the
// table's header with the next kind's, so that an allocation of device memory
// touches two lines of its shard besides the table's slots, and no line is
// shared with another shard.
struct alignas(64) Tracker::Shard {
  mutable Mutex mu;
  KindCounts device;                                // MemKind::kDevice; written under mu
  AddressMap<tracker_internal::LiveRecord> live;    // guarded by mu
  std::array<KindCounts, kNumMemKinds - 1> others;  // the other kinds; written under mu

  KindCounts& Counts(MemKind kind) {
    return kind == MemKind::kDevice ? device : others[static_cast<int>(kind) - 1];
  }
  const KindCounts& Counts(int kind) const { return kind == 0 ? device : others[kind - 1]; }
};
static_assert(static_cast<int>(MemKind::kDevice) == 0);

template <typename Fn>
void Tracker::ForEachLive(Fn fn) const {
  shard_walks_.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    std::lock_guard<Mutex> lock(shard.mu);
    shard.live.ForEach([&fn](uint64_t address, const tracker_internal::LiveRecord& record) {
      fn(tracker_internal::AllocOf(address, record), record.time_ms);
    });
  }
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_
