// The tables one process writes while it runs: a Recording. The Session
// (session.h) holds the current one behind an atomic pointer that a fork
// child swaps; the capture path writes it through the event API
// (events.h), never by naming a table.
#ifndef GPUWATCH_LIBGPUWATCH_SESSION_RECORDING_H_
#define GPUWATCH_LIBGPUWATCH_SESSION_RECORDING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/base/config.h"
#include "libgpuwatch/record/cuda_errors.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/record/lifecycle.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/regions.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"

namespace gpuwatch {

// Distinct stacks (and per-site counters) at most.
inline constexpr uint32_t kMaxStacks = 1u << 20;
// The stack table's arena at most.
inline constexpr size_t kMaxStackBytes = size_t{256} << 20;

// What one process recorded since attach, or since the fork that made it.
struct Recording {  // NOLINT(clang-analyzer-optin.performance.Padding): one at a time
  // `trace_events` 0: no event trace.
  Recording(const Config& config, size_t trace_events, const PhaseTable* phase_table);

  Tracker tracker;
  Timeline timeline;
  Transfers transfers;
  KernelTable kernels;
  // Failed calls, sticky errors, kernels since each context's last sync.
  CudaErrors errors;
  Lifecycle lifecycle;
  PhaseStats phases;             // what happened in each phase (the session's PhaseTable)
  RegionTable regions;           // pool regions declared through NVTX's memory extension
  std::unique_ptr<Trace> trace;  // GPUWATCH_TRACE_EVENTS; null: no event trace
  // Activity records (copies, kernels) go into the trace: CUPTI's clock
  // offset from the tracker's is known (Session::SetGpuClock).
  bool trace_gpu = false;
  // The fork parent's recording this one replaced; freed with the Session.
  std::unique_ptr<Recording> parent;

  // Calls `fn` on each table with a lock that a fork takes, in the order the
  // locks are taken (Session::LockForFork).
  template <typename Fn>
  void ForEachForkLocked(Fn&& fn) {
    fn(tracker), fn(timeline), fn(transfers), fn(kernels), fn(errors), fn(regions);
  }
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SESSION_RECORDING_H_
