// The in-process state of gpuwatch: what is live, what was allocated, copied
// and launched.
//
// Every On* method is called from CUDA API callbacks on the application's
// threads, concurrently. They take at most one short, sharded lock and
// allocate only when a table grows. Snapshot() is for report writers; it may
// run concurrently with the On* methods and sees a consistent view of each
// shard.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/event.h"

namespace gpuwatch {

class PhaseStats;
class Trace;

// Devices with their own live and peak counters; higher ordinals share the last.
inline constexpr int kMaxTrackedDevices = 64;

// One live allocation. The live table stores it packed in 16 bytes besides
// its key (the address): a 24-byte slot, 27 to 34 bytes per live allocation at
// the table's load factor (70% to 88%, base/address_map.h; docs/BENCHMARKS.md).
struct LiveAlloc {
  uint64_t address = 0;
  uint64_t size = 0;     // at most 2^44 - 1 (larger requests are recorded as that)
  uint32_t time_ms = 0;  // since the tracker started; saturates after 49 days
  uint32_t stack_id = 0;
  uint16_t phase = 0;  // the phase it was made in (phases.h); 0: none
  int16_t device = 0;  // -1 to 126 (higher ordinals are recorded as 126)
  MemKind kind = MemKind::kDevice;
  uint8_t point_tag = 0;  // the point generation it was made in, mod 256 (Tracker::Point)
};
static_assert(sizeof(LiveAlloc) == 32, "LiveAlloc is copied once per live allocation per report");

struct KindTotals {
  uint64_t current_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t current_count = 0;
  uint64_t allocs = 0;
  uint64_t alloc_bytes = 0;
  uint64_t frees = 0;
};

// Allocation sizes per site, in a few fixed buckets, each 4 times the last:
// up to 1 KiB, up to 4 KiB, ... up to 1 GiB, and over 1 GiB (the report's
// `sites[].sizes`, docs/report-format.md).
inline constexpr int kSizeBuckets = 12;
// The bucket of an allocation of `size` bytes: a bit width, a shift, a min.
inline int SizeBucket(uint64_t size) {
  if (size <= 1024) return 0;
  const int b = (64 - __builtin_clzll(size - 1) - 9) / 2;
  return b < kSizeBuckets - 1 ? b : kSizeBuckets - 1;
}

// Totals of one allocation site (one interned stack id; 0 = no stack).
struct SiteTotals {
  uint64_t live_bytes = 0;  // device kinds
  uint64_t live_count = 0;  // device kinds
  uint64_t allocs = 0;      // every kind
  uint64_t alloc_bytes = 0;
  uint64_t largest = 0;
  uint64_t host_allocs = 0;  // of allocs and alloc_bytes: pinned and registered host memory
  uint64_t host_alloc_bytes = 0;
  uint64_t frees = 0;  // its allocations freed by a free call (OnFreeDone)
  // Frees of a churn kind (IsChurnKind) that left the site with none of
  // that kind live: each a cycle of an allocate-and-free loop.
  uint64_t churn_cycles = 0;
  uint64_t call_ns = 0;  // time in its allocation calls and its allocations' free calls
  std::array<uint64_t, kSizeBuckets> sizes{};  // allocations (every kind) by SizeBucket
};

struct CopyTotals {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

// A copy of the tracker's state for a report.
struct TrackerSnapshot {
  uint64_t time_ns = 0;
  std::array<KindTotals, kNumMemKinds> kinds{};
  std::array<CopyTotals, kNumCopyKinds> copies{};
  uint64_t launches = 0;
  uint64_t unknown_frees = 0;
  uint64_t dropped_allocs = 0;
  uint64_t device_current_bytes = 0;  // all device kinds together
  uint64_t device_peak_bytes = 0;
  std::vector<LiveAlloc> live;  // unordered
  // Sites that ever allocated, by stack id (device and host kinds together).
  std::vector<std::pair<uint32_t, SiteTotals>> sites;
  // Device bytes live per site at the last peak capture, and the device total
  // at that moment (within 1/64 of device_peak_bytes; equal in small programs).
  std::vector<std::pair<uint32_t, uint64_t>> peak_sites;
  uint64_t peak_sites_device_bytes = 0;
  uint64_t peak_sites_time_ns = 0;
  // Bytes of each kind live when the peak's sites were captured: the
  // breakdown of peak_sites_device_bytes (the device kinds add up to it).
  std::array<uint64_t, kNumMemKinds> peak_kinds{};
  // What was live, per site, as Tracker::LiveBySite() captures it (from the
  // per-site counters): `live` is empty then, and `live_by_site` set.
  struct SiteLive {
    uint64_t count = 0;           // device kinds
    uint64_t host_count = 0;      // pinned and registered host memory
    uint64_t imported_count = 0;  // another process's memory (CUDA IPC)
    std::array<uint64_t, kNumMemKinds> kind_bytes{};
  };
  bool live_by_site = false;
  std::vector<std::pair<uint32_t, SiteLive>> site_live;  // sites with memory live, by id
  // Device bytes (device kinds) live now and at their peak, per device ordinal.
  std::array<uint64_t, kMaxTrackedDevices> device_bytes_by_device{};
  std::array<uint64_t, kMaxTrackedDevices> device_peak_bytes_by_device{};
};

// Tracker::EventCount() as of the snapshot: the same counters, as it read
// them. A checkpoint records this, not a count read before or after its
// snapshot, so that an event is counted as written exactly when the report
// holds it.
inline uint64_t EventCountOf(const TrackerSnapshot& snap) {
  uint64_t n = snap.launches;
  for (const KindTotals& k : snap.kinds) n += k.allocs + k.frees;
  for (const CopyTotals& c : snap.copies) n += c.count;
  return n;
}

class Tracker {
 public:
  // `max_sites`: stack ids above it are accounted under site 0.
  explicit Tracker(uint32_t max_sites = kDefaultMaxSites);
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Records a successful allocation. A second allocation at a live address
  // means a free was missed (memory a context took with it when it was
  // destroyed, say): the old entry is replaced and counted as freed.
  void OnAlloc(const AllocEvent& event);

  // Records a free. Returns false, and counts it, when the address is not live.
  bool OnFree(uint64_t address);

  // A free in two steps, for frees seen at the entry of the call: the memory
  // can be handed to another thread's allocation before the freeing call
  // returns, so the free is recorded before the call runs. BeginFree removes
  // the allocation (false when the address is not live; nothing is counted
  // then); UndoFree puts it back as it was when the call failed.
  bool BeginFree(uint64_t address, LiveAlloc* removed);
  void UndoFree(const LiveAlloc& removed);
  // The end of a free whose BeginFree removed `removed`, when the call
  // succeeded: counts it for its site (frees, churn_cycles) with the
  // call's time in Ticks() (0: not timed). A few relaxed adds.
  void OnFreeDone(const LiveAlloc& removed, uint64_t call_ticks);
  // A free of an address that was not live (counted in unknown_frees).
  void CountUnknownFree() { unknown_frees_.fetch_add(1, std::memory_order_relaxed); }

  // VMM memory, counted per physical handle as the driver counts it: a
  // handle's memory is allocated by cuMemCreate and freed once every mapping
  // of it is unmapped and the handle is released, in either order (cuda.h).
  // A second mapping of a handle adds no memory. A handle's live entry is
  // keyed by a key of the tracker's own (IsVmmKey), never by an address.
  //
  // cuMemCreate: `event` without its address (kind kVmm, or kPinnedHost for
  // host memory). While paused the handle is known, not counted.
  void OnVmmCreate(uint64_t handle, const AllocEvent& event);
  // cuMemImportFromShareableHandle: another process's memory, of kind
  // kVmmImported: counted apart (allocs, frees, bytes), neither device nor
  // host memory, never live. Its bytes are those of its first mapping (an
  // import does not say its size).
  void OnVmmImport(uint64_t handle);
  // cuMemMap of the handle at [address, address + size). False, doing
  // nothing, when the handle is unknown (made before attach): the caller then
  // makes it known with OnVmmCreate (the mapping's size, at its site) first.
  bool OnVmmMap(uint64_t handle, uint64_t address, uint64_t size);
  // cuMemUnmap: every mapping inside [address, address + size) is gone; an
  // unmap that ends none is counted in unknown_frees.
  void OnVmmUnmap(uint64_t address, uint64_t size);
  // cuMemRetainAllocationHandle, at a successful EXIT: the handle mapped at
  // `address` has one reference more, which a cuMemRelease drops without
  // freeing anything. A handle released while still mapped is known again.
  void OnVmmRetain(uint64_t handle, uint64_t address);
  // cuMemRelease, in two steps like a free: at the call's ENTER a retained
  // reference is dropped or, with none left, the handle's value is forgotten
  // (the driver may give it to another thread's cuMemCreate at once) and its
  // memory freed when no mapping is left; UndoVmmRelease puts it back when
  // the call failed. False: the handle is unknown (nothing to undo).
  struct VmmMemory {
    uint64_t key = 0;   // its live entry's key
    uint64_t size = 0;  // imported: its first mapping's, 0 until then
    uint32_t maps = 0;
    uint32_t retains = 0;  // cuMemRetainAllocationHandle references not released yet
    bool released = false;
    bool counted = false;  // made while not paused: live (kVmm) or counted (kVmmImported)
    MemKind kind = MemKind::kVmm;
    int32_t device = 0;
  };
  struct VmmRelease {
    uint64_t handle = 0;
    bool retained = false;  // a retained reference dropped, nothing else
    bool freed = false;     // its memory too: `memory` and `removed` hold it
    VmmMemory memory;
    LiveAlloc removed;
  };
  bool BeginVmmRelease(uint64_t handle, VmmRelease* release);
  void UndoVmmRelease(const VmmRelease& release);
  // CUDA IPC (tracker_ipc.cc). cuIpcOpenMemHandle: another process's memory
  // mapped at `event.address` (kind kIpcImported), live at the open's site
  // and counted in that kind's totals only: neither device nor host memory,
  // no site, device or phase figures. The driver maps a handle once per
  // context and counts references: an open of a mapping that is live adds a
  // reference, not memory. While paused the reference is known, not counted.
  void OnIpcOpen(const AllocEvent& event);
  // cuIpcCloseMemHandle, in two steps like a free: at the call's ENTER a
  // reference is dropped, and the mapping removed with the last one (the
  // driver may map something else there at once); UndoIpcClose puts both
  // back when the call failed. False: `address` is no mapping an open
  // returned (nothing to undo).
  struct IpcClose {
    uint64_t address = 0;
    bool unmapped = false;  // the last reference: `removed` holds the mapping
    LiveAlloc removed;
  };
  bool BeginIpcClose(uint64_t address, IpcClose* close);
  void UndoIpcClose(const IpcClose& close);

  // Whether a live entry's address is a VMM handle's key: above every
  // address a process or a device can have.
  static constexpr uint64_t kVmmKeyBase = 0xffffff0000000000;
  static constexpr bool IsVmmKey(uint64_t address) { return address >= kVmmKeyBase; }

  // A context of `device` is being destroyed (cudaDeviceReset,
  // cuDevicePrimaryCtxReset, cuCtxDestroy): the driver frees the live
  // allocations of the kinds in `kinds` (a mask of 1 << MemKind) on that
  // device. They are removed as frees; returns how many and their bytes.
  struct Freed {
    uint64_t count = 0;
    uint64_t bytes = 0;
  };
  Freed OnContextDestroyed(int device, uint32_t kinds);

  void OnCopy(const CopyEvent& event);
  // A kernel launch made in `phase` (0: none). Inline, on every launch; not
  // tested for a pause: the capture path records a launch only while
  // recording is enabled (Events::enabled), as it captures no stack then.
  void OnLaunch(uint32_t phase = 0) {
    launches_.fetch_add(1, std::memory_order_relaxed);
    if (phase != 0) OnPhaseLaunch(phase);
  }

  // gpuwatch_pause()/gpuwatch_resume(): while paused, allocations, copies and
  // launches are not recorded; frees still are, so that memory allocated
  // before the pause and freed during it is not reported as leaked. (A block
  // allocated during the pause and freed after it counts as an unknown free.)
  void SetPaused(bool paused) { paused_.store(paused, std::memory_order_relaxed); }
  bool paused() const { return paused_.load(std::memory_order_relaxed); }

  // Device bytes live now per site (stack id), for sites that have any, in
  // increasing id order. Reads the per-site counters only (no shard lock), so
  // it is cheap enough for every gpuwatch_mark(). Thread-safe.
  std::vector<std::pair<uint32_t, uint64_t>> LiveDeviceBytesBySite() const;
  // The same into *out (replaced), whose buffer a caller scanning every
  // second reuses: a fresh one of 10,000 sites is 160 KB, past malloc's mmap
  // threshold, and page faults each time.
  void LiveDeviceBytesBySite(std::vector<std::pair<uint32_t, uint64_t>>* out) const;

  // Nanoseconds since this tracker was constructed (CLOCK_MONOTONIC).
  uint64_t NowNs() const;

  // Every live allocation (the live table, shard by shard under each
  // shard's lock), the counters and the sites. For report writers.
  TrackerSnapshot Snapshot() const;
  // What is live now by site, not by allocation, for a moment that cannot
  // wait for the live table (an out-of-memory failure, a context's
  // destruction, inside a CUDA callback): the counters (as Totals()), every
  // site's totals, the peak's sites and, per site with memory live, its
  // bytes by kind and its counts (TrackerSnapshot::site_live). Reads the
  // per-site counters: no shard lock, and a cost that grows with the sites,
  // not the allocations. Thread-safe.
  TrackerSnapshot LiveBySite() const;
  // How many times the live table was walked under the shards' locks
  // (Snapshot, and Live of one device, LiveSince and OnContextDestroyed):
  // for tests that check that a capture does not.
  uint64_t ShardWalks() const { return shard_walks_.load(std::memory_order_relaxed); }
  // The snapshot's totals alone (kinds, copies, launches, devices): no live
  // table, no sites, no lock. For the live state served each second.
  TrackerSnapshot Totals() const;

  // For pthread_atfork: LockForFork() (prepare) takes every lock so that no
  // update is in flight across fork(); UnlockAfterFork() (parent and child)
  // releases them.
  void LockForFork();
  void UnlockAfterFork();

  // Memory live now: bytes and allocations of the kinds `kinds` holds
  // (a bit per MemKind), on device ordinal `device` (-1: every device).
  // Every device: per-kind counters only, no lock. One device: a walk of
  // the live table, shard by shard under each shard's lock. Thread-safe.
  struct LiveFigures {
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  LiveFigures Live(uint32_t kinds, int device) const;

  // A point in the stream of allocations (gpuwatch_point()): what is
  // allocated after it can be told from what was allocated before, for as
  // long as it stays live. Each allocation records the newest point's
  // generation mod 256 beside its millisecond; it is after point P when its
  // millisecond is later than P's, or the same and its generation is one of
  // the 128 from P's on. Exact unless more than 128 points are taken within
  // one millisecond.
  struct Point {
    uint64_t generation = 0;
    uint32_t time_ms = 0;
  };
  // Takes a point, and starts the window whose device peak WindowPeak() gives.
  Point NewPoint();
  // The point before every allocation a tracker records (at its millisecond
  // 0): what gpuwatch_point() gives before gpuwatch is active.
  static constexpr uint64_t kStartGeneration = 1;
  static constexpr Point kStart{kStartGeneration, 0};
  // Whether an allocation made at `time_ms` with `tag` is after `point`.
  static bool IsAfter(uint32_t time_ms, uint8_t tag, Point point);
  // Live allocations made after `point`, per site (stack id), in increasing
  // id order: one list per group of kinds in `groups` (a bit per MemKind; an
  // allocation counts in the first group that has its kind). One walk of the
  // live table, shard by shard under each shard's lock. Thread-safe.
  struct SiteFigures {
    uint64_t bytes = 0;
    uint64_t count = 0;
    std::array<uint64_t, kNumMemKinds> kind_bytes{};  // bytes by MemKind
  };
  using SiteRows = std::vector<std::pair<uint32_t, SiteFigures>>;
  std::vector<SiteRows> LiveSince(Point point, std::initializer_list<uint32_t> groups) const;
  // The highest device bytes (all device kinds) since the newest point.
  uint64_t WindowPeak() const { return window_peak_.load(std::memory_order_relaxed); }

  // Device bytes live now (all device kinds). Cheap; thread-safe.
  uint64_t DeviceCurrentBytes() const { return device_current_.load(std::memory_order_relaxed); }
  // The highest DeviceCurrentBytes() so far. Cheap; thread-safe.
  uint64_t DevicePeakBytes() const { return device_peak_.load(std::memory_order_relaxed); }

  // Total number of events seen (allocations, frees, copies, launches); cheap.
  uint64_t EventCount() const;

  // What gpuwatch's own tables say `address` is, for copies whose activity
  // record does not tell: pinned or registered host memory anywhere inside a
  // live range of it, or the base of a live allocation of another kind.
  // False when neither (pageable host memory, or a pointer inside a device
  // allocation). Thread-safe; takes no lock when no host memory is live.
  bool Classify(uint64_t address, MemKind* kind, int* device = nullptr) const;
  // The host ranges only (pinned or registered host memory): no lock at all
  // while none is live. For the host side of a copy whose direction is known.
  bool ClassifyHost(uint64_t address, MemKind* kind) const;

  static constexpr uint32_t kDefaultMaxSites = 1u << 20;
  static constexpr int kMaxDevices = kMaxTrackedDevices;

  // Records every change of a device's live bytes, and each peak capture, in
  // `trace` (may be null: none). Call before events arrive.
  void SetTrace(Trace* trace) { trace_ = trace; }
  // Counts allocations, copies and launches per phase in `phases` (may be
  // null: none). Call before events arrive.
  void SetPhases(PhaseStats* phases) { phases_ = phases; }

 private:
  static constexpr int kShards = 64;
  // Per site (stack id). A snapshot counts its live allocations from the
  // live table; the live figures are also kept here, for what reads them
  // between snapshots: peak captures and marks (the device kinds' bytes),
  // and LiveBySite. Kept per kind only, so that an allocation or a free adds
  // to two counters, with no branch on its kind; a reader sums the kinds it
  // wants (the device kinds' bytes, the host kinds' count, ...).
  struct Site {
    std::atomic<uint64_t> alloc_bytes{0};  // allocations: the sum of `sizes`
    std::atomic<uint64_t> largest{0};
    std::atomic<uint64_t> host_allocs{0};  // host kinds only touch these two more
    std::atomic<uint64_t> host_alloc_bytes{0};
    std::atomic<uint64_t> frees{0};
    std::atomic<uint64_t> churn_cycles{0};
    std::atomic<uint64_t> call_ticks{0};  // Ticks(); nanoseconds in a snapshot
    std::array<std::atomic<uint64_t>, kNumMemKinds> kind_live_count{};
    std::array<std::atomic<uint64_t>, kNumMemKinds> kind_live_bytes{};
    std::array<std::atomic<uint64_t>, kSizeBuckets> sizes{};  // allocations by SizeBucket
  };
  struct Shard;
  // What needs a running process-wide value (the peak of current bytes).
  struct Counters {
    std::atomic<uint64_t> current_bytes{0};
    std::atomic<uint64_t> peak_bytes{0};
  };

  Shard& ShardFor(uint64_t address) const;
  Site& SiteFor(uint32_t stack_id) const;
  // Calls fn(allocation, its millisecond) for every live allocation, shard
  // by shard under each shard's lock (the queries: Live, LiveSince).
  template <typename Fn>
  void ForEachLive(Fn fn) const;
  void MaybeCapturePeak(uint64_t device_bytes);
  // A snapshot's process-wide counters (everything but the live table,
  // the per-kind counts of the shards and the sites).
  void FillCounters(TrackerSnapshot* snap) const;
  // A shard's per-kind counts (allocs, bytes, frees, live count) added in.
  static void AddShardCounts(const Shard& shard, TrackerSnapshot* snap);
  // The process-wide accounting of an allocation (sites, current bytes and
  // peaks, devices) and its call's time in Ticks() (0: not timed); counts per
  // kind are kept by the shard, under its lock.
  void AccountAlloc(const LiveAlloc& alloc, uint64_t now_ns, uint64_t call_ticks);
  // Live bytes (kind, device total, site) for a departed allocation.
  void ReleaseLive(const LiveAlloc& alloc);
  // The site's live figures (count and bytes of the allocation's kind), for
  // an allocation that arrives (`sign` 1) or departs (-1); every kind,
  // imported included.
  static void CountSiteLive(Site& site, const LiveAlloc& alloc, int sign);
  // A site's totals (live_count: the site's counter) and the peak's sites.
  // `ns_per_tick`: Ticks()'s period (NsPerTick()).
  SiteTotals TotalsOf(const Site& site, double ns_per_tick) const;
  double NsPerTick() const;
  void FillPeak(TrackerSnapshot* snap) const;
  // OnLaunch in a phase: its count (out of line: the NVTX ranges' case).
  void OnPhaseLaunch(uint32_t phase);

  uint64_t start_ns_ = 0;
  uint64_t start_ticks_ = 0;  // Ticks() with start_ns_: their rate converts call_ticks
  std::unique_ptr<Shard[]> shards_;
  std::array<Counters, kNumMemKinds> kinds_;
  std::atomic<uint64_t> device_current_{0};
  std::atomic<uint64_t> device_peak_{0};
  std::atomic<uint64_t> generation_{kStartGeneration};  // of the newest point (NewPoint)
  std::atomic<uint64_t> window_peak_{0};                // device bytes' peak since then
  std::array<std::atomic<uint64_t>, kNumCopyKinds> copy_count_{};
  std::array<std::atomic<uint64_t>, kNumCopyKinds> copy_bytes_{};
  std::atomic<uint64_t> launches_{0};
  std::atomic<uint64_t> unknown_frees_{0};
  std::atomic<uint64_t> dropped_allocs_{0};  // not tracked: the table could not grow
  std::atomic<bool> paused_{false};
  mutable std::atomic<uint64_t> shard_walks_{0};
  // Per device ordinal (clamped to kMaxDevices - 1), device kinds only.
  std::array<std::atomic<uint64_t>, kMaxDevices> device_live_{};
  std::array<std::atomic<uint64_t>, kMaxDevices> device_live_peak_{};
  Trace* trace_ = nullptr;
  PhaseStats* phases_ = nullptr;

  // Per-site counters, indexed by stack id; reserved with mmap so that only
  // the pages of sites in use are backed. `sites_used_` is one past the
  // highest id seen.
  uint32_t max_sites_ = 0;
  Site* sites_ = nullptr;
  std::atomic<uint32_t> sites_used_{1};

  mutable Mutex peak_mu_;                                  // serialises peak captures
  std::vector<std::pair<uint32_t, uint64_t>> peak_sites_;  // guarded by peak_mu_
  std::atomic<uint64_t> peak_captured_bytes_{0};
  uint64_t peak_captured_time_ns_ = 0;               // guarded by peak_mu_
  std::array<uint64_t, kNumMemKinds> peak_kinds_{};  // bytes per kind then; guarded by peak_mu_

  // VMM (tracker_vmm.cc): handles' memory by key, the handles' values until
  // released, and the mappings, ordered so that an unmap finds every mapping
  // in its range. All guarded by vmm_mu_, never held with another lock.
  struct VmmMapping {
    uint64_t size = 0;
    uint64_t key = 0;
  };
  // Frees a handle's memory (live entry, or imported counts) that left the
  // tables; `removed` (may be null) receives the live entry.
  void FreeVmm(const VmmMemory& memory, LiveAlloc* removed);
  // The counts of imported memory, in the shard of its key.
  void CountImported(const VmmMemory& memory, int allocs, int frees, int64_t bytes);
  bool ClassifyVmm(uint64_t address, MemKind* kind, int* device) const;
  // The key of the memory mapped at `address` (inside a mapping), 0 when
  // none. Under vmm_mu_.
  uint64_t VmmKeyAt(uint64_t address) const;
  mutable Mutex vmm_mu_;
  std::unordered_map<uint64_t, uint64_t> vmm_handles_;  // handle value -> key
  std::unordered_map<uint64_t, VmmMemory> vmm_memory_;  // key -> memory, until freed
  std::map<uint64_t, VmmMapping> vmm_mappings_;         // address -> mapping
  uint64_t vmm_next_key_ = kVmmKeyBase;
  std::atomic<uint64_t> vmm_mapping_count_{0};

  // CUDA IPC mappings (tracker_ipc.cc): the references the driver counts,
  // by mapped address. Guarded by ipc_mu_, which is taken before a shard's
  // lock (never after it), and with no other.
  bool IsLiveAs(uint64_t address, MemKind kind) const;
  mutable Mutex ipc_mu_;
  std::unordered_map<uint64_t, uint32_t> ipc_refs_;

  // Live pinned and registered host ranges, for Classify. Few and large.
  struct HostRange {
    uint64_t size = 0;
    MemKind kind = MemKind::kPinnedHost;
  };
  void AddHostRange(const LiveAlloc& alloc);
  void RemoveHostRange(uint64_t address);
  mutable Mutex host_mu_;
  std::map<uint64_t, HostRange> host_ranges_;  // guarded by host_mu_
  std::atomic<uint64_t> host_range_count_{0};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_TRACKER_H_
