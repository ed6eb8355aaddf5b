// VMM memory in the tracker, counted per physical handle as the driver
// counts it (tracker.h). The handle tables are under vmm_mu_ alone: what a
// change does to the live table, the host ranges or the counts is done after
// it is released (the fork handler takes vmm_mu_ before the shards).
#include <algorithm>
#include <array>

#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/tracker_shard.h"

namespace gpuwatch {

using namespace tracker_internal;  // NOLINT(google-build-using-namespace): the tracker's own

namespace {

// Mappings an unmap ends, handled a batch at a time: no allocation.
constexpr size_t kUnmapBatch = 16;

}  // namespace

void Tracker::CountImported(const VmmMemory& memory, int allocs, int frees, int64_t bytes) {
  {
    Shard& shard = ShardFor(memory.key);
    std::lock_guard lock(shard.mu);
    KindCounts& k = shard.Counts(MemKind::kVmmImported);
    if (allocs != 0) Add(k.allocs, static_cast<uint64_t>(allocs));
    if (frees > 0) Add(k.frees, static_cast<uint64_t>(frees));
    if (frees < 0) Sub(k.frees, static_cast<uint64_t>(-frees));
    if (bytes > 0 && frees == 0) Add(k.alloc_bytes, static_cast<uint64_t>(bytes));
  }
  Counters& c = kinds_[static_cast<int>(MemKind::kVmmImported)];
  if (bytes > 0) {
    const auto b = static_cast<uint64_t>(bytes);
    RaiseTo(c.peak_bytes, c.current_bytes.fetch_add(b, std::memory_order_relaxed) + b);
  } else if (bytes < 0) {
    c.current_bytes.fetch_sub(static_cast<uint64_t>(-bytes), std::memory_order_relaxed);
  }
}

void Tracker::FreeVmm(const VmmMemory& memory, LiveAlloc* removed) {
  if (!memory.counted) return;
  if (memory.kind == MemKind::kVmmImported) {
    CountImported(memory, 0, 1, -static_cast<int64_t>(memory.size));
    return;
  }
  LiveAlloc gone;
  BeginFree(memory.key, removed != nullptr ? removed : &gone);
}

void Tracker::OnVmmCreate(uint64_t handle, const AllocEvent& event) {
  VmmMemory memory;
  memory.size = event.size;
  memory.kind = event.kind;
  memory.device = event.device;
  memory.counted = !paused();
  VmmMemory forgotten;  // a handle of the same value whose release was missed
  bool free_forgotten = false;
  {
    std::lock_guard<Mutex> lock(vmm_mu_);
    memory.key = vmm_next_key_;
    vmm_next_key_ += 64;
    vmm_memory_[memory.key] = memory;
    auto [it, inserted] = vmm_handles_.try_emplace(handle, memory.key);
    if (!inserted) {
      auto old = vmm_memory_.find(it->second);
      if (old != vmm_memory_.end()) {
        old->second.released = true;
        if (old->second.maps == 0) {
          forgotten = old->second;
          free_forgotten = true;
          vmm_memory_.erase(old);
        }
      }
      it->second = memory.key;
    }
  }
  if (free_forgotten) FreeVmm(forgotten, nullptr);
  if (!memory.counted) return;
  if (memory.kind == MemKind::kVmmImported) {
    CountImported(memory, 1, 0, 0);  // its bytes come with its first mapping
    return;
  }
  AllocEvent e = event;
  e.address = memory.key;
  OnAlloc(e);
}

void Tracker::OnVmmImport(uint64_t handle) {
  AllocEvent e;
  e.kind = MemKind::kVmmImported;
  e.device = -1;
  OnVmmCreate(handle, e);
}

bool Tracker::OnVmmMap(uint64_t handle, uint64_t address, uint64_t size) {
  VmmMemory memory;
  bool first_import_map = false;
  VmmMemory unmapped;  // a mapping at the same address whose unmap was missed
  bool free_unmapped = false;
  {
    std::lock_guard<Mutex> lock(vmm_mu_);
    const auto h = vmm_handles_.find(handle);
    if (h == vmm_handles_.end()) return false;
    auto m = vmm_memory_.find(h->second);
    if (m == vmm_memory_.end()) return false;
    if (auto old = vmm_mappings_.find(address); old != vmm_mappings_.end()) {
      auto o = vmm_memory_.find(old->second.key);
      if (o != vmm_memory_.end() && --o->second.maps == 0 && o->second.released) {
        unmapped = o->second;
        free_unmapped = true;
        vmm_memory_.erase(o);
      }
    }
    vmm_mappings_[address] = VmmMapping{size, h->second};
    vmm_mapping_count_.store(vmm_mappings_.size(), std::memory_order_relaxed);
    ++m->second.maps;
    if (m->second.kind == MemKind::kVmmImported && m->second.size == 0) {
      m->second.size = size;
      first_import_map = true;
    }
    memory = m->second;
  }
  if (free_unmapped) FreeVmm(unmapped, nullptr);
  if (first_import_map && memory.counted) CountImported(memory, 0, 0, static_cast<int64_t>(size));
  if (IsHostKind(memory.kind)) {  // host memory mapped for the device: pinned for copies
    LiveAlloc range;
    range.address = address;
    range.size = size;
    range.kind = memory.kind;
    AddHostRange(range);
  }
  return true;
}

void Tracker::OnVmmUnmap(uint64_t address, uint64_t size) {
  bool found = false;
  const uint64_t end = address + size;
  uint64_t from = address;
  for (;;) {
    std::array<VmmMemory, kUnmapBatch> freed;
    std::array<uint64_t, kUnmapBatch> host_ranges;
    size_t n_freed = 0;
    size_t n_host = 0;
    bool more = false;
    {
      std::lock_guard<Mutex> lock(vmm_mu_);
      auto it = vmm_mappings_.lower_bound(from);
      while (it != vmm_mappings_.end() && it->first < end) {
        if (n_freed == kUnmapBatch || n_host == kUnmapBatch) {
          more = true;
          from = it->first;
          break;
        }
        found = true;
        auto m = vmm_memory_.find(it->second.key);
        if (m != vmm_memory_.end()) {
          if (IsHostKind(m->second.kind)) host_ranges[n_host++] = it->first;
          if (--m->second.maps == 0 && m->second.released) {
            freed[n_freed++] = m->second;
            vmm_memory_.erase(m);
          }
        }
        it = vmm_mappings_.erase(it);
      }
      vmm_mapping_count_.store(vmm_mappings_.size(), std::memory_order_relaxed);
    }
    for (size_t i = 0; i < n_host; ++i) RemoveHostRange(host_ranges[i]);
    for (size_t i = 0; i < n_freed; ++i) FreeVmm(freed[i], nullptr);
    if (!more) break;
  }
  if (!found) CountUnknownFree();
}

bool Tracker::BeginVmmRelease(uint64_t handle, VmmRelease* release) {
  *release = VmmRelease{};
  release->handle = handle;
  {
    std::lock_guard<Mutex> lock(vmm_mu_);
    const auto h = vmm_handles_.find(handle);
    if (h == vmm_handles_.end()) return false;
    auto m = vmm_memory_.find(h->second);
    if (m != vmm_memory_.end() && m->second.retains > 0) {  // the handle stays
      --m->second.retains;
      release->retained = true;
      release->memory = m->second;
      return true;
    }
    vmm_handles_.erase(h);
    if (m == vmm_memory_.end()) return false;
    m->second.released = true;
    release->memory = m->second;
    if (m->second.maps == 0) {
      release->freed = true;
      vmm_memory_.erase(m);
    }
  }
  if (release->freed) FreeVmm(release->memory, &release->removed);
  return true;
}

void Tracker::UndoVmmRelease(const VmmRelease& release) {
  const VmmMemory& memory = release.memory;
  {
    std::lock_guard<Mutex> lock(vmm_mu_);
    if (release.retained) {
      if (auto m = vmm_memory_.find(memory.key); m != vmm_memory_.end()) ++m->second.retains;
      return;
    }
    if (release.freed) {
      VmmMemory back = memory;
      back.released = false;
      vmm_memory_[memory.key] = back;
    } else if (auto m = vmm_memory_.find(memory.key); m != vmm_memory_.end()) {
      m->second.released = false;
    } else {
      return;  // freed meanwhile by an unmap on another thread
    }
    vmm_handles_.try_emplace(release.handle, memory.key);
  }
  if (!release.freed || !memory.counted) return;
  if (memory.kind == MemKind::kVmmImported) {
    CountImported(memory, 0, -1, static_cast<int64_t>(memory.size));
  } else {
    UndoFree(release.removed);
  }
}

void Tracker::OnVmmRetain(uint64_t handle, uint64_t address) {
  std::lock_guard<Mutex> lock(vmm_mu_);
  if (const auto h = vmm_handles_.find(handle); h != vmm_handles_.end()) {
    if (auto m = vmm_memory_.find(h->second); m != vmm_memory_.end()) ++m->second.retains;
    return;
  }
  // Released while mapped (or made before attach): the mapping at `address`
  // names its memory, and the retain makes the handle the first reference.
  const uint64_t key = VmmKeyAt(address);
  auto m = vmm_memory_.find(key);
  if (key == 0 || m == vmm_memory_.end()) return;
  m->second.released = false;
  vmm_handles_[handle] = key;
}

uint64_t Tracker::VmmKeyAt(uint64_t address) const {
  auto it = vmm_mappings_.upper_bound(address);
  if (it == vmm_mappings_.begin()) return 0;
  --it;
  return address - it->first < it->second.size ? it->second.key : 0;
}

bool Tracker::ClassifyVmm(uint64_t address, MemKind* kind, int* device) const {
  if (vmm_mapping_count_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<Mutex> lock(vmm_mu_);
  const uint64_t key = VmmKeyAt(address);
  const auto m = vmm_memory_.find(key);
  if (key == 0 || m == vmm_memory_.end()) return false;
  *kind = m->second.kind;
  if (device != nullptr) *device = m->second.device;
  return true;
}

}  // namespace gpuwatch
