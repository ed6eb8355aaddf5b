// Phases: the named ranges a program opens and closes on a thread (NVTX's
// push/pop, gpuwatch_phase_push/pop), and what happened inside them.
//
// A phase is a path of names, outermost first ("step/forward"): the ranges
// open on the thread when an allocation, copy or launch happens. Names and
// paths are interned once (PhaseTable, per session: ids survive fork); each
// thread keeps the stack of its open ranges in a PhaseStack it owns, of fixed
// size, so that a push or pop allocates nothing; what happened in each path
// is counted in PhaseStats (per recording), which the tracker feeds.
//
// Limits, each with a counter rather than unbounded growth: kMaxPhaseNames
// names and kMaxPhasePaths paths (beyond them a push opens the path
// "(other)"), kMaxPhaseDepth open ranges per thread (deeper ones are counted
// and popped without changing the path), and pops with nothing open.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_PHASES_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_PHASES_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/event.h"

namespace gpuwatch {

// Path ids are 1..kMaxPhasePaths (0: no phase); live records keep 12 bits.
inline constexpr uint32_t kMaxPhasePaths = 4095;
inline constexpr uint32_t kMaxPhaseNames = 4095;
inline constexpr int kMaxPhaseDepth = 32;
// Start/end ranges (nvtxRangeStartA/nvtxRangeEnd) open at once at most.
inline constexpr int kMaxOpenRanges = 64;
// Longer names are cut when interned.
inline constexpr size_t kMaxPhaseNameBytes = 256;
// The path and the name that stand for everything past the limits.
inline constexpr char kOtherPhase[] = "(other)";

// The open ranges of one thread. Owned by its thread (thread_local in the
// interposition layer); only PhaseTable changes it.
struct PhaseStack {
  // 16 bytes: the stack is initial-exec thread-local storage in the
  // interposition layer, of which a dlopen'ed library gets little.
  struct Level {
    uint16_t path = 0;       // <= kMaxPhasePaths
    uint16_t name = 0;       // <= kMaxPhaseNames
    uint16_t domain = 0;     // NVTX domain (0: the default one); pops match it
    uint64_t opened_ns = 0;  // for the event trace; 0: not traced
  };
  std::array<Level, kMaxPhaseDepth> levels{};
  int depth = 0;
  int overflow = 0;     // pushes past kMaxPhaseDepth not yet popped
  uint32_t thread = 0;  // the thread's id, for the event trace (0: unknown)

  uint32_t current() const { return depth > 0 ? levels[depth - 1].path : 0; }
};

class PhaseStats;
class Trace;
class Tracker;

class PhaseTable {
 public:
  PhaseTable();
  ~PhaseTable();
  PhaseTable(const PhaseTable&) = delete;
  PhaseTable& operator=(const PhaseTable&) = delete;

  // The id (1..kMaxPhaseNames) of `name`, cut to kMaxPhaseNameBytes,
  // interned on first sight. Lock-free for a name seen before; a new one
  // takes a mutex. Past the limit: the id of "(other)", and counted.
  uint32_t InternName(std::string_view name);
  // The text of name `id` as interned ("" for an id not interned). It stays
  // where it is for the table's life: a caller may keep the pointer.
  std::string_view NameText(uint32_t id) const {
    if (id == 0 || id > names_used_.load(std::memory_order_acquire)) return {};
    return *names_[id].text;
  }

  // Opens range `name` (an InternName id) of `domain` (< 65536) on `stack`
  // (the phase's peak starts at the device memory live now). Lock-free for a
  // path seen before.
  void Push(PhaseStack* stack, uint32_t name, uint32_t domain);
  // Push's second half, for a caller that kept the path a push of `name`
  // found on the same stack with the same range innermost (stack->current()):
  // paths below kMaxPhasePaths never change. `stack` is below kMaxPhaseDepth.
  void Open(PhaseStack* stack, uint32_t name, uint32_t domain, uint32_t path);
  // Closes the innermost open range of `domain` on `stack` (ranges of other
  // domains opened inside it stay open, their paths without it). False, and
  // counted, when none is open. The innermost range is the one closed
  // unless domains interleave: that pop is a load, a compare and the trace's
  // slice.
  bool Pop(PhaseStack* stack, uint32_t domain);
  // A thread ends with `stack` as it is: its open ranges are counted.
  void ThreadExit(const PhaseStack& stack);

  // A start/end range (NVTX's nvtxRangeStart/nvtxRangeEnd: it may end on
  // another thread, and does not nest): a top-level path of its own name,
  // open process-wide, whose peak every device allocation raises while it is
  // open. Returns the id End takes; 0 when kMaxOpenRanges are open already
  // (counted).
  uint64_t Start(uint32_t name);
  // False, and counted, for an id not open.
  bool End(uint64_t id);
  // Whether a start/end range is open now. Lock-free.
  bool RangesOpen() const { return open_count_.load(std::memory_order_acquire) != 0; }
  // Calls fn(path) for each start/end range open now. Lock-free.
  template <typename Fn>
  void ForEachOpenRange(Fn fn) const {
    if (!RangesOpen()) return;
    for (const OpenSlot& slot : open_) {
      const uint64_t range = slot.range.load(std::memory_order_acquire);
      if (range != 0) fn(static_cast<uint32_t>(range & 0xfff));
    }
  }

  // Where the tracker counts what happens in each path (may be null: nothing
  // is counted), and where a push raises the new path's peak.
  void SetStats(PhaseStats* stats) { stats_.store(stats, std::memory_order_release); }

  // The highest path id handed out so far (0: none; kMaxPhasePaths, the id
  // kept for "(other)", once the others are all taken). Lock-free.
  uint32_t MaxPathId() const {
    const uint32_t used = paths_used_.load(std::memory_order_acquire);
    return used >= kMaxPhasePaths - 1 ? kMaxPhasePaths : used;
  }

  uint32_t Parent(uint32_t path) const;
  // "a/b/c"; "" for 0.
  std::string PathText(uint32_t path) const;
  // The innermost name of `path`.
  std::string_view LeafName(uint32_t path) const;

  struct Counters {
    uint64_t names_dropped = 0;  // pushes of a name past kMaxPhaseNames
    uint64_t paths_dropped = 0;  // pushes of a path past kMaxPhasePaths
    uint64_t too_deep = 0;       // pushes past kMaxPhaseDepth
    uint64_t unbalanced_pops = 0;
    uint64_t open_at_thread_exit = 0;  // ranges a thread left open when it ended
    uint64_t ranges_not_tracked = 0;   // start/end ranges past kMaxOpenRanges open
    uint64_t unmatched_ends = 0;       // ends of a start/end range not open
  };
  Counters counters() const;

  // For pthread_atfork.
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

 private:
  // Open-addressing tables of slots read and written atomically
  // (std::atomic_ref): a name by its hash, a path by (parent, name). Sized at
  // twice the limit, so a probe ends quickly.
  static constexpr size_t kSlots = 8192;
  struct NameSlot {
    uint64_t hash;  // 0: empty (a real hash of 0 is stored as 1)
    uint32_t id;    // written before hash
  };
  struct PathSlot {
    uint64_t key;  // parent << 32 | name; 0: empty
    uint32_t id;
  };
  struct Path {
    uint32_t parent;
    uint32_t name;
  };
  struct Name {
    const std::string* text;  // null: not interned
  };

  // Frees the arrays that were taken and the names interned (the
  // destructor's work, and a constructor's that throws).
  void Release();
  uint32_t FindName(std::string_view name, uint64_t hash) const;
  uint32_t PathOf(uint32_t parent, uint32_t name);
  // Pop below the innermost range: a range of another domain is open inside
  // the one closed, or none of `domain` is open.
  bool PopBelow(PhaseStack* stack, uint32_t domain);
  // The path of `stack`'s level `i` from the one below it.
  void Rebuild(PhaseStack* stack, int from);

  std::atomic<PhaseStats*> stats_{nullptr};
  Mutex mu_;  // first sight of a name or a path
  // The four arrays below are zeroed and untouched (the slots and paths
  // mapped with MapZeroed, the names calloc'ed: see HeapArray): a process
  // with a few ranges, or none, faults in the pages it uses, not ~400 KiB at
  // attach.
  NameSlot* name_slots_ = nullptr;
  PathSlot* path_slots_ = nullptr;
  // Index = id. Written once under mu_ before the id is published; each name
  // its own string, deleted with the table.
  Name* names_ = nullptr;
  Path* path_list_ = nullptr;
  std::atomic<uint32_t> names_used_{0};
  std::atomic<uint32_t> paths_used_{0};
  uint32_t other_name_ = 0;  // interned in the constructor
  uint32_t other_path_ = 0;  // made on first need, under mu_
  std::atomic<uint64_t> names_dropped_{0};
  std::atomic<uint64_t> paths_dropped_{0};
  std::atomic<uint64_t> too_deep_{0};
  std::atomic<uint64_t> unbalanced_pops_{0};
  std::atomic<uint64_t> open_at_thread_exit_{0};
  std::atomic<uint64_t> ranges_not_tracked_{0};
  std::atomic<uint64_t> unmatched_ends_{0};
  // Open start/end ranges: id << 12 | path (0: free), and when each opened
  // (for the event trace). Process-wide, so that a range started before
  // attach is one all the same.
  struct OpenSlot {
    std::atomic<uint64_t> range{0};
    uint64_t opened_ns = 0;  // written by its opener before the id is returned
  };
  std::array<OpenSlot, kMaxOpenRanges> open_;
  std::atomic<int> open_count_{0};
  std::atomic<uint64_t> next_range_{1};
};

// What happened in each path, counted by the tracker (Tracker::SetPhases).
// Allocations count in the path open on their thread; the peak is the
// highest device total (all device kinds) seen when a range of the path
// opened or when an allocation was made in it or in a path nested in it.
class PhaseStats {
 public:
  // `tracker`: where OnOpen reads the device memory live.
  PhaseStats(const PhaseTable* table, const Tracker* tracker);
  ~PhaseStats();
  PhaseStats(const PhaseStats&) = delete;
  PhaseStats& operator=(const PhaseStats&) = delete;

  // An allocation of `size` bytes in `path` (0: none); `device_bytes` is the
  // device total after it (0 for host kinds: no peak). Outside every range
  // (the common case) there is nothing to count: no call.
  void OnAlloc(uint32_t path, MemKind kind, uint64_t size, uint64_t device_bytes,
               uint32_t stack_id) {
    if (path != 0 || table_->RangesOpen()) CountAlloc(path, kind, size, device_bytes, stack_id);
  }
  // A device allocation made in `path` (not 0) at `stack_id` departed.
  void OnFree(uint32_t path, uint64_t size, uint32_t stack_id);
  void OnCopy(uint32_t path, CopyKind kind, uint64_t bytes);
  void OnLaunch(uint32_t path);
  // A range of `path` opened: counted, and its peak raised to the memory
  // live now. Returns the time it opened when ranges are traced, else 0.
  uint64_t OnOpen(uint32_t path);
  // A range closed: a slice in the event trace when it was traced.
  void OnClose(const PhaseStack::Level& level, uint32_t thread);
  // The time now when ranges are traced, else 0.
  uint64_t TraceNow() const;
  // Records each range as a slice in `trace` (may be null: none). Call
  // before ranges open.
  void SetTrace(Trace* trace) { trace_ = trace; }

  struct Row {
    uint32_t path = 0;
    uint64_t opens = 0;  // ranges of the path opened (from attach on)
    uint64_t allocs = 0;
    uint64_t alloc_bytes = 0;  // device kinds
    uint64_t host_allocs = 0;
    uint64_t host_alloc_bytes = 0;
    uint64_t peak_bytes = 0;
    uint32_t peak_site = 0;  // the stack id of the allocation that reached the peak (0: none)
    // The site whose device allocations made in the path (or nested in it)
    // held the most bytes at the peak (within 1/64 of it: see TopAtPeak), and
    // those bytes; 0: none held any.
    uint32_t top_site = 0;
    uint64_t top_bytes = 0;
    std::array<uint64_t, kNumCopyKinds> copy_count{};
    std::array<uint64_t, kNumCopyKinds> copy_bytes{};
    uint64_t launches = 0;
  };
  // A row for every path that has been opened, in id order.
  std::vector<Row> Rows() const;
  // (path, site) pairs not followed for top_site: their table was full.
  uint64_t cells_dropped() const { return cells_dropped_.load(std::memory_order_relaxed); }

  // Live device bytes per (path, site), for top_site: kCells cells, then
  // counted in cells_dropped.
  static constexpr size_t kCells = 16384;

 private:
  struct Counters;
  struct Cell {
    std::atomic<uint64_t> key{0};  // path << 32 | stack id; 0: empty
    std::atomic<int64_t> bytes{0};
  };
  void CountAlloc(uint32_t path, MemKind kind, uint64_t size, uint64_t device_bytes,
                  uint32_t stack_id);
  // The cell of (path, stack_id); made when `make` (null when the table is full).
  Cell* CellOf(uint32_t path, uint32_t stack_id, bool make);
  // Raises the peaks of `path` and the paths it is nested in to
  // `device_bytes`; returns at once when `path`'s own is as high already.
  void RaisePeak(uint32_t path, uint64_t device_bytes, uint32_t stack_id);
  void RaisePeakFrom(uint32_t path, uint64_t device_bytes, uint32_t stack_id);
  // For each path of `paths` (a peak just raised by 1/64 or more since its
  // last capture): the cell of its own or a nested path holding the most
  // bytes now. One pass over the cells; skipped when another thread is in it.
  void TopAtPeak(const uint32_t* paths, const uint64_t* peaks, int n);
  // Every open start/end range's peak.
  void RaiseOpenRanges(uint64_t device_bytes, uint32_t stack_id);

  const PhaseTable* table_;
  const Tracker* tracker_;
  Trace* trace_ = nullptr;
  Counters* counters_ = nullptr;  // kMaxPhasePaths + 1, mmap'ed zeroes
  size_t bytes_ = 0;
  Cell* cells_ = nullptr;  // kCells, in the same mapping
  std::atomic<uint64_t> cells_dropped_{0};
  std::atomic<bool> capturing_{false};
};

// The phases of a report: every path used, with its text.
struct PhasesSnapshot {
  std::vector<PhaseStats::Row> rows;  // in id order
  std::vector<std::string> paths;     // rows[i]'s path, "a/b/c"
  std::vector<uint32_t> depths;       // rows[i]'s ranges (a name may hold '/' itself)
  PhaseTable::Counters counters;
  uint64_t cells_dropped = 0;  // PhaseStats::cells_dropped()

  bool empty() const;
  // rows' index of path id `path`; -1 when none.
  int IndexOf(uint32_t path) const;
};
PhasesSnapshot SnapshotPhases(const PhaseTable& table, const PhaseStats& stats);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_PHASES_H_
