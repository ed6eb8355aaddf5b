// The event API: the one way the capture path (interpose/: the CUPTI
// callbacks, the activity buffers, NVTX's memory extension) records what the
// process did. One function per event; each routes it to the tables of the
// Recording it was taken from (recording.h), so that interpose never names a
// table (scripts/check-layers.py fails when it does).
//
// Use: `Events events = session.events();` once per event (one acquire
// load, Session::events), then the calls that event needs. A fork child
// swaps the Recording (Session::StartChildRecording): an Events taken before
// the swap still writes the parent's tables, which stay allocated.
//
// Cost: every function on the callback path is inline and does what the
// direct table call did (bench/overhead.py --only callgrind counts it); the
// rare ones (context destroyed, marks) are in events.cc.
// The agent (interpose/agent/) records its own events (marks, pauses,
// samples) and reads the figures it needs between reports here too.
// The rules of interpose/callbacks/callbacks.h hold for each: no allocation
// and no blocking lock beyond what the event's table needs.
#ifndef GPUWATCH_LIBGPUWATCH_SESSION_EVENTS_H_
#define GPUWATCH_LIBGPUWATCH_SESSION_EVENTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/record/lifecycle.h"
#include "libgpuwatch/record/regions.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/session/recording.h"

namespace gpuwatch {

class ActivityEvents;

class Events {
 public:
  explicit Events(Recording& recording) : r_(&recording) {}

  // --- State the capture path asks before it records ------------------------
  // False while paused (gpuwatch_pause): allocations, copies and launches
  // are not recorded, and no stack is captured for them.
  bool enabled() const { return !r_->tracker.paused(); }
  // The tracker's clock.
  uint64_t NowNs() const { return r_->tracker.NowNs(); }
  // What gpuwatch's tables know of an address (Tracker::Classify,
  // ClassifyHost): a copy's direction and host memory kind where the call
  // does not say.
  bool Classify(uint64_t address, MemKind* kind, int* device) const {
    return r_->tracker.Classify(address, kind, device);
  }
  bool ClassifyHost(uint64_t address, MemKind* kind) const {
    return r_->tracker.ClassifyHost(address, kind);
  }

  // --- Allocations and frees --------------------------------------------------
  void Allocated(const AllocEvent& e) { r_->tracker.OnAlloc(e); }
  // A free whose call is known to have succeeded (an EXIT without ENTER, a
  // graph's free node).
  void Freed(uint64_t address) { r_->tracker.OnFree(address); }
  // A free in three steps: begun at ENTER (before the driver can hand the
  // address to another thread), undone when the call failed, done when it
  // succeeded (counted for its site with the call's time, in Ticks()).
  bool FreeBegun(uint64_t address, LiveAlloc* removed) {
    return r_->tracker.BeginFree(address, removed);
  }
  void FreeUndone(const LiveAlloc& removed) { r_->tracker.UndoFree(removed); }
  void FreeDone(const LiveAlloc& removed, uint64_t call_ticks) {
    r_->tracker.OnFreeDone(removed, call_ticks);
  }
  // A free (or IPC close) of an address gpuwatch never saw allocated.
  void UnknownFree() { r_->tracker.CountUnknownFree(); }

  // --- Virtual memory management and IPC -------------------------------------
  void VmmCreated(uint64_t handle, const AllocEvent& e) { r_->tracker.OnVmmCreate(handle, e); }
  void VmmImported(uint64_t handle) { r_->tracker.OnVmmImport(handle); }
  // cuMemRetainAllocationHandle: one more reference to a mapped handle
  // (its release then drops the reference, not the memory).
  void VmmRetained(uint64_t handle, uint64_t address) { r_->tracker.OnVmmRetain(handle, address); }
  // False: the handle is unknown (made before attach).
  bool VmmMapped(uint64_t handle, uint64_t address, uint64_t size) {
    return r_->tracker.OnVmmMap(handle, address, size);
  }
  void VmmUnmapped(uint64_t address, uint64_t size) { r_->tracker.OnVmmUnmap(address, size); }
  bool VmmReleaseBegun(uint64_t handle, Tracker::VmmRelease* release) {
    return r_->tracker.BeginVmmRelease(handle, release);
  }
  void VmmReleaseUndone(const Tracker::VmmRelease& release) { r_->tracker.UndoVmmRelease(release); }
  void IpcOpened(const AllocEvent& e) { r_->tracker.OnIpcOpen(e); }
  bool IpcCloseBegun(uint64_t address, Tracker::IpcClose* close) {
    return r_->tracker.BeginIpcClose(address, close);
  }
  void IpcCloseUndone(const Tracker::IpcClose& close) { r_->tracker.UndoIpcClose(close); }

  // --- Copies and launches -----------------------------------------------------
  // A copy that happened (the counters by kind and phase).
  void Copied(const CopyEvent& e) { r_->tracker.OnCopy(e); }
  // A copy call, for the transfers table: with `activity` its record joins
  // it later (registered at ENTER), else it is counted as it is.
  void CopyCalled(const CopyCall& call, bool activity) { r_->transfers.OnCopyCall(call, activity); }
  void CopyFailed(uint32_t correlation) { r_->transfers.OnCopyFailed(correlation); }
  // A graph memcpy node's copy at a launch of its instance, and the launch
  // that failed.
  void GraphCopyCalled(uint32_t correlation, uint64_t node, const CopyCall& call, bool activity) {
    r_->transfers.OnGraphCopy(correlation, node, call, activity);
  }
  void GraphLaunchFailed(uint32_t correlation, uint64_t node) {
    r_->transfers.OnGraphLaunchFailed(correlation, node);
  }
  // A kernel launched, counted under `name` (CUPTI's symbolName, or a
  // graph kernel node's), while enabled() (the caller asks).
  // Returns the kernel's name id (KernelTable).
  uint32_t Launched(uint32_t phase, const char* name) {
    r_->tracker.OnLaunch(phase);
    if (!launched()) [[unlikely]]
      r_->lifecycle.FirstLaunch(r_->tracker.NowNs());
    return r_->kernels.OnLaunch(name);
  }
  // A launch (not a graph's) kept in its context's ring of kernels since the
  // last successful synchronization; its kernel's first launch site.
  // `ticks`: when (base/clock.h's Ticks()).
  void KernelQueued(uint32_t context_uid, uint32_t name_id, uint64_t stream, uint64_t ticks) {
    r_->errors.OnLaunch(context_uid, name_id, stream, ticks);
  }
  bool KernelSiteNeeded(uint32_t name_id) const { return r_->kernels.NeedsSite(name_id); }
  void KernelSiteSeen(uint32_t name_id, uint32_t stack_id) {
    r_->kernels.SetSite(name_id, stack_id);
  }
  // The launch path's common case, while enabled(): a launch (not a
  // graph's) after the first, of a kernel launched before with its site
  // (found at its name's first probe), on the first context that launched.
  // Recorded as Launched and KernelQueued would, without a call, a stack or
  // a lock; false, having recorded nothing, in any other case (the caller
  // then takes their way). A few loads, two relaxed additions and the
  // ring's stores (docs/BENCHMARKS.md, "Issue 33, stop 46").
  bool KernelLaunchedAgain(uint32_t phase, const char* name, uint32_t context_uid, uint64_t stream,
                           uint64_t ticks) {
    if (!launched()) return false;
    const uint32_t id = r_->kernels.LaunchedBefore(name);
    if (id == 0 || !r_->errors.FirstRingIs(context_uid)) return false;
    r_->kernels.Count(id);
    r_->errors.OnLaunchInFirstRing(id, stream, ticks);
    r_->tracker.OnLaunch(phase);  // last: a phase's count is a call
    return true;
  }
  // Whether a synchronization of the context may wait for kernels queued
  // since its last successful one (CudaErrors::KernelsQueued).
  bool KernelsQueued(uint32_t context_uid) const { return r_->errors.KernelsQueued(context_uid); }
  // A synchronization (a sync call, a synchronous copy) that succeeded.
  void Synced(uint32_t context_uid) { r_->errors.OnSynced(context_uid); }

  // --- Errors ------------------------------------------------------------------
  // A call returned an error (not success): rare, events.cc. Returns
  // whether it kept something new, which then needs e's stack
  // (CallFailureStack; CudaErrors::OnError).
  bool CallFailed(const CudaErrorEvent& e);
  void CallFailureStack(const CudaErrorEvent& e, uint32_t stack_id) {
    r_->errors.SetFirstStack(e, stack_id);
  }
  // A context had a sticky error: the run failed.
  bool RunFailed() const { return r_->errors.failed(); }

  // --- Lifecycle -------------------------------------------------------------
  // The first CUDA call, at most once: true when this one was it.
  // first_call_seen(): one was recorded already (the test every call makes).
  bool first_call_seen() const {
    return r_->lifecycle.first_call_ns.load(std::memory_order_relaxed) != 0;
  }
  bool FirstCall() { return !first_call_seen() && r_->lifecycle.FirstCall(r_->tracker.NowNs()); }
  // A kernel launch was recorded (the lifecycle's cold start ends at the first).
  bool launched() const {
    return r_->lifecycle.first_launch_ns.load(std::memory_order_relaxed) != 0;
  }
  // A thread blocked in a call for `ns`.
  void Blocked(SyncKind kind, uint64_t ns) { r_->lifecycle.Blocked(kind, ns); }
  // A context made on `device` (rare).
  void ContextCreated(int32_t device);
  // A context destroyed on `device`: its memory (what the driver frees with
  // a context) leaves the live table, unless another context is alive on the
  // device (the live table does not say which context made an allocation;
  // that is counted).
  void ContextDestroyed(int32_t device);

  // --- Activity records -------------------------------------------------------
  // The activity records of one buffer (ActivityEvents, below).
  ActivityEvents ActivityBuffer() const;

  // --- Pool regions (NVTX's memory extension) ---------------------------------
  // The tracker's clock in ms, as regions keep it.
  uint32_t NowMs() const;
  void HeapRegistered(const PoolHeap& heap) { r_->regions.RegisterHeap(heap); }
  void HeapUnregistered(uint64_t handle) { r_->regions.UnregisterHeap(handle); }
  void HeapReset(uint64_t handle) { r_->regions.ResetHeap(handle); }
  void RegionRegistered(const PoolRegion& region) { r_->regions.Register(region); }
  void RegionResized(uint64_t address, uint64_t size) { r_->regions.Resize(address, size); }
  void RegionUnregistered(uint64_t address) { r_->regions.Unregister(address); }
  // A chained NVTX tool's handle for a region (RegionTable::RememberHandle),
  // and a region unregistered by such a handle.
  void RegionHandleMade(uint64_t handle, uint64_t address) {
    r_->regions.RememberHandle(handle, address);
  }
  void RegionUnregisteredByHandle(uint64_t handle) {
    r_->regions.Unregister(r_->regions.TakeHandle(handle));
  }

  // --- What the agent records (API calls, the background thread, hooks) ------
  // gpuwatch_pause() / gpuwatch_resume().
  void Paused(bool paused) { r_->tracker.SetPaused(paused); }
  // Attached inside the first call (injection): it started before the attach.
  void FirstCallUnobserved();
  // gpuwatch_mark(): a timeline mark of the device bytes each site holds
  // now (`*scan`: a vector the caller may reuse), and a trace event.
  // Returns its 1-based ordinal.
  uint64_t Marked(const char* label, std::vector<std::pair<uint32_t, uint64_t>>* scan);
  // The background thread's periodic timeline sample, likewise.
  void Sampled(std::vector<std::pair<uint32_t, uint64_t>>* scan);
  // An allocation failed for lack of memory: into the trace, if any.
  void OutOfMemory(int32_t device, uint64_t size, MemKind kind, uint32_t stack_id);
  void ExitStatus(int status) { r_->lifecycle.exit_status.store(status); }
  // Copies whose activity records will not come are counted from their
  // calls alone (before the exit report, after CUPTI detached).
  void CopiesSettled() { r_->transfers.Settle(); }

  // --- What the agent reads between reports (the live view, checkpoints,
  // the hooks that capture memory for a report, the public API) --------------
  bool traced() const { return r_->trace != nullptr; }
  uint64_t EventCount() const { return r_->tracker.EventCount(); }
  uint64_t DeviceCurrentBytes() const { return r_->tracker.DeviceCurrentBytes(); }
  uint64_t DevicePeakBytes() const { return r_->tracker.DevicePeakBytes(); }
  Tracker::LiveFigures Live(uint32_t kinds, int device) const {
    return r_->tracker.Live(kinds, device);
  }
  Tracker::Point NewPoint() { return r_->tracker.NewPoint(); }
  // The live memory by site, from the per-site counters (Tracker::LiveBySite).
  TrackerSnapshot LiveBySite() const { return r_->tracker.LiveBySite(); }
  TrackerSnapshot Totals() const { return r_->tracker.Totals(); }
  TransfersSnapshot TransferTotals() const { return r_->transfers.Totals(); }
  void LiveDeviceBytesBySite(std::vector<std::pair<uint32_t, uint64_t>>* out) const {
    r_->tracker.LiveDeviceBytesBySite(out);
  }
  std::vector<GrowthSample> LastMarks() const { return r_->timeline.LastMarks(); }

 private:
  Recording* r_;
};

// The activity records of one buffer (Events::ActivityBuffer): taken once per
// buffer, so that a fork child's records go to its own tables and the trace
// is looked up once, not per record.
class ActivityEvents {
 public:
  explicit ActivityEvents(Recording& recording)
      : r_(&recording), trace_(recording.trace_gpu ? recording.trace.get() : nullptr) {}

  // A timed copy, joined to its call; into the trace too when the trace
  // takes activity (Recording::trace_gpu). Times on CUPTI's clock.
  void CopyRecorded(const CopyRecord& c, uint64_t gpu_start, uint64_t gpu_end, int device,
                    uint64_t stream) {
    const uint32_t site = r_->transfers.OnCopyRecord(c);
    if (trace_ == nullptr) return;
    trace_->Copy(trace_->FromGpuClock(gpu_start), trace_->FromGpuClock(gpu_end), device, stream,
                 c.bytes, c.kind, c.host, site);
  }
  void KernelRecorded(const char* name, uint64_t gpu_start, uint64_t gpu_end, int device,
                      uint64_t stream) {
    r_->kernels.OnKernelRecord(name, gpu_start, gpu_end);
    if (trace_ == nullptr) return;
    trace_->Kernel(trace_->FromGpuClock(gpu_start), trace_->FromGpuClock(gpu_end), device, stream,
                   trace_->InternName(name));
  }

 private:
  Recording* r_;
  Trace* trace_;  // null: the trace takes no activity
};

inline ActivityEvents Events::ActivityBuffer() const { return ActivityEvents(*r_); }

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SESSION_EVENTS_H_
