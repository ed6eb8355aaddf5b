// CUDA IPC mappings in the tracker (tracker.h): another process's memory,
// live at the site of the open that mapped it, and the references the driver
// counts per mapping. ipc_mu_ is taken before a shard's lock.
#include <mutex>

#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/tracker_shard.h"

namespace gpuwatch {

using namespace tracker_internal;  // NOLINT(google-build-using-namespace): the tracker's own

bool Tracker::IsLiveAs(uint64_t address, MemKind kind) const {
  Shard& shard = ShardFor(address);
  std::lock_guard lock(shard.mu);
  const LiveRecord* record = shard.live.Find(address);
  return record != nullptr && AllocOf(address, *record).kind == kind;
}

void Tracker::OnIpcOpen(const AllocEvent& event) {
  if (event.address == 0) return;
  std::lock_guard<Mutex> lock(ipc_mu_);
  uint32_t& refs = ipc_refs_[event.address];
  // A mapping whose end gpuwatch did not see (its context destroyed) is
  // mapped anew; a live one gets a reference.
  if (refs > 0 && IsLiveAs(event.address, MemKind::kIpcImported)) {
    ++refs;
    return;
  }
  refs = 1;
  AllocEvent e = event;
  e.kind = MemKind::kIpcImported;
  OnAlloc(e);  // nothing while paused
}

bool Tracker::BeginIpcClose(uint64_t address, IpcClose* close) {
  *close = IpcClose{};
  close->address = address;
  std::lock_guard<Mutex> lock(ipc_mu_);
  const auto it = ipc_refs_.find(address);
  if (it == ipc_refs_.end()) return false;
  if (--it->second > 0) return true;
  ipc_refs_.erase(it);
  close->unmapped = BeginFree(address, &close->removed);
  return true;
}

void Tracker::UndoIpcClose(const IpcClose& close) {
  std::lock_guard<Mutex> lock(ipc_mu_);
  ++ipc_refs_[close.address];
  if (close.unmapped) UndoFree(close.removed);
}

}  // namespace gpuwatch
