// The tracker's live table inside: the 16-byte live record and a shard of
// the table (tracker.h). For tracker.cc, tracker_vmm.cc and tracker_ipc.cc only.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

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

inline MemKind KindOf(const LiveRecord& r) { return static_cast<MemKind>((r.packed >> 44) & 0xf); }

inline LiveAlloc AllocOf(uint64_t address, const LiveRecord& r) {
  LiveAlloc a;
  a.address = address;
  a.size = r.packed & kMaxRecordedSize;
  a.time_ms = r.time_ms;
  a.stack_id = r.site & kMaxRecordedStack;
  a.point_tag = static_cast<uint8_t>(r.site >> 24);
  a.phase = static_cast<uint16_t>((r.packed >> 55) | ((r.site >> 21) & 7) << 9);
  a.device = static_cast<int16_t>(static_cast<int>((r.packed >> 48) & 0x7f) - 1);
  a.kind = KindOf(r);
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

// A shard's lock: std::mutex's behaviour (a thread that finds it taken spins
// a little, then sleeps in the kernel until it is released), with an inline
// uncontended path: one compare-and-swap to lock and one exchange to unlock,
// where pthread_mutex_lock and _unlock cost some 60 instructions between them
// (an allocation and a free each take a shard's lock: docs/BENCHMARKS.md).
// It counts in t_gpuwatch_locks_held, as Mutex does (base/mutex.h). Not
// copyable (its atomic is not).
class ShardMutex {
 public:
  void lock() {
    Counted();
    if (!TakeFree()) LockSlow();
  }
  bool try_lock() {
    Counted();
    if (TakeFree()) return true;
    Uncounted();
    return false;
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kWaited) Wake();
    Uncounted();
  }

 private:
  // Free; locked with no thread asleep on it; locked, and a thread may be
  // asleep on it (its unlock wakes one).
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kLocked = 1;
  static constexpr uint32_t kWaited = 2;

  // The count covers the lock from before it is taken until after it is
  // released, so that a signal in between sees it (base/mutex.h).
  static void Counted() {
    ++t_gpuwatch_locks_held;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  static void Uncounted() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    --t_gpuwatch_locks_held;
  }
  bool TakeFree() {
    uint32_t free = kFree;
    return state_.compare_exchange_strong(free, kLocked, std::memory_order_acquire);
  }
  static void CpuRelax() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  [[gnu::noinline, gnu::cold]] void LockSlow() {
    // The holder runs a few hundred instructions: worth a short spin first.
    for (int i = 0; i < 64; ++i) {
      CpuRelax();
      if (state_.load(std::memory_order_relaxed) == kFree && TakeFree()) return;
    }
    // Marked kWaited from here on, even when this thread takes it: another
    // sleeper may be left, which the next unlock then wakes.
    while (state_.exchange(kWaited, std::memory_order_acquire) != kFree) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kWaited, nullptr,
              nullptr, 0);
    }
  }
  [[gnu::noinline]] void Wake() {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }

  std::atomic<uint32_t> state_{kFree};
};
static_assert(sizeof(ShardMutex) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "the futex word is the atomic itself");

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
  mutable tracker_internal::ShardMutex mu;
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
    std::lock_guard lock(shard.mu);
    shard.live.ForEach([&fn](uint64_t address, const tracker_internal::LiveRecord& record) {
      fn(tracker_internal::AllocOf(address, record), record.time_ms);
    });
  }
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_SHARD_H_
