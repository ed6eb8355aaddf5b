// Pool regions: the blocks a sub-allocator hands out inside the memory it got
// from CUDA, as the program declares them through NVTX's memory extension
// (nvtxMemHeapRegister, nvtxMemRegionsRegister, ...; interpose/nvtx/nvtx.cc).
//
// A pool allocates a segment (cudaMalloc: the tracker's allocation, named by
// the pool's stack), registers it as a heap, and registers each block it
// hands out as a region of that heap, from the stack of the code that asked
// for it. A region still registered when a report is written is live; a
// report shows it inside the segment that holds it and names it by the stack
// that registered it, so that a leaked block of a pool points at its user,
// not at the pool.
//
// The rules, in NVTX's words: a region ends when it is unregistered, or when
// its heap is reset (nvtxMemHeapReset: "as if it were a fresh heap").
// Unregistering a heap while regions of it are still registered leaves them
// live: the pool was torn down with blocks out, which is the leak this table
// is for. A region registered at the address of a live one replaces it (an
// unregistration was missed), as the tracker does for allocations.
//
// Thread-safety: every method may be called from any thread. Regions live in
// sharded address maps, one short lock per call; heaps (few, registered once
// per segment) in one map under a lock. Nothing here runs inside a CUPTI
// callback: the program calls NVTX from its own code.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_REGIONS_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_REGIONS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

// A registered heap: a range of memory a pool sub-allocates.
struct PoolHeap {
  uint64_t handle = 0;  // what the program names it by (NVTX: its address, unless a
                        // chained tool made another handle)
  uint64_t address = 0;
  uint64_t size = 0;
  uint32_t stack_id = 0;  // the stack that registered it
  uint32_t time_ms = 0;   // the tracker's clock (Tracker::NowNs) when registered
};

// A live region.
struct PoolRegion {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t heap = 0;      // the handle of its heap (0: the process-wide heap)
  uint32_t stack_id = 0;  // the stack that registered it
  uint32_t time_ms = 0;
  uint16_t phase = 0;  // the phase it was registered in (phases.h); 0: none
};

// What happened to regions and heaps, for the report's counters.
struct RegionCounters {
  uint64_t registered = 0;
  uint64_t unregistered = 0;
  uint64_t resized = 0;
  uint64_t released_by_reset = 0;    // regions ended by nvtxMemHeapReset
  uint64_t replaced = 0;             // registered at a live region's address
  uint64_t unknown_unregisters = 0;  // of addresses no live region has
  uint64_t unknown_resizes = 0;
  uint64_t unknown_heaps = 0;  // regions registered in a heap never registered (or gone)
  uint64_t dropped = 0;        // not recorded: the table could not grow
  uint64_t heaps_registered = 0;
  uint64_t heaps_unregistered = 0;
  uint64_t heaps_reset = 0;
  uint64_t heaps_dropped = 0;  // not recorded: kMaxHeaps were registered at once
};

struct RegionsSnapshot {
  std::vector<PoolRegion> live;  // unordered
  std::vector<PoolHeap> heaps;   // registered now, by handle
  RegionCounters counters;

  bool empty() const { return live.empty() && heaps.empty() && counters.registered == 0; }
};

class RegionTable {
 public:
  // Heaps registered at once, at most (a pool registers one per segment).
  static constexpr size_t kMaxHeaps = 1 << 16;

  RegionTable();
  ~RegionTable();
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  void RegisterHeap(const PoolHeap& heap);
  // Forgets the heap; its regions stay live (see above). False: not registered.
  bool UnregisterHeap(uint64_t handle);
  // Ends every region registered in the heap `handle` (0: the process-wide
  // heap); returns how many.
  uint64_t ResetHeap(uint64_t handle);

  void Register(const PoolRegion& region);
  // False (and counted) when no live region starts at `address`.
  bool Resize(uint64_t address, uint64_t size);
  bool Unregister(uint64_t address);

  uint64_t live_count() const { return live_.load(std::memory_order_relaxed); }

  RegionsSnapshot Snapshot() const;

  // With a chained NVTX tool, region handles are that tool's: the address
  // each stands for, so that an unregistration by handle can be followed.
  // At most kMaxHandles; an entry leaves when its handle is unregistered.
  static constexpr size_t kMaxHandles = size_t{1} << 20;
  void RememberHandle(uint64_t handle, uint64_t address);
  // The address `handle` stands for, forgotten; 0 when unknown.
  uint64_t TakeHandle(uint64_t handle);

  // For pthread_atfork, as Tracker's.
  void LockForFork();
  void UnlockAfterFork();

 private:
  struct Shard;
  static constexpr int kShards = 16;
  Shard& ShardFor(uint64_t address) const;
  bool HeapKnown(uint64_t handle) const;

  std::unique_ptr<Shard[]> shards_;
  std::atomic<uint64_t> live_{0};
  mutable Mutex heap_mu_;
  std::map<uint64_t, PoolHeap> heaps_;  // by handle; guarded by heap_mu_
  Mutex handle_mu_;
  std::unordered_map<uint64_t, uint64_t> handles_;  // guarded by handle_mu_

  std::atomic<uint64_t> registered_{0};
  std::atomic<uint64_t> unregistered_{0};
  std::atomic<uint64_t> resized_{0};
  std::atomic<uint64_t> released_by_reset_{0};
  std::atomic<uint64_t> replaced_{0};
  std::atomic<uint64_t> unknown_unregisters_{0};
  std::atomic<uint64_t> unknown_resizes_{0};
  std::atomic<uint64_t> unknown_heaps_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> heaps_registered_{0};
  std::atomic<uint64_t> heaps_unregistered_{0};
  std::atomic<uint64_t> heaps_reset_{0};
  std::atomic<uint64_t> heaps_dropped_{0};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_REGIONS_H_
