// A Session is gpuwatch's whole record of one process: the configuration,
// every table the callbacks write, and the report built from them.
//
// interpose/ holds one Session (agent.h) and reaches every table through it:
// the callbacks (callbacks.cc) and the activity buffers (activity.cc) read
// recording() once per event, so that the child of a fork, which records
// what it does itself, starts on fresh tables with one pointer swap
// (StartChildRecording). Reports are built here (SessionReport), by the
// library and by the benchmarks alike.
//
// Who may call it: interpose/, tests and benchmarks. tools/ reads reports
// and never includes this folder.
#ifndef GPUWATCH_LIBGPUWATCH_SESSION_SESSION_H_
#define GPUWATCH_LIBGPUWATCH_SESSION_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/alloc_functions.h"
#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/analysis/suppressions.h"
#include "libgpuwatch/base/config.h"
#include "libgpuwatch/record/graphs.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/record/lifecycle.h"
#include "libgpuwatch/record/regions.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/report/report.h"
#include "libgpuwatch/session/events.h"
#include "libgpuwatch/session/recording.h"
#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

class Session {
 public:
  // The tables, empty: a stack table when config.depth > 0, the first
  // recording, and an event trace when config.trace_events > 0 and its
  // memory could be reserved (else *warning says so).
  // `phases`: the process's phase table, when ranges may be opened before
  // the session exists (it must outlive the session, and its owner locks it
  // around fork); null: one of its own.
  explicit Session(Config config, std::string* warning = nullptr, PhaseTable* phases = nullptr);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Frees the current recording and the fork parents' it replaced (those
  // stay allocated until then: a thread may still hold one).
  ~Session();

  const Config& config() const { return config_; }
  StackTable* stacks() const { return stacks_.get(); }  // null: no stacks
  GraphTable& graphs() { return graphs_; }
  // Phase names and paths (NVTX ranges, gpuwatch_phase_push); they outlive
  // recordings, so that a thread's open ranges mean the same after fork.
  PhaseTable& phases() { return *phases_; }
  const PhaseTable& phases() const { return *phases_; }
  // GPUWATCH_SUPPRESSIONS as loaded (LoadSuppressions); null: none.
  const Suppressions* suppressions() const { return suppressions_.get(); }
  // GPUWATCH_ALLOC_FN: the helpers every SiteResolver of the process trims.
  const AllocFunctions* alloc_fns() const { return &alloc_fns_; }

  // The tables being written now. One acquire load: a callback calls it
  // once per event and uses the reference it got for that event.
  Recording& recording() const { return *recording_.load(std::memory_order_acquire); }
  // The event API to the tables being written now (events.h): the same one
  // acquire load; the capture path takes it once per event.
  Events events() const { return Events(recording()); }

  // Loads config().suppressions, when set. False (and *error) when the file
  // cannot be used; nothing is suppressed then.
  bool LoadSuppressions(std::string* error);

  // CUPTI's clock read now (`gpu_now_ns`): activity records, stamped on it,
  // go into the trace from then on. Without it copies and kernels are not
  // traced.
  void SetGpuClock(uint64_t gpu_now_ns);

  // The child of a fork reports what it does itself: a fresh recording,
  // paused if the parent's was, whose trace (if any) keeps the parent's
  // clock offset shifted to the child's clock. The stack table and the
  // graphs stay: the stacks are append-only, the graphs' definitions hold.
  // The parent's recording is left as it was (and never freed).
  void StartChildRecording();

  // For pthread_atfork: every table's locks, taken in the prepare handler
  // and released in the parent and the child.
  void LockForFork();
  void UnlockAfterFork();

 private:
  Config config_;
  std::unique_ptr<StackTable> stacks_;
  GraphTable graphs_;
  std::unique_ptr<PhaseTable> own_phases_;  // when not given one
  PhaseTable* phases_;
  std::unique_ptr<Suppressions> suppressions_;
  AllocFunctions alloc_fns_;
  std::atomic<Recording*> recording_;
};

// The facts of the process and the moment that the tables do not hold.
struct ReportRequest {
  ReportContext context;  // trigger, label, process facts, OOM; the rest is filled in
  // The live memory as a callback saw it (Tracker::LiveBySite(), or a
  // Snapshot()); null: the tracker's now (a Snapshot()). A capture by site
  // gives the report no regions section, and its leak sites no oldest_ns
  // or phase (docs/report-format.md).
  const TrackerSnapshot* captured = nullptr;
  // Kept from report to report by the caller (symbolization is the costly
  // part of a report); null: a fresh one, for this report only.
  Symbolizer* symbolizer = nullptr;
  // Kept from report to report by the caller with `symbolizer` (made with
  // it, and replaced with it): which sites read the same, so that a report
  // symbolizes only the sites it lists (SiteResolver::ReleaseFrames, when
  // the report is done). Null: a fresh one, for this report only.
  SiteResolver* sites = nullptr;
};

// One report of a session, in two steps that a benchmark can time apart:
// the constructor copies the tables (snapshots), Build() analyzes them once
// and writes the JSON; the leaked bytes and the stderr summary come from
// the same analysis.
class SessionReport {
 public:
  SessionReport(const Session& session, ReportRequest request);
  ~SessionReport();
  SessionReport(const SessionReport&) = delete;
  SessionReport& operator=(const SessionReport&) = delete;

  // `flush`: the frame table and the trace streamed as they are made
  // (TextFlush); json() is then the rest of the text.
  void Build(const TextFlush* flush = nullptr);
  const std::string& json() const { return json_; }
  // For the exit report: makes room in json() for the teardown time, to be
  // written in place later (OpenTeardownSlot); the slot's offset, or npos.
  size_t OpenTeardownSlot();
  // Device bytes the report counts as leaked (LeakedDeviceBytes).
  uint64_t leaked_device_bytes();
  // The stderr summary; `path` is where the report went ("" when it failed).
  std::string Summary(const std::string& path);
  // "file:line (function)" of a stack, as the report names it.
  std::string LocationOf(uint32_t stack_id) { return sites_->LocationOf(stack_id); }

 private:
  const Session& session_;
  ReportContext context_;
  TrackerSnapshot snapshot_;
  TransfersSnapshot transfers_;
  std::vector<KernelStats> kernels_;
  CudaErrorsSnapshot cuda_errors_;
  TimelineSnapshot timeline_;
  TraceSnapshot trace_;
  PhasesSnapshot phases_;
  RegionsSnapshot regions_;
  std::unique_ptr<SiteResolver> own_sites_;  // when the request gave none
  SiteResolver* sites_;
  ReportAnalysis analysis_;
  std::string json_;
};

// gpuwatch_live_since(): what was allocated after `point` and is still
// live, as JSON: {"device": LEAKS, "host": LEAKS, "window_peak_bytes": N},
// each LEAKS a leaks section of the report (docs/report-format.md) whose
// sites carry their frames, categories and suppression rules; the window
// peak is the device bytes' peak since the newest point. `symbolizer`: kept
// by the caller (null: a fresh one); `pytorch_per_tensor`:
// PytorchAllocatesPerTensor() of the process.
std::string LiveSinceJson(const Session& session, Tracker::Point point, Symbolizer* symbolizer,
                          bool pytorch_per_tensor);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SESSION_SESSION_H_
