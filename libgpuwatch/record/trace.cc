#include "libgpuwatch/record/trace.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "libgpuwatch/base/enum_names.h"

namespace gpuwatch {

namespace {

constexpr size_t kWords = sizeof(TraceEvent) / sizeof(uint64_t);
static_assert(sizeof(TraceEvent) % sizeof(uint64_t) == 0);

// An event at one moment: a memory step, an out-of-memory.
TraceEvent PointEvent(TraceKind kind, uint64_t time_ns, int device, uint64_t value, uint32_t site) {
  TraceEvent e{};
  e.time_ns = time_ns;
  e.value = value;
  e.site = site;
  e.device = Trace::DeviceField(device);
  e.kind = kind;
  return e;
}

}  // namespace

const char* TraceKindName(TraceKind kind) {
  static constexpr const char* kNames[] = {"none", "mem", "copy", "kernel", "mark", "peak", "oom"};
  static_assert(std::size(kNames) == static_cast<size_t>(TraceKind::kOom) + 1);
  return EnumName(kind, kNames, "none");
}

Trace::Trace(size_t capacity) {
  capacity = std::min(capacity, kMaxCapacity);
  if (capacity == 0) return;
  // Reserved once; pages are backed as the ring first goes round, so a short
  // run costs only what it records. Zero pages are valid empty slots (seq 0).
  const size_t bytes = capacity * sizeof(Slot);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return;
  slots_ = static_cast<Slot*>(mem);
  mapped_bytes_ = bytes;
  capacity_ = capacity;
}

Trace::~Trace() {
  if (slots_ != nullptr) munmap(slots_, mapped_bytes_);
}

void Trace::Record(const TraceEvent& event) {
  uint64_t index = 0;
  Slot* slot = Claim(&index);
  if (slot == nullptr) return;
  uint64_t words[kWords];
  std::memcpy(words, &event, sizeof(words));
#pragma GCC unroll 8  // seven stores, not a loop (a phase's slice is on NVTX's pop)
  for (size_t i = 0; i < kWords; ++i) slot->words[i].store(words[i], std::memory_order_relaxed);
  slot->seq.store(index + 1, std::memory_order_release);
}

void Trace::Copy(uint64_t start_ns, uint64_t end_ns, int device, uint64_t stream, uint64_t bytes,
                 CopyKind direction, HostKind host, uint32_t site) {
  TraceEvent e{};
  e.time_ns = start_ns;
  e.value = bytes;
  e.slice.end_ns = end_ns;
  e.slice.stream = stream;
  e.site = site;
  e.device = Trace::DeviceField(device);
  e.kind = TraceKind::kCopy;
  e.detail =
      static_cast<uint8_t>(static_cast<unsigned>(direction) | (static_cast<unsigned>(host) << 4));
  Record(e);
}

void Trace::Kernel(uint64_t start_ns, uint64_t end_ns, int device, uint64_t stream,
                   const char* name) {
  TraceEvent e{};
  e.time_ns = start_ns;
  e.slice.end_ns = end_ns;
  e.slice.stream = stream;
  e.slice.name = name;
  e.device = Trace::DeviceField(device);
  e.kind = TraceKind::kKernel;
  Record(e);
}

void Trace::Mark(uint64_t time_ns, uint64_t ordinal, const char* label) {
  TraceEvent e{};
  e.time_ns = time_ns;
  e.value = ordinal;
  std::memset(e.label, 0, sizeof(e.label));
  if (label != nullptr) std::strncpy(e.label, label, sizeof(e.label) - 1);
  e.device = -1;
  e.kind = TraceKind::kMark;
  Record(e);
}

void Trace::Peak(uint64_t time_ns, uint64_t device_bytes) {
  TraceEvent e{};
  e.time_ns = time_ns;
  e.value = device_bytes;
  e.device = -1;
  e.kind = TraceKind::kPeak;
  Record(e);
}

// Record inlined (flatten): the event's words are stored as they are made,
// on NVTX's pop.
__attribute__((flatten)) void Trace::Phase(uint64_t start_ns, uint64_t end_ns, uint32_t thread,
                                           uint32_t path) {
  TraceEvent e{};
  e.time_ns = start_ns;
  e.value = path;
  e.slice.end_ns = end_ns;
  e.slice.stream = thread;
  e.slice.name = nullptr;
  e.device = -1;
  e.kind = TraceKind::kPhase;
  Record(e);
}

void Trace::Oom(uint64_t time_ns, int device, uint64_t bytes, MemKind kind, uint32_t site) {
  TraceEvent e = PointEvent(TraceKind::kOom, time_ns, device, bytes, site);
  e.detail = static_cast<uint8_t>(kind);
  Record(e);
}

TraceSnapshot Trace::Snapshot() const {
  TraceSnapshot out;
  out.capacity = capacity_;
  const uint64_t n = next_.load(std::memory_order_acquire);
  out.recorded = n;
  if (capacity_ == 0) return out;
  const uint64_t first = n > capacity_ ? n - capacity_ : 0;
  out.first = first;
  out.events.reserve(static_cast<size_t>(n - first));
  for (uint64_t index = first; index < n; ++index) {
    const Slot& slot = slots_[index % capacity_];
    if (slot.seq.load(std::memory_order_acquire) != index + 1) {
      out.skipped.push_back(index);
      continue;
    }
    uint64_t words[kWords];
    for (size_t i = 0; i < kWords; ++i) words[i] = slot.words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.seq.load(std::memory_order_relaxed) != index + 1) {  // rewritten meanwhile
      out.skipped.push_back(index);
      continue;
    }
    TraceEvent e;
    std::memcpy(&e, words, sizeof(e));
    out.events.push_back(e);
  }
  out.dropped = n - out.events.size();
  return out;
}

const char* Trace::InternName(const char* name) {
  if (name == nullptr) return nullptr;
  static constexpr char kOther[] = "(other)";
  const char* copy = names_.Name(names_.Intern(name));
  return copy != nullptr ? copy : kOther;
}

}  // namespace gpuwatch
