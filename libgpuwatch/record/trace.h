// A bounded trace of individual events, for timelines (`gpuwatch report
// --format perfetto`): device memory per device after every change, copies and
// kernels with their GPU start and end, marks, new peaks and OOMs.
//
// The aggregates elsewhere in the core say how much; this says when. It is a
// ring of fixed-size POD events in storage reserved once (mmap) when the
// trace is made, written from CUDA callbacks and activity processing on any
// thread: a writer takes an index with one atomic fetch_add and fills the
// slot under a per-slot sequence number (a seqlock), so recording takes no
// lock, allocates nothing and never waits. The ring keeps the newest events;
// older ones are overwritten and counted.
//
// A reader (Snapshot, at report time) copies each slot and keeps it only when
// its sequence number says it was completely written for the index expected
// there, so a report taken while writers run is never torn; events being
// written at that moment are counted as dropped.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_TRACE_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_TRACE_H_

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/base/name_table.h"
#include "libgpuwatch/record/event.h"
#include "libgpuwatch/record/transfers.h"

namespace gpuwatch {

enum class TraceKind : uint8_t {
  kNone = 0,
  kMemory,  // device bytes live on `device` after an allocation or free (`site`'s)
  kCopy,    // a timed copy (activity record)
  kKernel,  // a timed kernel (activity record, GPUWATCH_KERNEL_TIMING=1)
  kMark,    // gpuwatch_mark()
  kPeak,    // a new device peak (all devices), rate-limited like the peak capture
  kOom,     // an allocation failed for lack of memory
  kPhase,   // a phase's range, from its opening to its closing, on a thread
};

inline constexpr size_t kTraceLabelBytes = 32;  // a mark's label, NUL-terminated, truncated

struct TraceSlice {
  uint64_t end_ns;
  uint64_t stream;
  const char* name;  // kernels: interned by Trace::InternName, never freed
  uint64_t unused;
};

// One event: plain data, copied into and out of the ring as words.
struct TraceEvent {
  uint64_t time_ns;  // tracker clock (ns since attach); a slice's start
  // kMemory: bytes live on the device; kCopy: bytes copied; kPeak: device
  // bytes of all devices; kOom: bytes requested; kMark: the mark's ordinal;
  // kPhase: the path id (phases.h).
  uint64_t value;
  union {
    TraceSlice slice;              // kCopy, kKernel, kPhase (stream: the thread id)
    char label[kTraceLabelBytes];  // kMark
  };
  uint32_t site;   // kMemory, kCopy, kOom: stack id (0: none)
  int16_t device;  // device ordinal; -1 when unknown
  TraceKind kind;
  // kCopy: CopyKind in the low nibble, HostKind in the high one; kOom: MemKind.
  uint8_t detail;
};
static_assert(sizeof(TraceEvent) == 56, "a slot is one cache line with its sequence number");

struct TraceSnapshot {
  size_t capacity = 0;
  uint64_t recorded = 0;           // events ever recorded
  uint64_t dropped = 0;            // recorded but not in `events`: overwritten (or being written)
  std::vector<TraceEvent> events;  // oldest first
  // Which events these are (a checkpoint reuses the text of events its last
  // one wrote: checkpoint_trace.h): each event has an index, its order among
  // all recorded; `events` are those from `first` to `recorded` less
  // `skipped` (increasing: slots being written when the snapshot read them).
  uint64_t first = 0;
  std::vector<uint64_t> skipped;
};

// The padding is the name table's: its hot members sit on cache lines of their own.
class Trace {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  static constexpr size_t kDefaultCapacity = 65536;
  // Largest capacity accepted (64 MiB of slots); GPUWATCH_TRACE_EVENTS is checked against it.
  static constexpr size_t kMaxCapacity = size_t{1} << 20;

  // Reserves `capacity` slots (at most kMaxCapacity). When the memory cannot be
  // reserved the trace records nothing (capacity() is then 0).
  explicit Trace(size_t capacity);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  size_t capacity() const { return capacity_; }

  // Records one event. Lock-free and allocation-free; safe from any thread.
  void Record(const TraceEvent& event);

  // A memory step (kMemory): inline, its words stored in the slot as they
  // are made, no event built and copied (every allocation and free of device
  // memory records one; docs/BENCHMARKS.md, "Issue 33, stop 47").
  void Memory(uint64_t time_ns, int device, uint64_t live_bytes, uint32_t site = 0) {
    uint64_t index = 0;
    Slot* slot = Claim(&index);
    if (slot == nullptr) return;
    slot->words[0].store(time_ns, std::memory_order_relaxed);
    slot->words[1].store(live_bytes, std::memory_order_relaxed);
#pragma GCC unroll 4  // the four words of a slice or a label: stores, not a loop
    for (size_t i = 2; i < kTailWord; ++i) slot->words[i].store(0, std::memory_order_relaxed);
    slot->words[kTailWord].store(TailWord(site, device, TraceKind::kMemory, 0),
                                 std::memory_order_relaxed);
    slot->seq.store(index + 1, std::memory_order_release);
  }

  // Shorthands for Record().
  void Copy(uint64_t start_ns, uint64_t end_ns, int device, uint64_t stream, uint64_t bytes,
            CopyKind direction, HostKind host, uint32_t site);
  void Kernel(uint64_t start_ns, uint64_t end_ns, int device, uint64_t stream, const char* name);
  void Mark(uint64_t time_ns, uint64_t ordinal, const char* label);
  void Peak(uint64_t time_ns, uint64_t device_bytes);
  void Oom(uint64_t time_ns, int device, uint64_t bytes, MemKind kind, uint32_t site);
  void Phase(uint64_t start_ns, uint64_t end_ns, uint32_t thread, uint32_t path);

  // The events still in the ring, oldest first. Safe while writers run.
  TraceSnapshot Snapshot() const;

  // GPU timestamps (CUPTI's clock, as in activity records) become tracker
  // times by adding this offset, measured once (cuptiGetTimestamp against the
  // tracker's clock). Times before attach come out as 0.
  void SetGpuClockOffset(int64_t offset_ns) {
    gpu_offset_ns_.store(offset_ns, std::memory_order_relaxed);
  }
  int64_t gpu_clock_offset() const { return gpu_offset_ns_.load(std::memory_order_relaxed); }
  uint64_t FromGpuClock(uint64_t gpu_ns) const {
    const int64_t t = static_cast<int64_t>(gpu_ns) + gpu_clock_offset();
    return t > 0 ? static_cast<uint64_t>(t) : 0;
  }

  // A copy of `name` that lives as long as the trace, found by pointer
  // without a lock after its first sight (activity records of one kernel
  // share the name pointer; base/name_table.h). Copies the text once, under
  // a mutex; returns "(other)" when the table is full and nullptr for nullptr.
  const char* InternName(const char* name);

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> seq;  // index + 1 when complete, kBusy while written, 0 never
    std::atomic<uint64_t> words[sizeof(TraceEvent) / sizeof(uint64_t)];
  };
  static constexpr uint64_t kBusy = ~uint64_t{0};
  // The last word of an event: site, device, kind and detail (Memory stores
  // it whole; the layout checked below).
  static constexpr size_t kTailWord = offsetof(TraceEvent, site) / sizeof(uint64_t);

 public:
  // A device ordinal as the trace keeps it: -1 when it does not fit.
  static int16_t DeviceField(int device) {
    return device < INT16_MIN || device > INT16_MAX ? int16_t{-1} : static_cast<int16_t>(device);
  }

 private:
  static uint64_t TailWord(uint32_t site, int device, TraceKind kind, uint8_t detail) {
    return uint64_t{site} | uint64_t{static_cast<uint16_t>(DeviceField(device))} << 32 |
           uint64_t{static_cast<uint8_t>(kind)} << 48 | uint64_t{detail} << 56;
  }

  // Claims the next slot for an event (its index in *index), marked busy:
  // nullptr when there is no ring, or when another writer lapped the ring
  // while this one was between its fetch_add and its claim (then this event
  // is the older one and is given up; it counts as dropped). The caller
  // stores the event's words, then seq = index + 1 (release).
  Slot* Claim(uint64_t* index) {
    if (capacity_ == 0) return nullptr;
    const uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    Slot& slot = slots_[i % capacity_];
    uint64_t seen = slot.seq.load(std::memory_order_relaxed);
    if (seen == kBusy || seen > i + 1 ||
        !slot.seq.compare_exchange_strong(seen, kBusy, std::memory_order_relaxed)) {
      return nullptr;
    }
    std::atomic_thread_fence(std::memory_order_release);
    *index = i;
    return &slot;
  }
  static constexpr uint32_t kMaxNames = 4096;

  size_t capacity_ = 0;
  Slot* slots_ = nullptr;
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> gpu_offset_ns_{0};
  NameTable names_{kMaxNames};
  size_t mapped_bytes_ = 0;
};

static_assert(std::endian::native == std::endian::little && offsetof(TraceEvent, site) == 48 &&
                  offsetof(TraceEvent, device) == 52 && offsetof(TraceEvent, kind) == 54 &&
                  offsetof(TraceEvent, detail) == 55,
              "Trace::TailWord packs the event's last word in this layout");

// The event's name in the report's `trace.events` ("mem", "copy", ...).
const char* TraceKindName(TraceKind kind);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_TRACE_H_
