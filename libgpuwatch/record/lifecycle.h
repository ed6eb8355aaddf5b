// Process lifecycle figures: CUDA initialisation latency, time the host spent
// blocked in synchronisation, teardown, and how the process ended.
//
// Written from CUDA callbacks (atomics only) and read by report writers.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_LIFECYCLE_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_LIFECYCLE_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace gpuwatch {

// What the host waited for.
enum class SyncKind : uint8_t { kDevice = 0, kStream, kEvent, kCopy };
inline constexpr int kNumSyncKinds = 4;
const char* SyncKindName(SyncKind kind);

struct Lifecycle {
  // Times in ns on the tracker's clock (Tracker::NowNs). 0 = not seen.
  std::atomic<uint64_t> first_call_ns{0};     // first CUDA API call seen
  std::atomic<uint64_t> context_ready_ns{0};  // first context created
  std::atomic<uint64_t> first_launch_ns{0};   // first kernel launch recorded
  bool first_call_observed = true;            // false when attached inside cuInit (injection)
  std::array<std::atomic<uint64_t>, kNumSyncKinds> sync_ns{};
  std::array<std::atomic<uint64_t>, kNumSyncKinds> sync_count{};
  std::atomic<int> exit_status{-1};  // set by the exit handler
  // Contexts destroyed while the process ran (cudaDeviceReset, ...), and the
  // allocations the driver freed with them; destroys whose memory was kept
  // live because other contexts shared the device (gpuwatch cannot tell
  // which context made an allocation).
  std::atomic<uint64_t> contexts_created{0};  // as CUPTI reported them
  std::atomic<uint64_t> contexts_destroyed{0};
  std::atomic<uint64_t> context_freed_count{0};
  std::atomic<uint64_t> context_freed_bytes{0};
  std::atomic<uint64_t> context_destroys_kept{0};
  // Contexts alive per device (the tracker's device slots), as CUPTI
  // reported their creation: a context made before gpuwatch attached is not
  // counted (0 reads as one). A fork child starts with none, as the driver's.
  static constexpr int kDeviceSlots = 64;
  std::array<std::atomic<int>, kDeviceSlots> contexts_alive{};

  // Records `now` as the first call if none was recorded yet; true when
  // this one was it (of threads racing to it, one).
  bool FirstCall(uint64_t now) {
    uint64_t expected = 0;
    return first_call_ns.compare_exchange_strong(expected, now, std::memory_order_relaxed);
  }
  void ContextReady(uint64_t now) {
    uint64_t expected = 0;
    context_ready_ns.compare_exchange_strong(expected, now, std::memory_order_relaxed);
  }
  void FirstLaunch(uint64_t now) {
    uint64_t expected = 0;
    first_launch_ns.compare_exchange_strong(expected, now, std::memory_order_relaxed);
  }
  void Blocked(SyncKind kind, uint64_t ns) {
    sync_ns[static_cast<int>(kind)].fetch_add(ns, std::memory_order_relaxed);
    sync_count[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
};

// Plain figures for a report.
struct LifecycleFigures {
  uint64_t first_call_ns = 0;
  uint64_t context_ready_ns = 0;
  uint64_t first_launch_ns = 0;
  bool first_call_observed = true;
  std::array<uint64_t, kNumSyncKinds> sync_ns{};
  std::array<uint64_t, kNumSyncKinds> sync_count{};
  int64_t teardown_ns = -1;  // -1: not measured (the report was written before teardown)
  int exit_status = -1;      // -1: unknown or not exited yet
  uint64_t contexts_created = 0;
  uint64_t contexts_destroyed = 0;
  uint64_t context_freed_count = 0;
  uint64_t context_freed_bytes = 0;
  uint64_t context_destroys_kept = 0;
};

inline LifecycleFigures LifecycleFiguresOf(const Lifecycle& l) {
  LifecycleFigures f;
  f.first_call_ns = l.first_call_ns.load(std::memory_order_relaxed);
  f.context_ready_ns = l.context_ready_ns.load(std::memory_order_relaxed);
  f.first_launch_ns = l.first_launch_ns.load(std::memory_order_relaxed);
  f.first_call_observed = l.first_call_observed;
  for (int i = 0; i < kNumSyncKinds; ++i) {
    f.sync_ns[i] = l.sync_ns[i].load(std::memory_order_relaxed);
    f.sync_count[i] = l.sync_count[i].load(std::memory_order_relaxed);
  }
  f.exit_status = l.exit_status.load(std::memory_order_relaxed);
  f.contexts_created = l.contexts_created.load(std::memory_order_relaxed);
  f.contexts_destroyed = l.contexts_destroyed.load(std::memory_order_relaxed);
  f.context_freed_count = l.context_freed_count.load(std::memory_order_relaxed);
  f.context_freed_bytes = l.context_freed_bytes.load(std::memory_order_relaxed);
  f.context_destroys_kept = l.context_destroys_kept.load(std::memory_order_relaxed);
  return f;
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_LIFECYCLE_H_
