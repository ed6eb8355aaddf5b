// The reports a CUDA callback captures (reports.h): at an out-of-memory
// failure and when a context with live memory is destroyed. Only what that
// moment knows is taken inside the call; the background thread writes the
// report. And what PyTorch adds to an out-of-memory report afterwards
// (gpuwatch_torch_oom()).
#include <dlfcn.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "gpuwatch/gpuwatch.h"
#include "interpose/agent/reports.h"
#include "interpose/agent/torch_blocks.h"
#include "libgpuwatch/base/clock.h"

namespace gpuwatch {

namespace {

// The out-of-memory report that covers this thread's last allocation failure
// (its number, 1 for ".oom-1"): the one it wrote, or, when reports were
// rate-limited, the newest one, written at most a second earlier (PyTorch
// retries once after emptying its cache); 0 when none covers it (ten were
// written already).
thread_local int t_oom_report __attribute__((tls_model("initial-exec"))) = 0;

// What the driver in the process says of the memory at an out-of-memory
// failure: the device's free and total memory, and the graph memory it keeps
// for reuse that no graph holds (freed by graphs, returned to the device only
// by cudaDeviceGraphMemTrim). Zeros where it cannot tell.
// Stays in the failing call's callback, on its thread, by design:
// cuMemGetInfo answers for the calling thread's current context (the
// background thread has none, or another device's), and the free memory is
// the moment's (a framework frees its caches and retries right after).
void DeviceMemoryInfo(Agent& agent, OomInfo* oom) {
  ResolveDriverQueries(agent);  // when the background thread has not yet
  size_t f = 0;
  size_t t = 0;
  if (const MemGetInfoFn fn = agent.driver.mem_get_info.load(); fn != nullptr && fn(&f, &t) == 0) {
    oom->device_free = f;
    oom->device_total = t;
  }
  cuuint64_t reserved = 0;
  cuuint64_t used = 0;
  const GraphMemAttributeFn attr = agent.driver.graph_mem_attribute.load();
  if (attr != nullptr &&
      attr(oom->device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) == 0 &&
      attr(oom->device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) == 0 && reserved > used) {
    oom->graph_pool_idle = reserved - used;
  }
}

}  // namespace

// An allocation failed for lack of memory. What only this moment knows is
// captured before the error reaches the caller: the live memory by site (the
// tracker's per-site counters, Tracker::LiveBySite: no shard lock, a cost
// that grows with the sites, not the allocations), the failed request and the
// device's free memory; the background thread writes the report. Frameworks retry after freeing
// caches, so reports are rate-limited (one per second, ten in all); every failure is counted.
void OnOutOfMemory(const OomEvent& event) {
  Agent& agent = GetAgent();
  agent.reports.ooms.fetch_add(1);
  agent.events().OutOfMemory(event.device, event.size, event.kind, event.stack_id);
  constexpr uint64_t kMinGapNs = 1000000000ULL;
  constexpr int kMaxReports = 10;
  const uint64_t now = MonotonicNs();
  uint64_t last = agent.reports.last_oom_report_ns.load();
  if ((last != 0 && now - last < kMinGapNs) || agent.reports.oom_reports.load() >= kMaxReports ||
      !agent.reports.last_oom_report_ns.compare_exchange_strong(last, now)) {
    // Rate-limited: the newest report (written less than a second ago)
    // covers this failure, unless the ten were written.
    const int newest = agent.reports.oom_reports.load();
    t_oom_report = newest >= kMaxReports ? 0 : newest;
    return;
  }
  const int n = agent.reports.oom_reports.fetch_add(1) + 1;
  PendingReport report;
  report.path = agent.attach.output_path + ".oom-" + std::to_string(n);
  report.trigger = "oom";
  report.has_oom = true;
  report.oom.size = event.size;
  report.oom.kind = event.kind;
  report.oom.api = event.api;
  report.oom.error = event.error;
  report.oom.stack_id = event.stack_id;
  report.oom.device = event.device;
  DeviceMemoryInfo(agent, &report.oom);
  report.snapshot = agent.events().LiveBySite();
  {
    std::lock_guard<Mutex> lock(agent.reports.pending_mu);
    agent.reports.last_oom = report;
    agent.reports.last_oom_n = n;
  }
  t_oom_report = n;
  QueueReport(agent, std::move(report));
}

namespace {

// gpuwatch_torch_oom(): PyTorch's counters added to the report that covers
// this thread's last failure, which is written again (queued: the background
// thread may not have written it the first time yet; both writes are whole).
int AddTorchToOomReport(int device, uint64_t allocated, uint64_t reserved) {
  Agent& agent = GetAgent();
  if (!agent.active.load() || t_oom_report == 0) return -1;
  // PyTorch's observer handed its blocks over just before its counters: the
  // report written again keeps those, whenever the background thread gets to it.
  std::shared_ptr<const ReportTorchBlocks> blocks = LatestTorchBlocks();
  PendingReport again;
  {
    std::lock_guard<Mutex> lock(agent.reports.pending_mu);
    PendingReport& last = agent.reports.last_oom;
    if (agent.reports.last_oom_n != t_oom_report || last.oom.device != device) return -1;
    last.oom.has_torch = true;
    last.oom.torch_allocated = allocated;
    last.oom.torch_reserved = reserved;
    last.oom.torch_blocks = blocks;
    again = last;
  }
  QueueReport(agent, std::move(again));
  return 0;
}

}  // namespace

}  // namespace gpuwatch

int gpuwatch_torch_oom(int device, uint64_t allocated, uint64_t reserved) {
  try {
    return gpuwatch::AddTorchToOomReport(device, allocated, reserved);
  } catch (const std::exception&) {  // out of memory: the caller gets -1, not an exception
    return -1;
  }
}
