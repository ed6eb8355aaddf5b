#include "libgpuwatch/record/phases.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>

#include "libgpuwatch/base/arena.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {

namespace {

constexpr size_t kSlotMask = 8191;

// FNV-1a, never 0 (0 marks an empty slot).
uint64_t HashOf(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h != 0 ? h : 1;
}

size_t SlotOfKey(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 51); }

}  // namespace

static_assert(kMaxPhasePaths < (1u << 12), "live records keep a path in 12 bits");
static_assert(2 * (kMaxPhaseNames + 1) <= 8192 && 2 * (kMaxPhasePaths + 1) <= 8192);

namespace {

// Zeroed: an empty slot, no path.
template <typename T>
T* MapArray(size_t count) {
  void* mem = MapZeroed(count * sizeof(T));
  if (mem == nullptr) throw std::bad_alloc();  // as `new` did
  return static_cast<T*>(mem);
}

// Zeroed: no name. A heap block, not a mapping, because it holds the only
// pointers to the names' strings and LeakSanitizer scans the heap, not
// anonymous mappings; calloc leaves a large block's fresh pages untouched.
template <typename T>
T* HeapArray(size_t count) {
  void* mem = std::calloc(count, sizeof(T));  // NOLINT(cppcoreguidelines-no-malloc)
  if (mem == nullptr) throw std::bad_alloc();
  return static_cast<T*>(mem);
}

}  // namespace

PhaseTable::PhaseTable() {
  // One at a time, so that a constructor that throws (no memory: the host
  // process carries on without phases) gives back what it took before.
  try {
    name_slots_ = MapArray<NameSlot>(kSlots);
    path_slots_ = MapArray<PathSlot>(kSlots);
    names_ = HeapArray<Name>(kMaxPhaseNames + 1);
    path_list_ = MapArray<Path>(kMaxPhasePaths + 1);
    other_name_ = InternName(kOtherPhase);
  } catch (...) {
    Release();
    throw;
  }
}

PhaseTable::~PhaseTable() { Release(); }

void PhaseTable::Release() {
  const uint32_t used = names_used_.load(std::memory_order_acquire);
  for (uint32_t id = 1; id <= used; ++id) delete names_[id].text;
  Unmap(name_slots_, kSlots * sizeof(NameSlot));
  Unmap(path_slots_, kSlots * sizeof(PathSlot));
  std::free(names_);  // NOLINT(cppcoreguidelines-no-malloc): HeapArray's
  Unmap(path_list_, (kMaxPhasePaths + 1) * sizeof(Path));
}

uint32_t PhaseTable::FindName(std::string_view name, uint64_t hash) const {
  for (size_t i = hash & kSlotMask;; i = (i + 1) & kSlotMask) {
    const uint64_t h =
        std::atomic_ref<uint64_t>(name_slots_[i].hash).load(std::memory_order_acquire);
    if (h == 0) return 0;
    if (h == hash) {
      const uint32_t id =
          std::atomic_ref<uint32_t>(name_slots_[i].id).load(std::memory_order_relaxed);
      // Published after its text (InternName): never null here, but the
      // check costs nothing beside the compare.
      const std::string* text = names_[id].text;
      if (text != nullptr && *text == name) return id;
    }
  }
}

uint32_t PhaseTable::InternName(std::string_view name) {
  name = name.substr(0, kMaxPhaseNameBytes);
  const uint64_t hash = HashOf(name);
  if (const uint32_t id = FindName(name, hash); id != 0) return id;
  std::lock_guard<Mutex> lock(mu_);
  if (const uint32_t id = FindName(name, hash); id != 0) return id;
  const uint32_t used = names_used_.load(std::memory_order_relaxed);
  if (used == kMaxPhaseNames) {
    names_dropped_.fetch_add(1, std::memory_order_relaxed);
    return other_name_;
  }
  const uint32_t id = used + 1;
  names_[id].text = new std::string(name);
  names_used_.store(id, std::memory_order_release);
  size_t i = hash & kSlotMask;
  while (std::atomic_ref<uint64_t>(name_slots_[i].hash).load(std::memory_order_relaxed) != 0)
    i = (i + 1) & kSlotMask;
  std::atomic_ref<uint32_t>(name_slots_[i].id).store(id, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(name_slots_[i].hash).store(hash, std::memory_order_release);
  return id;
}

uint32_t PhaseTable::PathOf(uint32_t parent, uint32_t name) {
  const uint64_t key = uint64_t{parent} << 32 | name;
  const size_t start = SlotOfKey(key);
  for (size_t i = start;; i = (i + 1) & kSlotMask) {
    const uint64_t k =
        std::atomic_ref<uint64_t>(path_slots_[i].key).load(std::memory_order_acquire);
    if (k == key)
      return std::atomic_ref<uint32_t>(path_slots_[i].id).load(std::memory_order_relaxed);
    if (k == 0) break;
  }
  std::lock_guard<Mutex> lock(mu_);
  size_t i = start;
  for (;; i = (i + 1) & kSlotMask) {
    const uint64_t k =
        std::atomic_ref<uint64_t>(path_slots_[i].key).load(std::memory_order_relaxed);
    if (k == key)
      return std::atomic_ref<uint32_t>(path_slots_[i].id).load(std::memory_order_relaxed);
    if (k == 0) break;
  }
  const uint32_t used = paths_used_.load(std::memory_order_relaxed);
  // The last id is kept for "(other)", a top-level path.
  const bool other = name == other_name_ && parent == 0;
  if (used == kMaxPhasePaths - 1 && !other) {
    paths_dropped_.fetch_add(1, std::memory_order_relaxed);
    if (other_path_ == 0) {
      other_path_ = kMaxPhasePaths;
      path_list_[other_path_] = Path{0, other_name_};
    }
    return other_path_;
  }
  if (other && other_path_ != 0) return other_path_;
  const uint32_t id = used + 1;
  path_list_[id] = Path{parent, name};
  paths_used_.store(id, std::memory_order_release);
  std::atomic_ref<uint32_t>(path_slots_[i].id).store(id, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(path_slots_[i].key).store(key, std::memory_order_release);
  return id;
}

void PhaseTable::Push(PhaseStack* stack, uint32_t name, uint32_t domain) {
  if (stack->depth == kMaxPhaseDepth) {
    ++stack->overflow;
    too_deep_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Open(stack, name, domain, PathOf(stack->current(), name));
}

void PhaseTable::Open(PhaseStack* stack, uint32_t name, uint32_t domain, uint32_t path) {
  PhaseStats* stats = stats_.load(std::memory_order_acquire);
  const uint64_t opened = stats != nullptr ? stats->OnOpen(path) : 0;
  stack->levels[stack->depth++] =
      PhaseStack::Level{static_cast<uint16_t>(path), static_cast<uint16_t>(name),
                        static_cast<uint16_t>(domain), opened};
}

bool PhaseTable::Pop(PhaseStack* stack, uint32_t domain) {
  if (stack->overflow > 0) {
    --stack->overflow;
    return true;
  }
  const int top = stack->depth - 1;
  if (top < 0 || stack->levels[top].domain != domain) return PopBelow(stack, domain);
  // The innermost range: nothing above it to rebuild or reopen.
  if (PhaseStats* stats = stats_.load(std::memory_order_acquire)) {
    stats->OnClose(stack->levels[top], stack->thread);
  }
  stack->depth = top;
  return true;
}

__attribute__((noinline)) bool PhaseTable::PopBelow(PhaseStack* stack, uint32_t domain) {
  int i = stack->depth - 1;
  while (i >= 0 && stack->levels[i].domain != domain) --i;
  if (i < 0) {
    unbalanced_pops_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Traced slices nest: the ranges above the one closed close with it, and
  // reopen (as paths without it) below.
  PhaseStats* stats = stats_.load(std::memory_order_acquire);
  if (stats != nullptr) {
    for (int j = stack->depth - 1; j >= i; --j) stats->OnClose(stack->levels[j], stack->thread);
  }
  std::copy(stack->levels.begin() + i + 1, stack->levels.begin() + stack->depth,
            stack->levels.begin() + i);
  --stack->depth;
  Rebuild(stack, i);
  const uint64_t now = stats != nullptr && i < stack->depth ? stats->TraceNow() : 0;
  for (int j = i; j < stack->depth; ++j) stack->levels[j].opened_ns = now;
  return true;
}

void PhaseTable::Rebuild(PhaseStack* stack, int from) {
  for (int j = from; j < stack->depth; ++j) {
    const uint32_t parent = j > 0 ? stack->levels[j - 1].path : 0;
    stack->levels[j].path = static_cast<uint16_t>(PathOf(parent, stack->levels[j].name));
  }
}

void PhaseTable::ThreadExit(const PhaseStack& stack) {
  const uint64_t open = static_cast<uint64_t>(stack.depth) + static_cast<uint64_t>(stack.overflow);
  if (open == 0) return;
  open_at_thread_exit_.fetch_add(open, std::memory_order_relaxed);
  // Traced ranges end with their thread.
  if (PhaseStats* stats = stats_.load(std::memory_order_acquire)) {
    for (int j = stack.depth - 1; j >= 0; --j) stats->OnClose(stack.levels[j], stack.thread);
  }
}

uint64_t PhaseTable::Start(uint32_t name) {
  const uint32_t path = PathOf(0, name);
  const uint64_t id = next_range_.fetch_add(1, std::memory_order_relaxed);
  PhaseStats* stats = stats_.load(std::memory_order_acquire);
  for (OpenSlot& slot : open_) {
    uint64_t free = 0;
    if (slot.range.load(std::memory_order_relaxed) != 0 ||
        !slot.range.compare_exchange_strong(free, id << 12 | path, std::memory_order_acq_rel)) {
      continue;
    }
    slot.opened_ns = stats != nullptr ? stats->OnOpen(path) : 0;
    open_count_.fetch_add(1, std::memory_order_release);
    return id;
  }
  ranges_not_tracked_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

bool PhaseTable::End(uint64_t id) {
  for (OpenSlot& slot : open_) {
    uint64_t range = slot.range.load(std::memory_order_acquire);
    if (id == 0 || range >> 12 != id) continue;
    const PhaseStack::Level level{static_cast<uint16_t>(range & 0xfff), 0, 0, slot.opened_ns};
    if (!slot.range.compare_exchange_strong(range, 0, std::memory_order_acq_rel)) break;
    open_count_.fetch_sub(1, std::memory_order_release);
    if (PhaseStats* stats = stats_.load(std::memory_order_acquire)) stats->OnClose(level, 0);
    return true;
  }
  if (id != 0) unmatched_ends_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

uint32_t PhaseTable::Parent(uint32_t path) const {
  return path != 0 && path <= kMaxPhasePaths ? path_list_[path].parent : 0;
}

std::string_view PhaseTable::LeafName(uint32_t path) const {
  if (path == 0 || path > kMaxPhasePaths) return {};
  const std::string* name = names_[path_list_[path].name].text;
  return name != nullptr ? std::string_view(*name) : std::string_view();
}

std::string PhaseTable::PathText(uint32_t path) const {
  std::vector<std::string_view> parts;
  for (uint32_t p = path; p != 0 && parts.size() <= kMaxPhaseDepth; p = Parent(p)) {
    parts.push_back(LeafName(p));
  }
  std::string text;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!text.empty()) text += '/';
    text += *it;
  }
  return text;
}

PhaseTable::Counters PhaseTable::counters() const {
  Counters c;
  c.names_dropped = names_dropped_.load(std::memory_order_relaxed);
  c.paths_dropped = paths_dropped_.load(std::memory_order_relaxed);
  c.too_deep = too_deep_.load(std::memory_order_relaxed);
  c.unbalanced_pops = unbalanced_pops_.load(std::memory_order_relaxed);
  c.open_at_thread_exit = open_at_thread_exit_.load(std::memory_order_relaxed);
  c.ranges_not_tracked = ranges_not_tracked_.load(std::memory_order_relaxed);
  c.unmatched_ends = unmatched_ends_.load(std::memory_order_relaxed);
  return c;
}

// Per path; zero-filled pages are valid zeros.
struct PhaseStats::Counters {
  std::atomic<uint64_t> opens{0};
  std::atomic<uint64_t> allocs{0};
  std::atomic<uint64_t> alloc_bytes{0};
  std::atomic<uint64_t> host_allocs{0};
  std::atomic<uint64_t> host_alloc_bytes{0};
  std::atomic<uint64_t> peak_bytes{0};
  std::atomic<uint64_t> launches{0};
  std::atomic<uint32_t> peak_site{0};
  std::array<std::atomic<uint64_t>, kNumCopyKinds> copy_count{};
  std::array<std::atomic<uint64_t>, kNumCopyKinds> copy_bytes{};
  std::atomic<uint32_t> top_site{0};
  std::atomic<uint32_t> top_cell{0};  // its cell's index + 1 (0: none)
  std::atomic<uint64_t> top_bytes{0};
  std::atomic<uint64_t> top_peak{0};  // the peak when top_site was captured
};

PhaseStats::PhaseStats(const PhaseTable* table, const Tracker* tracker)
    : table_(table), tracker_(tracker) {
  const size_t counters_bytes = (size_t{kMaxPhasePaths} + 1) * sizeof(Counters);
  bytes_ = counters_bytes + kCells * sizeof(Cell);
  void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return;  // nothing is counted
  counters_ = static_cast<Counters*>(mem);
  cells_ = reinterpret_cast<Cell*>(static_cast<char*>(mem) + counters_bytes);
}

PhaseStats::Cell* PhaseStats::CellOf(uint32_t path, uint32_t stack_id, bool make) {
  const uint64_t key = uint64_t{path} << 32 | stack_id;
  size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 50) % kCells;
  for (size_t n = 0; n < kCells; ++n, i = (i + 1) % kCells) {
    uint64_t seen = cells_[i].key.load(std::memory_order_acquire);
    if (seen == key) return &cells_[i];
    if (seen != 0) continue;
    if (!make) return nullptr;
    if (cells_[i].key.compare_exchange_strong(seen, key, std::memory_order_acq_rel) ||
        seen == key) {
      return &cells_[i];
    }
  }
  if (make) cells_dropped_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void PhaseStats::OnFree(uint32_t path, uint64_t size, uint32_t stack_id) {
  if (cells_ == nullptr || path == 0 || path > kMaxPhasePaths) return;
  if (Cell* cell = CellOf(path, stack_id, false)) {
    cell->bytes.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
  }
}

void PhaseStats::TopAtPeak(const uint32_t* paths, const uint64_t* peaks, int n) {
  bool idle = false;
  if (!capturing_.compare_exchange_strong(idle, true, std::memory_order_acquire)) return;
  struct Best {
    uint32_t site = 0;
    int64_t bytes = 0;
    uint32_t cell = 0;  // index + 1
  };
  std::array<Best, kMaxPhaseDepth + 1> best{};
  for (size_t i = 0; i < kCells; ++i) {
    const uint64_t key = cells_[i].key.load(std::memory_order_acquire);
    if (key == 0) continue;
    const int64_t bytes = cells_[i].bytes.load(std::memory_order_relaxed);
    if (bytes <= 0) continue;
    // Counts for each path of `paths` it is in or nested in.
    int depth = 0;
    for (auto p = static_cast<uint32_t>(key >> 32); p != 0 && depth <= kMaxPhaseDepth;
         p = table_->Parent(p), ++depth) {
      for (int j = 0; j < n; ++j) {
        if (paths[j] == p && bytes > best[j].bytes) {
          best[j] = {static_cast<uint32_t>(key), bytes, static_cast<uint32_t>(i + 1)};
        }
      }
    }
  }
  for (int j = 0; j < n; ++j) {
    Counters& c = counters_[paths[j]];
    c.top_site.store(best[j].site, std::memory_order_relaxed);
    c.top_cell.store(best[j].cell, std::memory_order_relaxed);
    c.top_bytes.store(static_cast<uint64_t>(best[j].bytes), std::memory_order_relaxed);
    c.top_peak.store(peaks[j], std::memory_order_relaxed);
  }
  capturing_.store(false, std::memory_order_release);
}

PhaseStats::~PhaseStats() {
  if (counters_ != nullptr) munmap(counters_, bytes_);
}

void PhaseStats::RaisePeak(uint32_t path, uint64_t device_bytes, uint32_t stack_id) {
  // The common case (a range opens, an allocation is made, below the peak)
  // returns here, before the arrays below are made.
  if (device_bytes <= counters_[path].peak_bytes.load(std::memory_order_relaxed)) return;
  RaisePeakFrom(path, device_bytes, stack_id);
}

void PhaseStats::RaisePeakFrom(uint32_t path, uint64_t device_bytes, uint32_t stack_id) {
  // The path and the paths it is nested in, innermost first; a parent's peak
  // is at least its child's, so the walk stops at the first one not raised.
  // A path whose peak rose by 1/64 or more since its top site was captured
  // is captured again (TopAtPeak): a bounded number of times per path, as
  // the tracker's own peak capture.
  std::array<uint32_t, kMaxPhaseDepth + 1> capture{};
  std::array<uint64_t, kMaxPhaseDepth + 1> peaks{};
  int n = 0;
  for (uint32_t p = path; p != 0 && n <= kMaxPhaseDepth; p = table_->Parent(p)) {
    Counters& c = counters_[p];
    uint64_t seen = c.peak_bytes.load(std::memory_order_relaxed);
    if (device_bytes <= seen) break;
    while (device_bytes > seen &&
           !c.peak_bytes.compare_exchange_weak(seen, device_bytes, std::memory_order_relaxed)) {
    }
    if (device_bytes <= seen) break;
    c.peak_site.store(stack_id, std::memory_order_relaxed);
    const uint64_t captured = c.top_peak.load(std::memory_order_relaxed);
    if (stack_id != 0 && device_bytes - captured >= captured / 64 + 1) {
      capture[n] = p;
      peaks[n++] = device_bytes;
    } else if (const uint32_t cell = c.top_cell.load(std::memory_order_relaxed); cell != 0) {
      // Between captures, the site captured last: what it holds at this peak.
      const int64_t held = cells_[cell - 1].bytes.load(std::memory_order_relaxed);
      c.top_bytes.store(held > 0 ? static_cast<uint64_t>(held) : 0, std::memory_order_relaxed);
    }
  }
  if (n > 0) TopAtPeak(capture.data(), peaks.data(), n);
}

uint64_t PhaseStats::OnOpen(uint32_t path) {
  if (counters_ == nullptr || path == 0 || path > kMaxPhasePaths) return 0;
  counters_[path].opens.fetch_add(1, std::memory_order_relaxed);
  RaisePeak(path, tracker_->DeviceCurrentBytes(), 0);
  return TraceNow();
}

uint64_t PhaseStats::TraceNow() const {
  // Never 0, which means "not traced".
  return trace_ != nullptr ? std::max<uint64_t>(tracker_->NowNs(), 1) : 0;
}

// Not inlined into PhaseTable::Pop, whose common path then saves no registers.
__attribute__((noinline)) void PhaseStats::OnClose(const PhaseStack::Level& level,
                                                   uint32_t thread) {
  if (trace_ == nullptr || level.opened_ns == 0) return;
  trace_->Phase(level.opened_ns, tracker_->NowNs(), thread, level.path);
}

void PhaseStats::RaiseOpenRanges(uint64_t device_bytes, uint32_t stack_id) {
  table_->ForEachOpenRange([&](uint32_t path) { RaisePeak(path, device_bytes, stack_id); });
}

void PhaseStats::CountAlloc(uint32_t path, MemKind kind, uint64_t size, uint64_t device_bytes,
                            uint32_t stack_id) {
  if (counters_ == nullptr) return;
  if (path == 0 || path > kMaxPhasePaths) {
    // Outside every push/pop range: only the start/end ranges open.
    if (IsDeviceKind(kind)) RaiseOpenRanges(device_bytes, stack_id);
    return;
  }
  Counters& c = counters_[path];
  if (IsDeviceKind(kind)) {
    c.allocs.fetch_add(1, std::memory_order_relaxed);
    c.alloc_bytes.fetch_add(size, std::memory_order_relaxed);
    if (Cell* cell = CellOf(path, stack_id, true)) {
      cell->bytes.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
    }
    RaisePeak(path, device_bytes, stack_id);
    RaiseOpenRanges(device_bytes, stack_id);
  } else {
    c.host_allocs.fetch_add(1, std::memory_order_relaxed);
    c.host_alloc_bytes.fetch_add(size, std::memory_order_relaxed);
  }
}

void PhaseStats::OnCopy(uint32_t path, CopyKind kind, uint64_t bytes) {
  if (counters_ == nullptr || path == 0 || path > kMaxPhasePaths) return;
  const int k = static_cast<int>(kind);
  counters_[path].copy_count[k].fetch_add(1, std::memory_order_relaxed);
  counters_[path].copy_bytes[k].fetch_add(bytes, std::memory_order_relaxed);
}

void PhaseStats::OnLaunch(uint32_t path) {
  if (counters_ == nullptr || path == 0 || path > kMaxPhasePaths) return;
  counters_[path].launches.fetch_add(1, std::memory_order_relaxed);
}

std::vector<PhaseStats::Row> PhaseStats::Rows() const {
  std::vector<Row> rows;
  if (counters_ == nullptr) return rows;
  // Paths not handed out yet have nothing counted: their counters (most of
  // the 4,095, never touched) are not read, which would fault their pages in.
  const uint32_t last = table_->MaxPathId();
  for (uint32_t p = 1; p <= last; ++p) {
    const Counters& c = counters_[p];
    Row r;
    r.path = p;
    r.allocs = c.allocs.load(std::memory_order_relaxed);
    r.host_allocs = c.host_allocs.load(std::memory_order_relaxed);
    r.launches = c.launches.load(std::memory_order_relaxed);
    r.peak_bytes = c.peak_bytes.load(std::memory_order_relaxed);
    uint64_t copies = 0;
    for (int k = 0; k < kNumCopyKinds; ++k) {
      r.copy_count[k] = c.copy_count[k].load(std::memory_order_relaxed);
      r.copy_bytes[k] = c.copy_bytes[k].load(std::memory_order_relaxed);
      copies += r.copy_count[k];
    }
    r.opens = c.opens.load(std::memory_order_relaxed);
    if (r.opens == 0 && r.allocs == 0 && r.host_allocs == 0 && r.launches == 0 && copies == 0 &&
        r.peak_bytes == 0) {
      continue;  // never used (a range opened before attach has a peak since)
    }
    r.alloc_bytes = c.alloc_bytes.load(std::memory_order_relaxed);
    r.host_alloc_bytes = c.host_alloc_bytes.load(std::memory_order_relaxed);
    r.peak_site = c.peak_site.load(std::memory_order_relaxed);
    r.top_site = c.top_site.load(std::memory_order_relaxed);
    r.top_bytes = c.top_bytes.load(std::memory_order_relaxed);
    rows.push_back(r);
  }
  return rows;
}

bool PhasesSnapshot::empty() const {
  return rows.empty() && counters.names_dropped == 0 && counters.paths_dropped == 0 &&
         counters.too_deep == 0 && counters.unbalanced_pops == 0 &&
         counters.open_at_thread_exit == 0 && counters.ranges_not_tracked == 0 &&
         counters.unmatched_ends == 0;
}

int PhasesSnapshot::IndexOf(uint32_t path) const {
  const auto it = std::lower_bound(rows.begin(), rows.end(), path,
                                   [](const PhaseStats::Row& r, uint32_t p) { return r.path < p; });
  return it != rows.end() && it->path == path ? static_cast<int>(it - rows.begin()) : -1;
}

PhasesSnapshot SnapshotPhases(const PhaseTable& table, const PhaseStats& stats) {
  PhasesSnapshot s;
  s.rows = stats.Rows();
  s.paths.reserve(s.rows.size());
  s.depths.reserve(s.rows.size());
  for (const PhaseStats::Row& r : s.rows) {
    s.paths.push_back(table.PathText(r.path));
    uint32_t depth = 0;
    for (uint32_t p = r.path; p != 0 && depth <= kMaxPhaseDepth; p = table.Parent(p)) ++depth;
    s.depths.push_back(depth);
  }
  s.counters = table.counters();
  s.cells_dropped = stats.cells_dropped();
  return s;
}

}  // namespace gpuwatch
