#include "libgpuwatch/record/tracker.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <ctime>
#include <map>
#include <utility>

#include "libgpuwatch/base/address_map.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker_shard.h"

namespace gpuwatch {

using namespace tracker_internal;  // NOLINT(google-build-using-namespace): this file's own

Tracker::Tracker(uint32_t max_sites)
    : start_ns_(MonotonicNs()),
      start_ticks_(Ticks()),
      shards_(new Shard[kShards]),
      max_sites_(max_sites) {
  const size_t bytes = (size_t{max_sites_} + 1) * sizeof(Site);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    max_sites_ = 0;  // everything is accounted under site 0
    mem = mmap(nullptr, sizeof(Site), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  // Zero-filled pages are valid std::atomic<uint64_t> zeros.
  sites_ = static_cast<Site*>(mem);
}

Tracker::~Tracker() { munmap(sites_, (size_t{max_sites_} + 1) * sizeof(Site)); }

Tracker::Site& Tracker::SiteFor(uint32_t stack_id) const {
  return sites_[stack_id <= max_sites_ ? stack_id : 0];
}

namespace {

// The sum of a site's per-kind counters over the kinds of `kMask` (a
// KindMask): unrolled, one load per kind in the mask.
template <uint32_t kMask, size_t... k>
uint64_t SumOfKinds(const std::array<std::atomic<uint64_t>, kNumMemKinds>& by_kind,
                    std::index_sequence<k...> /*kinds*/) {
  return ((kMask >> k & 1u ? by_kind[k].load(std::memory_order_relaxed) : 0) + ...);
}
template <uint32_t kMask>
uint64_t SumOfKinds(const std::array<std::atomic<uint64_t>, kNumMemKinds>& by_kind) {
  return SumOfKinds<kMask>(by_kind, std::make_index_sequence<kNumMemKinds>{});
}

}  // namespace

void Tracker::CountSiteLive(Site& site, const LiveAlloc& alloc, int sign) {
  const auto delta = static_cast<uint64_t>(static_cast<int64_t>(sign));  // wraps for -1
  const int k = static_cast<int>(alloc.kind);
  site.kind_live_count[k].fetch_add(delta, std::memory_order_relaxed);
  site.kind_live_bytes[k].fetch_add(delta * alloc.size, std::memory_order_relaxed);
}

void Tracker::MaybeCapturePeak(uint64_t device_bytes) {
  // Capturing walks every site, so it is rate-limited by growth: a new capture
  // once the peak has grown by 1/64 since the last one, or always while there
  // are at most 64 sites (then it is cheap and the sites at the peak are
  // exact). Without the limit a warm-up phase, where every allocation is a new
  // peak, would walk every site on every allocation (2 us at 1,000 sites).
  const uint32_t used = sites_used_.load(std::memory_order_acquire);
  const uint64_t captured = peak_captured_bytes_.load(std::memory_order_relaxed);
  if (device_bytes <= captured) return;
  if (used > 64 && device_bytes - captured < captured / 64) return;
  std::lock_guard<Mutex> lock(peak_mu_);
  if (device_bytes <= peak_captured_bytes_.load(std::memory_order_relaxed)) return;
  peak_sites_.clear();
  for (uint32_t id = 0; id < used && id <= max_sites_; ++id) {
    const uint64_t live = SumOfKinds<kDeviceKinds>(sites_[id].kind_live_bytes);
    if (live != 0) peak_sites_.emplace_back(id, live);
  }
  for (int k = 0; k < kNumMemKinds; ++k) {
    peak_kinds_[k] = kinds_[k].current_bytes.load(std::memory_order_relaxed);
  }
  peak_captured_time_ns_ = NowNs();
  peak_captured_bytes_.store(device_bytes, std::memory_order_relaxed);
  if (trace_ != nullptr) trace_->Peak(peak_captured_time_ns_, device_bytes);
}

uint64_t Tracker::NowNs() const { return MonotonicNs() - start_ns_; }

Tracker::Shard& Tracker::ShardFor(uint64_t address) const {
  // Allocations are aligned; mix the bits so neighbours spread over shards.
  const uint64_t h = (address >> 6) * 0x9E3779B97F4A7C15ULL;
  return shards_[h >> 58];
}

// Inlined into OnAlloc, its only caller: a call and a frame less a pair.
__attribute__((always_inline)) inline void Tracker::AccountAlloc(const LiveAlloc& alloc,
                                                                 uint64_t now_ns,
                                                                 uint64_t call_ticks) {
  Counters& c = kinds_[static_cast<int>(alloc.kind)];
  RaiseTo(c.peak_bytes,
          c.current_bytes.fetch_add(alloc.size, std::memory_order_relaxed) + alloc.size);
  const uint32_t next = alloc.stack_id + 1;
  uint32_t used = sites_used_.load(std::memory_order_relaxed);
  while (next > used && alloc.stack_id <= max_sites_ &&
         !sites_used_.compare_exchange_weak(used, next, std::memory_order_release)) {
  }
  Site& site = SiteFor(alloc.stack_id);
  CountSiteLive(site, alloc, 1);
  // Another process's memory: its kind's totals and its site's live figures
  // only, no allocation, device or phase figures.
  if (IsImportedKind(alloc.kind)) return;
  // The site's allocations are the sum of its size buckets: no counter of their own.
  site.alloc_bytes.fetch_add(alloc.size, std::memory_order_relaxed);
  site.sizes[SizeBucket(alloc.size)].fetch_add(1, std::memory_order_relaxed);
  RaiseTo(site.largest, alloc.size);
  if (call_ticks != 0) site.call_ticks.fetch_add(call_ticks, std::memory_order_relaxed);
  if (!IsDeviceKind(alloc.kind)) {
    site.host_allocs.fetch_add(1, std::memory_order_relaxed);
    site.host_alloc_bytes.fetch_add(alloc.size, std::memory_order_relaxed);
    if (!IsVmmKey(alloc.address)) AddHostRange(alloc);  // a host kind
    if (phases_ != nullptr && alloc.phase != 0)
      phases_->OnAlloc(alloc.phase, alloc.kind, alloc.size, 0, alloc.stack_id);
    return;
  }
  const int d = DeviceSlot(alloc.device);
  const uint64_t on_device =
      device_live_[d].fetch_add(alloc.size, std::memory_order_relaxed) + alloc.size;
  RaiseTo(device_live_peak_[d], on_device);
  if (trace_ != nullptr) trace_->Memory(now_ns, alloc.device, on_device, alloc.stack_id);
  const uint64_t now =
      device_current_.fetch_add(alloc.size, std::memory_order_relaxed) + alloc.size;
  RaiseTo(device_peak_, now);
  RaiseTo(window_peak_, now);
  // The common case, below the last capture, without a call.
  if (now > peak_captured_bytes_.load(std::memory_order_relaxed)) MaybeCapturePeak(now);
  if (phases_ != nullptr)
    phases_->OnAlloc(alloc.phase, alloc.kind, alloc.size, now, alloc.stack_id);
}

void Tracker::AddHostRange(const LiveAlloc& alloc) {
  std::lock_guard<Mutex> lock(host_mu_);
  if (host_ranges_.insert_or_assign(alloc.address, HostRange{alloc.size, alloc.kind}).second) {
    host_range_count_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Tracker::RemoveHostRange(uint64_t address) {
  std::lock_guard<Mutex> lock(host_mu_);
  if (host_ranges_.erase(address) != 0) host_range_count_.fetch_sub(1, std::memory_order_relaxed);
}

bool Tracker::ClassifyHost(uint64_t address, MemKind* kind) const {
  if (address == 0 || host_range_count_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<Mutex> lock(host_mu_);
  auto it = host_ranges_.upper_bound(address);
  if (it == host_ranges_.begin()) return false;
  --it;
  if (address - it->first >= it->second.size) return false;
  *kind = it->second.kind;
  return true;
}

bool Tracker::Classify(uint64_t address, MemKind* kind, int* device) const {
  if (address == 0) return false;
  if (ClassifyHost(address, kind)) return true;
  {
    Shard& shard = ShardFor(address);
    std::lock_guard lock(shard.mu);
    if (const LiveRecord* record = shard.live.Find(address); record != nullptr) {
      const LiveAlloc alloc = AllocOf(address, *record);
      *kind = alloc.kind;
      if (device != nullptr) *device = alloc.device;
      return true;
    }
  }
  return ClassifyVmm(address, kind, device);  // inside a mapping (no other lock held)
}

// Inline: BeginFree, on every free, makes no call for it.
[[gnu::always_inline]] inline void Tracker::ReleaseLive(const LiveAlloc& alloc) {
  CountSiteLive(SiteFor(alloc.stack_id), alloc, -1);
  if (IsDeviceKind(alloc.kind)) {
    if (phases_ != nullptr && alloc.phase != 0)
      phases_->OnFree(alloc.phase, alloc.size, alloc.stack_id);
  } else if (IsHostKind(alloc.kind)) {
    RemoveHostRange(alloc.address);
  }
  kinds_[static_cast<int>(alloc.kind)].current_bytes.fetch_sub(alloc.size,
                                                               std::memory_order_relaxed);
  if (IsDeviceKind(alloc.kind)) {
    device_current_.fetch_sub(alloc.size, std::memory_order_relaxed);
    const uint64_t on_device =
        device_live_[DeviceSlot(alloc.device)].fetch_sub(alloc.size, std::memory_order_relaxed) -
        alloc.size;
    if (trace_ != nullptr) trace_->Memory(NowNs(), alloc.device, on_device, alloc.stack_id);
  }
}

void Tracker::OnAlloc(const AllocEvent& event) {
  if (paused()) return;
  LiveAlloc alloc;
  alloc.address = event.address;
  alloc.size = std::min(event.size, kMaxRecordedSize);  // 16 TiB: what the table records
  const uint64_t now_ns = NowNs();
  alloc.time_ms = static_cast<uint32_t>(std::min<uint64_t>(now_ns / 1000000, UINT32_MAX));
  alloc.stack_id = event.stack_id;
  alloc.phase = static_cast<uint16_t>(event.phase <= kMaxPhasePaths ? event.phase : 0);
  alloc.point_tag = static_cast<uint8_t>(generation_.load(std::memory_order_relaxed));
  alloc.device = static_cast<int16_t>(event.device);
  alloc.kind = event.kind;
  const LiveRecord record = RecordOf(alloc);  // packed before the lock is taken

  LiveRecord old;
  bool had_old = false;
  {
    Shard& shard = ShardFor(event.address);
    std::lock_guard lock(shard.mu);
    bool dropped = false;
    had_old = shard.live.Upsert(event.address, record, &old, &dropped);
    if (dropped) {
      dropped_allocs_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    KindCounts& k = shard.Counts(alloc.kind);
    Add(k.allocs, 1);
    Add(k.alloc_bytes, alloc.size);
    if (had_old) Add(shard.Counts(KindOf(old)).frees, 1);
  }
  if (had_old) ReleaseLive(AllocOf(event.address, old));  // a free we never saw
  AccountAlloc(alloc, now_ns, event.call_ticks);
}

void Tracker::OnFreeDone(const LiveAlloc& removed, uint64_t call_ticks) {
  Site& site = SiteFor(removed.stack_id);
  site.frees.fetch_add(1, std::memory_order_relaxed);
  site.call_ticks.fetch_add(call_ticks, std::memory_order_relaxed);
  if (IsChurnKind(removed.kind) &&
      site.kind_live_count[static_cast<int>(removed.kind)].load(std::memory_order_relaxed) == 0) {
    site.churn_cycles.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Tracker::OnFree(uint64_t address) {
  LiveAlloc freed;
  if (BeginFree(address, &freed)) return true;
  CountUnknownFree();
  return false;
}

bool Tracker::BeginFree(uint64_t address, LiveAlloc* removed) {
  {
    Shard& shard = ShardFor(address);
    std::lock_guard lock(shard.mu);
    LiveRecord record;
    if (!shard.live.Erase(address, &record)) return false;
    *removed = AllocOf(address, record);
    Add(shard.Counts(removed->kind).frees, 1);
  }
  ReleaseLive(*removed);
  return true;
}

void Tracker::UndoFree(const LiveAlloc& removed) {
  {
    Shard& shard = ShardFor(removed.address);
    std::lock_guard lock(shard.mu);
    bool dropped = false;
    LiveRecord newer;
    if (shard.live.Upsert(removed.address, RecordOf(removed), &newer, &dropped)) {
      // The address is live again already: the free did happen after all.
      LiveRecord ours;
      shard.live.Upsert(removed.address, newer, &ours, &dropped);
      return;
    }
    if (dropped) {
      dropped_allocs_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Sub(shard.Counts(removed.kind).frees, 1);
  }
  // Back as it was: live bytes per kind, device and site; no new allocation.
  CountSiteLive(SiteFor(removed.stack_id), removed, 1);
  if (IsHostKind(removed.kind) && !IsVmmKey(removed.address)) {
    AddHostRange(removed);
  }
  kinds_[static_cast<int>(removed.kind)].current_bytes.fetch_add(removed.size,
                                                                 std::memory_order_relaxed);
  if (IsDeviceKind(removed.kind)) {
    device_current_.fetch_add(removed.size, std::memory_order_relaxed);
    const uint64_t on_device = device_live_[DeviceSlot(removed.device)].fetch_add(
                                   removed.size, std::memory_order_relaxed) +
                               removed.size;
    if (trace_ != nullptr) trace_->Memory(NowNs(), removed.device, on_device, removed.stack_id);
  }
}

Tracker::Freed Tracker::OnContextDestroyed(int device, uint32_t kinds) {
  std::vector<uint64_t> addresses;
  ForEachLive([&](const LiveAlloc& a, uint32_t /*time_ms*/) {
    if (a.device == device && (kinds >> static_cast<int>(a.kind) & 1u) != 0) {
      addresses.push_back(a.address);
    }
  });
  Freed freed;
  for (const uint64_t address : addresses) {
    LiveAlloc removed;
    if (!BeginFree(address, &removed)) continue;  // freed meanwhile by its owner
    ++freed.count;
    freed.bytes += removed.size;
  }
  return freed;
}

void Tracker::OnCopy(const CopyEvent& event) {
  if (paused()) return;
  const int k = static_cast<int>(event.kind);
  copy_count_[k].fetch_add(1, std::memory_order_relaxed);
  copy_bytes_[k].fetch_add(event.bytes, std::memory_order_relaxed);
  if (phases_ != nullptr && event.phase != 0) phases_->OnCopy(event.phase, event.kind, event.bytes);
}

void Tracker::OnPhaseLaunch(uint32_t phase) {
  if (phases_ != nullptr) phases_->OnLaunch(phase);
}

void Tracker::LockForFork() {
  peak_mu_.lock();
  vmm_mu_.lock();
  ipc_mu_.lock();
  host_mu_.lock();
  for (int i = 0; i < kShards; ++i) shards_[i].mu.lock();
}

void Tracker::UnlockAfterFork() {
  for (int i = kShards - 1; i >= 0; --i) shards_[i].mu.unlock();
  host_mu_.unlock();
  ipc_mu_.unlock();
  vmm_mu_.unlock();
  peak_mu_.unlock();
}

uint64_t Tracker::EventCount() const {
  uint64_t n = launches_.load(std::memory_order_relaxed);
  for (int i = 0; i < kShards; ++i) {
    for (int kind = 0; kind < kNumMemKinds; ++kind) {
      const KindCounts& k = shards_[i].Counts(kind);
      n += k.allocs.load(std::memory_order_relaxed) + k.frees.load(std::memory_order_relaxed);
    }
  }
  for (const auto& c : copy_count_) n += c.load(std::memory_order_relaxed);
  return n;
}

std::vector<std::pair<uint32_t, uint64_t>> Tracker::LiveDeviceBytesBySite() const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  LiveDeviceBytesBySite(&out);
  return out;
}

void Tracker::LiveDeviceBytesBySite(std::vector<std::pair<uint32_t, uint64_t>>* out) const {
  out->clear();
  const uint32_t used = sites_used_.load(std::memory_order_acquire);
  for (uint32_t id = 0; id < used && id <= max_sites_; ++id) {
    const uint64_t live = SumOfKinds<kDeviceKinds>(sites_[id].kind_live_bytes);
    if (live != 0) out->emplace_back(id, live);
  }
}

Tracker::LiveFigures Tracker::Live(uint32_t kinds, int device) const {
  LiveFigures live;
  const auto wanted = [kinds](int kind) { return (kinds >> kind & 1u) != 0; };
  if (device < 0) {
    for (int kind = 0; kind < kNumMemKinds; ++kind) {
      if (!wanted(kind)) continue;
      live.bytes += kinds_[kind].current_bytes.load(std::memory_order_relaxed);
      for (int i = 0; i < kShards; ++i) {
        const KindCounts& k = shards_[i].Counts(kind);
        live.count +=
            k.allocs.load(std::memory_order_relaxed) - k.frees.load(std::memory_order_relaxed);
      }
    }
    return live;
  }
  ForEachLive([&](const LiveAlloc& a, uint32_t /*time_ms*/) {
    if (a.device != device || !wanted(static_cast<int>(a.kind))) return;
    live.bytes += a.size;
    ++live.count;
  });
  return live;
}

Tracker::Point Tracker::NewPoint() {
  Point p;
  p.time_ms = static_cast<uint32_t>(std::min<uint64_t>(NowNs() / 1000000, UINT32_MAX));
  p.generation = generation_.fetch_add(1, std::memory_order_relaxed) + 1;
  window_peak_.store(device_current_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return p;
}

bool Tracker::IsAfter(uint32_t time_ms, uint8_t tag, Point point) {
  if (time_ms != point.time_ms) return time_ms > point.time_ms;
  return static_cast<uint8_t>(tag - static_cast<uint8_t>(point.generation)) < 128;
}

std::vector<Tracker::SiteRows> Tracker::LiveSince(Point point,
                                                  std::initializer_list<uint32_t> groups) const {
  std::array<int, kNumMemKinds> group_of{};  // a kind's group, -1 for none
  group_of.fill(-1);
  int g = 0;
  for (const uint32_t kinds : groups) {
    for (int k = 0; k < kNumMemKinds; ++k) {
      if ((kinds >> k & 1u) != 0 && group_of[k] < 0) group_of[k] = g;
    }
    ++g;
  }
  std::vector<std::map<uint32_t, SiteFigures>> by_site(groups.size());
  ForEachLive([&](const LiveAlloc& a, uint32_t time_ms) {
    const int group = group_of[static_cast<int>(a.kind)];
    if (group < 0 || !IsAfter(time_ms, a.point_tag, point)) return;
    SiteFigures& f = by_site[group][a.stack_id];
    f.bytes += a.size;
    ++f.count;
    f.kind_bytes[static_cast<int>(a.kind)] += a.size;
  });
  std::vector<SiteRows> out;
  out.reserve(by_site.size());
  for (const auto& sites : by_site) out.emplace_back(sites.begin(), sites.end());
  return out;
}

TrackerSnapshot Tracker::Totals() const {
  TrackerSnapshot snap;
  snap.time_ns = NowNs();
  for (int i = 0; i < kShards; ++i) AddShardCounts(shards_[i], &snap);
  FillCounters(&snap);
  return snap;
}

void Tracker::AddShardCounts(const Shard& shard, TrackerSnapshot* snap) {
  for (int kind = 0; kind < kNumMemKinds; ++kind) {
    const KindCounts& k = shard.Counts(kind);
    KindTotals& t = snap->kinds[kind];
    const uint64_t allocs = k.allocs.load(std::memory_order_relaxed);
    const uint64_t frees = k.frees.load(std::memory_order_relaxed);
    t.allocs += allocs;
    t.alloc_bytes += k.alloc_bytes.load(std::memory_order_relaxed);
    t.frees += frees;
    t.current_count += allocs - frees;
  }
}

void Tracker::FillCounters(TrackerSnapshot* out) const {
  TrackerSnapshot& snap = *out;
  for (int i = 0; i < kNumMemKinds; ++i) {
    snap.kinds[i].current_bytes = kinds_[i].current_bytes.load(std::memory_order_relaxed);
    snap.kinds[i].peak_bytes = kinds_[i].peak_bytes.load(std::memory_order_relaxed);
  }
  for (int i = 0; i < kNumCopyKinds; ++i) {
    snap.copies[i].count = copy_count_[i].load(std::memory_order_relaxed);
    snap.copies[i].bytes = copy_bytes_[i].load(std::memory_order_relaxed);
  }
  snap.launches = launches_.load(std::memory_order_relaxed);
  snap.unknown_frees = unknown_frees_.load(std::memory_order_relaxed);
  snap.dropped_allocs = dropped_allocs_.load(std::memory_order_relaxed);
  snap.device_current_bytes = device_current_.load(std::memory_order_relaxed);
  snap.device_peak_bytes = device_peak_.load(std::memory_order_relaxed);
  for (int d = 0; d < kMaxDevices; ++d) {
    snap.device_bytes_by_device[d] = device_live_[d].load(std::memory_order_relaxed);
    snap.device_peak_bytes_by_device[d] = device_live_peak_[d].load(std::memory_order_relaxed);
  }
}

TrackerSnapshot Tracker::Snapshot() const {
  TrackerSnapshot snap;
  snap.time_ns = NowNs();
  // Reserve once from the live counters (an estimate: the shards are read one
  // at a time); reserving per shard would re-copy everything 64 times.
  uint64_t live_estimate = 0;
  for (int i = 0; i < kShards; ++i) {
    for (int kind = 0; kind < kNumMemKinds; ++kind) {
      const KindCounts& k = shards_[i].Counts(kind);
      live_estimate +=
          k.allocs.load(std::memory_order_relaxed) - k.frees.load(std::memory_order_relaxed);
    }
  }
  snap.live.reserve(live_estimate + live_estimate / 16);
  shard_walks_.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    std::lock_guard lock(shard.mu);
    shard.live.ForEach([&](uint64_t address, const LiveRecord& record) {
      snap.live.push_back(AllocOf(address, record));
    });
    AddShardCounts(shard, &snap);
  }
  FillCounters(&snap);
  const uint32_t used = std::min(sites_used_.load(std::memory_order_acquire), max_sites_ + 1);
  // Device allocations live per site, from the table just copied.
  std::vector<uint64_t> live_count(used, 0);
  for (const LiveAlloc& a : snap.live) {
    // An allocation whose site is newer than `used` (recorded meanwhile) is left out.
    const uint32_t id = a.stack_id <= max_sites_ ? a.stack_id : 0;
    if (IsDeviceKind(a.kind) && id < used) ++live_count[id];
  }
  const double ns_per_tick = NsPerTick();
  for (uint32_t id = 0; id < used; ++id) {
    SiteTotals t = TotalsOf(sites_[id], ns_per_tick);
    if (t.allocs == 0) continue;
    t.live_count = live_count[id];
    snap.sites.emplace_back(id, t);
  }
  FillPeak(&snap);
  return snap;
}

double Tracker::NsPerTick() const {
  if (kTicksAreNs) return 1.0;
  const uint64_t ticks = Ticks() - start_ticks_;
  const uint64_t ns = MonotonicNs() - start_ns_;
  return ticks > 0 ? static_cast<double>(ns) / static_cast<double>(ticks) : 1.0;
}

SiteTotals Tracker::TotalsOf(const Site& site, double ns_per_tick) const {
  SiteTotals t;
  t.frees = site.frees.load(std::memory_order_relaxed);
  t.churn_cycles = site.churn_cycles.load(std::memory_order_relaxed);
  t.call_ns = static_cast<uint64_t>(
      static_cast<double>(site.call_ticks.load(std::memory_order_relaxed)) * ns_per_tick);
  for (int b = 0; b < kSizeBuckets; ++b) {
    t.sizes[b] = site.sizes[b].load(std::memory_order_relaxed);
    t.allocs += t.sizes[b];
  }
  t.alloc_bytes = site.alloc_bytes.load(std::memory_order_relaxed);
  t.largest = site.largest.load(std::memory_order_relaxed);
  t.live_bytes = SumOfKinds<kDeviceKinds>(site.kind_live_bytes);
  t.live_count = SumOfKinds<kDeviceKinds>(site.kind_live_count);
  t.host_allocs = site.host_allocs.load(std::memory_order_relaxed);
  t.host_alloc_bytes = site.host_alloc_bytes.load(std::memory_order_relaxed);
  return t;
}

void Tracker::FillPeak(TrackerSnapshot* snap) const {
  std::lock_guard<Mutex> lock(peak_mu_);
  snap->peak_sites = peak_sites_;
  snap->peak_kinds = peak_kinds_;
  snap->peak_sites_device_bytes = peak_captured_bytes_.load(std::memory_order_relaxed);
  snap->peak_sites_time_ns = peak_captured_time_ns_;
}

TrackerSnapshot Tracker::LiveBySite() const {
  TrackerSnapshot snap = Totals();
  snap.live_by_site = true;
  const uint32_t used = std::min(sites_used_.load(std::memory_order_acquire), max_sites_ + 1);
  const double ns_per_tick = NsPerTick();
  for (uint32_t id = 0; id < used; ++id) {
    const Site& site = sites_[id];
    if (const SiteTotals t = TotalsOf(site, ns_per_tick); t.allocs != 0)
      snap.sites.emplace_back(id, t);
    TrackerSnapshot::SiteLive live;
    live.count = SumOfKinds<kDeviceKinds>(site.kind_live_count);
    live.host_count = SumOfKinds<kHostKinds>(site.kind_live_count);
    live.imported_count = SumOfKinds<kImportedKinds>(site.kind_live_count);
    if (live.count == 0 && live.host_count == 0 && live.imported_count == 0) continue;
    for (int k = 0; k < kNumMemKinds; ++k) {
      live.kind_bytes[k] = site.kind_live_bytes[k].load(std::memory_order_relaxed);
    }
    snap.site_live.emplace_back(id, live);
  }
  FillPeak(&snap);
  return snap;
}

}  // namespace gpuwatch
