// gpuwatch's agent in this process: what interpose/ keeps besides the
// Session (libgpuwatch/session/session.h, the configuration, the tables and
// the reports built from them): CUPTI, the pipes, the report lock, the
// background thread's state and the reports callbacks queued. Shared by the
// files of interpose/: attach.cc (entry points, the C API), reports.cc
// (every report and when it is written), background.cc (gpuwatch's own
// thread) and fork.cc. One Agent, made at attach and never destroyed (exit
// order cannot bite).
//
// Three parts, each with its own rule for threads and locks: what attach
// decided (Attachment: immutable once `active` is set), the report scheduler
// (ReportScheduler: report_mu, the queue, the exit report's state, the
// counters) and the background thread (BackgroundThread: its mutex, pipe
// and scan). A fork child resets each with one call (fork.cc).
//
// Threads and locks: the application's threads enter through CUPTI callbacks
// (callbacks.cc, which take only the tables' own locks) and the C API;
// reports take report_mu and then the tables' locks; the background thread
// holds background.mu except in poll(). No report is built inside a CUPTI
// callback: a callback captures what only its moment knows and queues it
// (reports.pending).
#ifndef GPUWATCH_INTERPOSE_AGENT_AGENT_H_
#define GPUWATCH_INTERPOSE_AGENT_AGENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/current_session.h"
#include "interpose/cupti/cupti_loader.h"
#include "libgpuwatch/base/config.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/report/report.h"
#include "libgpuwatch/session/session.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

// A report captured inside a callback (an out-of-memory failure, a context
// about to be destroyed) and written later by the background thread, or at
// the latest before the exit report.
struct PendingReport {
  std::string path;
  const char* trigger = "";
  bool has_oom = false;
  OomInfo oom;
  TrackerSnapshot snapshot;  // the live memory at that moment, by site (Tracker::LiveBySite)
};

using MemGetInfoFn = int (*)(size_t* free_bytes, size_t* total_bytes);
using MemGetAddressRangeFn = int (*)(unsigned long long* base, size_t* size,
                                     unsigned long long address);
using GraphMemAttributeFn = int (*)(int device, int attribute, void* value);

// What gpuwatch asks the driver in the process (an out-of-memory report's
// free memory and graph pool; the size of memory opened through CUDA IPC),
// resolved after the first CUDA call (ResolveDriverQueries; the references
// are kept: the functions stay valid).
struct DriverQueries {
  std::atomic<bool> resolved{false};
  std::atomic<MemGetInfoFn> mem_get_info{nullptr};                   // cuMemGetInfo_v2
  std::atomic<GraphMemAttributeFn> graph_mem_attribute{nullptr};     // cuDeviceGetGraphMemAttribute
  std::atomic<MemGetAddressRangeFn> mem_get_address_range{nullptr};  // cuMemGetAddressRange_v2
};

// What attach decided (Attach, attach.cc): set before `active` is set and
// read-only afterwards by every thread, without a lock. The one exception is
// the child of a fork, which changes output_path and fork_child in its fork
// handler (RestartInChild), while no other thread of it exists yet.
struct Attachment {  // NOLINT(clang-analyzer-optin.performance.Padding): one, leaked
  CuptiApi cupti;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool activity = false;    // CUPTI activity records are enabled
  std::string output_path;  // absolute, expanded at attach time
  std::string attach_mode;
  std::vector<std::string> command;
  std::string attach_dir;   // working directory at attach
  bool fork_child = false;  // forked after attach

  // The child of a fork: its own report path, and the fact that it is one.
  void ResetInChild(std::string child_output_path);
};

// When each report is written (reports.cc). report_mu: one report at a time,
// taken by the thread that writes one (the background thread, the exit
// handler, a C API call, a checkpoint) before the tables' locks; the fields
// marked "guarded by report_mu" are read and written under it. pending_mu
// guards `pending` alone (a callback queues under it, holding no other
// gpuwatch lock). The counters and flags are atomics: callbacks read and
// bump them without a lock.
struct ReportScheduler {  // NOLINT(clang-analyzer-optin.performance.Padding): one, leaked
  // When CUPTI was found detached under gpuwatch (tracker clock), 0 while not.
  std::atomic<uint64_t> detached_ns{0};
  std::atomic<int> snapshots{0};
  std::atomic<uint64_t> ooms{0};
  std::atomic<int> context_reports{0};
  std::atomic<int> oom_reports{0};
  std::atomic<uint64_t> last_oom_report_ns{0};
  Mutex pending_mu;  // guards pending, last_oom and last_oom_n
  std::vector<PendingReport> pending;
  // The newest out-of-memory report as it was queued, and its number, kept
  // for PyTorch's counters (gpuwatch_torch_oom(), captured_reports.cc).
  PendingReport last_oom;
  int last_oom_n = 0;
  Mutex report_mu;                   // one report written at a time
  bool exit_report_written = false;  // guarded by report_mu
  // Kept from report to report (checkpoints, exit), so that a pc is
  // symbolized once per process; replaced when a module was unloaded, since
  // its cached pcs may then name another. Guarded by report_mu.
  std::unique_ptr<Symbolizer> symbolizer;
  unsigned long long symbolizer_unloads = 0;
  // With it, the reports' sites (which read the same), so that a checkpoint
  // symbolizes only the sites it lists; made with `symbolizer` and dropped
  // when it is replaced. Guarded by report_mu.
  std::unique_ptr<SiteResolver> sites;
  bool warned_low_memory = false;  // guarded by report_mu (WriteReportOrThrow)
  std::string exit_report_path;    // set once the exit report is on disk
  // Where in it the teardown time goes (OpenTeardownSlot); set with the path.
  size_t exit_teardown_slot = std::string::npos;
  std::atomic<uint64_t> exit_report_done_ns{0};
  std::atomic<bool> exiting{false};  // the exit report has begun
  std::atomic<bool> teardown_handler{false};
  // A signal report that the process dies right after is on disk (or being
  // written): no checkpoint may replace it. Guarded by report_mu.
  bool final_report = false;
  // Device bytes the exit report counted as leaked (GPUWATCH_EXITCODE).
  std::atomic<uint64_t> exit_leaked_bytes{0};
  std::atomic<bool> exit_leak_known{false};

  // The child of a fork starts with no report written, none queued (the
  // parent writes those) and its counters at 0. Every lock is free by then.
  void ResetInChild();
};

// gpuwatch's own thread (background.cc). It holds mu except in poll() and
// while it writes a fatal signal's report, and `starting` is set from
// pthread_create until the thread first takes mu (a thread allocates as it
// starts): see LockAgent (fork.cc). Other threads only write a byte to
// request_pipe and read `running`.
struct BackgroundThread {
  // Requests to the thread, one byte each: 's' a snapshot (the snapshot
  // signal's handler), 'r' reports a callback captured (reports.h), 'f' the
  // first CUDA call's work (FirstCallWork), anything else a fatal signal's
  // report (fatal_signals.h). One pipe for all: gpuwatch keeps as few of the
  // host's descriptors as it can.
  int request_pipe[2] = {-1, -1};
  std::mutex mu;
  std::condition_variable started;
  bool starting = false;  // guarded by mu
  // The thread was started (and reads request_pipe): the first CUDA call
  // leaves it the work that need not happen in the call (first_call_work,
  // 'f' on the pipe).
  std::atomic<bool> running{false};
  std::atomic<bool> first_call_work{false};
  // The thread's per-site scan (timeline samples, the live view's history),
  // reused from second to second; only the thread touches it (SamplePeriodic
  // and LiveTick each scan into it when due).
  std::vector<std::pair<uint32_t, uint64_t>> site_scan;

  // The child of a fork: no thread (threads do not survive fork()), a pipe
  // of its own in place of the parent's, no first-call work done.
  void ResetInChild();
};

struct Agent {  // NOLINT(clang-analyzer-optin.performance.Padding): one, leaked
  // The Session's (current_session.h), made at attach once CUPTI took the
  // subscription. Only once `active` is set.
  const Config& config() const { return CurrentSession()->config(); }
  // The event API to the recording of the moment (events.h): what the agent
  // records and reads of the tables.
  Events events() const { return CurrentSession()->events(); }

  std::atomic<bool> active{false};
  Attachment attach;
  ReportScheduler reports;
  BackgroundThread background;
  DriverQueries driver;
  // gpuwatch_mark()'s scan, reused from mark to mark (a loop marks every
  // step; a fresh scan of 10,000 sites is 160 KB of new pages each time).
  // Taken with try_lock: a mark that finds it busy (another thread marking,
  // or a fork child of a process that was) scans into a fresh one.
  std::mutex mark_scan_mu;
  std::vector<std::pair<uint32_t, uint64_t>> mark_scan;  // guarded by mark_scan_mu
};

Agent& GetAgent();

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_AGENT_H_
