#include "libgpuwatch/record/regions.h"

#include <mutex>

#include "libgpuwatch/base/address_map.h"

namespace gpuwatch {

namespace {

// A live region besides its address (the map's key).
struct RegionRecord {
  uint64_t size = 0;
  uint64_t heap = 0;
  uint32_t stack_id = 0;
  uint32_t time_ms = 0;
  uint16_t phase = 0;
};

RegionRecord RecordOf(const PoolRegion& r) {
  return {r.size, r.heap, r.stack_id, r.time_ms, r.phase};
}

PoolRegion RegionOf(uint64_t address, const RegionRecord& r) {
  return {address, r.size, r.heap, r.stack_id, r.time_ms, r.phase};
}

void Add(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

uint64_t Load(const std::atomic<uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

}  // namespace

struct RegionTable::Shard {
  Mutex mu;
  AddressMap<RegionRecord> regions;  // guarded by mu
};

RegionTable::RegionTable() : shards_(new Shard[kShards]) {}
RegionTable::~RegionTable() = default;

RegionTable::Shard& RegionTable::ShardFor(uint64_t address) const {
  // Blocks of a pool are aligned: mix the bits before picking a shard.
  return shards_[(address * 0x9E3779B97F4A7C15ULL) >> 60];
}

bool RegionTable::HeapKnown(uint64_t handle) const {
  if (handle == 0) return true;  // the process-wide heap
  std::lock_guard<Mutex> lock(heap_mu_);
  return heaps_.count(handle) != 0;
}

void RegionTable::RegisterHeap(const PoolHeap& heap) {
  std::lock_guard<Mutex> lock(heap_mu_);
  if (heaps_.size() >= kMaxHeaps && heaps_.count(heap.handle) == 0) {
    Add(heaps_dropped_);
    return;
  }
  heaps_[heap.handle] = heap;
  Add(heaps_registered_);
}

bool RegionTable::UnregisterHeap(uint64_t handle) {
  std::lock_guard<Mutex> lock(heap_mu_);
  if (heaps_.erase(handle) == 0) return false;
  Add(heaps_unregistered_);
  return true;
}

uint64_t RegionTable::ResetHeap(uint64_t heap) {
  Add(heaps_reset_);
  uint64_t ended = 0;
  std::vector<uint64_t> addresses;
  for (int s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<Mutex> lock(shard.mu);
    addresses.clear();
    shard.regions.ForEach([&](uint64_t address, const RegionRecord& r) {
      if (r.heap == heap) addresses.push_back(address);
    });
    for (const uint64_t address : addresses) {
      RegionRecord gone;
      shard.regions.Erase(address, &gone);
    }
    ended += addresses.size();
  }
  live_.fetch_sub(ended, std::memory_order_relaxed);
  Add(released_by_reset_, ended);
  return ended;
}

void RegionTable::Register(const PoolRegion& region) {
  if (!HeapKnown(region.heap)) Add(unknown_heaps_);
  Shard& shard = ShardFor(region.address);
  std::lock_guard<Mutex> lock(shard.mu);
  RegionRecord old;
  bool dropped = false;
  const bool had_old = shard.regions.Upsert(region.address, RecordOf(region), &old, &dropped);
  if (dropped) {
    Add(dropped_);
    return;
  }
  Add(registered_);
  if (had_old) {
    Add(replaced_);
  } else {
    Add(live_);
  }
}

bool RegionTable::Resize(uint64_t address, uint64_t size) {
  Shard& shard = ShardFor(address);
  std::lock_guard<Mutex> lock(shard.mu);
  RegionRecord* r = shard.regions.Find(address);
  if (r == nullptr) {
    Add(unknown_resizes_);
    return false;
  }
  r->size = size;
  Add(resized_);
  return true;
}

bool RegionTable::Unregister(uint64_t address) {
  Shard& shard = ShardFor(address);
  std::lock_guard<Mutex> lock(shard.mu);
  RegionRecord gone;
  if (!shard.regions.Erase(address, &gone)) {
    Add(unknown_unregisters_);
    return false;
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
  Add(unregistered_);
  return true;
}

RegionsSnapshot RegionTable::Snapshot() const {
  RegionsSnapshot out;
  out.live.reserve(live_count());
  for (int s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<Mutex> lock(shard.mu);
    shard.regions.ForEach([&out](uint64_t address, const RegionRecord& r) {
      out.live.push_back(RegionOf(address, r));
    });
  }
  {
    std::lock_guard<Mutex> lock(heap_mu_);
    out.heaps.reserve(heaps_.size());
    for (const auto& [handle, heap] : heaps_) out.heaps.push_back(heap);
  }
  RegionCounters& c = out.counters;
  c.registered = Load(registered_);
  c.unregistered = Load(unregistered_);
  c.resized = Load(resized_);
  c.released_by_reset = Load(released_by_reset_);
  c.replaced = Load(replaced_);
  c.unknown_unregisters = Load(unknown_unregisters_);
  c.unknown_resizes = Load(unknown_resizes_);
  c.unknown_heaps = Load(unknown_heaps_);
  c.dropped = Load(dropped_);
  c.heaps_registered = Load(heaps_registered_);
  c.heaps_unregistered = Load(heaps_unregistered_);
  c.heaps_reset = Load(heaps_reset_);
  c.heaps_dropped = Load(heaps_dropped_);
  return out;
}

void RegionTable::RememberHandle(uint64_t handle, uint64_t address) {
  const std::lock_guard<Mutex> lock(handle_mu_);
  if (handles_.size() < kMaxHandles) handles_[handle] = address;
}

uint64_t RegionTable::TakeHandle(uint64_t handle) {
  const std::lock_guard<Mutex> lock(handle_mu_);
  const auto it = handles_.find(handle);
  if (it == handles_.end()) return 0;
  const uint64_t address = it->second;
  handles_.erase(it);
  return address;
}

void RegionTable::LockForFork() {
  heap_mu_.lock();
  for (int s = 0; s < kShards; ++s) shards_[s].mu.lock();
  handle_mu_.lock();
}

void RegionTable::UnlockAfterFork() {
  handle_mu_.unlock();
  for (int s = kShards - 1; s >= 0; --s) shards_[s].mu.unlock();
  heap_mu_.unlock();
}

}  // namespace gpuwatch
