#include "interpose/agent/reports.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "interpose/agent/device_identity.h"
#include "interpose/agent/fatal_signals.h"
#include "interpose/agent/live.h"
#include "interpose/agent/torch_blocks.h"
#include "interpose/callbacks/activity.h"
#include "interpose/callbacks/guard.h"
#include "interpose/callbacks/not_recording.h"
#include "interpose/cupti/cupti_mux.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/memory_reserve.h"
#include "libgpuwatch/base/own_stack.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch {

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void LogReport(const Agent& agent, const char* trigger, const std::string& path) {
  AppendRunLog(agent.config().run_log, trigger, path);
}

namespace {

constexpr const char* kDetachedWhy =
    "CUPTI was detached from gpuwatch (another CUPTI client called cuptiFinalize or "
    "unsubscribed it): nothing after that was recorded";

ReportContext MakeContext(const Agent& agent, const char* trigger, const char* label) {
  ReportContext context;
  context.trigger = trigger;
  context.label = label != nullptr ? label : "";
  context.pid = getpid();
  context.host = HostName();
  context.rank = RankFromEnvironment([](const char* n) { return std::getenv(n); });  // NOLINT
  context.command = agent.attach.command;
  context.attach_mode = agent.attach.attach_mode;
  context.cupti_path = agent.attach.cupti.path;
  // Read now, not at attach: PyTorch reads these when it first allocates.
  context.pytorch_allocator =
      PytorchAllocatorMode([](const char* n) { return std::getenv(n); });  // NOLINT
  context.torch_blocks = LatestTorchBlocks();
  context.device_identity = PublishedDeviceIdentities();  // never the driver here
  if (const uint64_t at = agent.reports.detached_ns.load(); at != 0) {
    context.recording_stopped = kDetachedWhy;
    context.recording_stopped_ns = at;
  }
  return context;
}

int CountUnloads(dl_phdr_info* info, size_t /*size*/, void* data) {
  *static_cast<unsigned long long*>(data) = info->dlpi_subs;
  return 1;  // every entry carries the same count
}

}  // namespace

bool NoticeDetach(Agent& agent) {
  if (agent.reports.detached_ns.load() != 0) return true;
  if (!agent.active.load() || !mux::SelfDetached()) return false;
  uint64_t expected = 0;
  if (!agent.reports.detached_ns.compare_exchange_strong(expected, agent.events().NowNs()))
    return true;
  const double at = static_cast<double>(agent.reports.detached_ns.load()) / 1e9;
  char why[256];
  std::snprintf(why, sizeof(why), "%s (found %.1f s after attach)", kDetachedWhy, at);
  Warn("%s; the reports say so, and no gate passes them", why);
  MarkNotRecording(why, agent.config().run_log);
  return true;
}

// Free memory below which a report does not ask libdw for file:line.
constexpr size_t kLibdwHeadroomBytes = size_t{64} << 20;

Symbolizer* SharedSymbolizer(Agent& agent) {
  unsigned long long unloads = 0;
  dl_iterate_phdr(&CountUnloads, &unloads);
  if (agent.reports.symbolizer == nullptr || unloads != agent.reports.symbolizer_unloads) {
    agent.reports.sites.reset();  // made with the old one
    agent.reports.symbolizer = std::make_unique<Symbolizer>();
    agent.reports.symbolizer_unloads = unloads;
  }
  return agent.reports.symbolizer.get();
}

SiteResolver* SharedSites(Agent& agent) {
  const StackTable* stacks = CurrentSession()->stacks();
  if (stacks == nullptr) return nullptr;
  Symbolizer* symbolizer = SharedSymbolizer(agent);
  if (agent.reports.sites == nullptr) {
    agent.reports.sites =
        std::make_unique<SiteResolver>(stacks, symbolizer, CurrentSession()->alloc_fns());
  }
  return agent.reports.sites.get();
}

namespace {

// A report could not be written: one line, or, with `failure`, the reason
// there for the caller to say.
void Failed(const char* trigger, const std::string& why, std::string* failure) {
  if (failure != nullptr) {
    *failure = why;
  } else {
    Warn("could not write the %s report: %s", trigger, why.c_str());
  }
}

// What a report hands to its file at a time while its trace is made.
constexpr size_t kReportChunkBytes = size_t{64} << 10;

// Writes one report; the caller holds report_mu. With `summary`, also prints
// the short summary on stderr. `leaked_device_bytes`, when given, receives
// what the report counts as leaked (LeakedDeviceBytes). `captured`: the live
// memory as a callback saw it (else the tracker's now).
bool WriteReportOrThrow(Agent& agent, const std::string& path, const char* trigger,
                        const char* label, const OomInfo* oom, bool summary,
                        uint64_t* leaked_device_bytes, const TrackerSnapshot* captured,
                        std::string* failure, CheckpointText* kept) {
  NoticeDetach(agent);
  ReportRequest request;
  request.context = MakeContext(agent, trigger, label);
  request.context.oom = oom;
  if (oom != nullptr && oom->torch_blocks != nullptr)
    request.context.torch_blocks = oom->torch_blocks;
  request.context.oom_count = agent.reports.ooms.load();
  request.context.kept = kept;
  request.captured = captured;
  // One look at the symbolizer: a library unloaded between two looks would
  // replace it, and the first pointer with it.
  request.sites = SharedSites(agent);
  request.symbolizer = request.sites != nullptr ? agent.reports.symbolizer.get() : nullptr;
  if (request.symbolizer != nullptr) {
    // libdw ends the process when it runs out of memory: near the host's
    // limit, this report gets names and modules without file:line.
    const bool room = CanAllocate(kLibdwHeadroomBytes);
    if (!room && !std::exchange(agent.reports.warned_low_memory, true)) {
      Warn(
          "the process is close to its memory limit: reports show functions and modules "
          "without file:line while it is");
    }
    request.symbolizer->set_libdw_allowed(room);
  }
  SessionReport report(*CurrentSession(), std::move(request));
  // The exit report keeps room for the teardown time (OnTeardownDone).
  const bool is_exit = std::strcmp(trigger, "exit") == 0;
  // The reports of a process that is ending (exit, a fatal signal, an
  // out-of-memory failure) do not wait for the disk: the page cache keeps
  // them whatever becomes of the process (file.h, Durability).
  const bool ending =
      is_exit || std::strcmp(trigger, "signal") == 0 || std::strcmp(trigger, "oom") == 0;
  // Written to the file while the frame table and the trace (most of a
  // report's bytes) are made, never whole in memory; the head first, with
  // the teardown slot opened in it.
  std::string error;
  AtomicFile file;
  if (kept != nullptr) file.KeepReader();  // the next checkpoint reads its trace's lines back
  const bool open = file.Open(path, &error);
  size_t slot = std::string::npos;
  bool at_head = true;
  const TextFlush flush{kReportChunkBytes, [&](std::string* text) {
                          if (std::exchange(at_head, false) && is_exit)
                            slot = OpenTeardownSlot(text);
                          file.Write(*text);
                        }};
  report.Build(open ? &flush : nullptr);
  ThrowIfOutOfMemory();
  if (leaked_device_bytes != nullptr) *leaked_device_bytes = report.leaked_device_bytes();
  bool ok = false;
  if (open) {
    if (at_head && is_exit) slot = report.OpenTeardownSlot();  // the whole text is the rest
    file.Write(report.json());
    ok = file.Commit(ending ? Durability::kStartWriteback : Durability::kWaitForDisk, &error);
  }
  if (kept != nullptr) kept->trace_lines().Written(ok ? file.ReleaseReader() : -1, path);
  if (ok && is_exit) agent.reports.exit_teardown_slot = file.in_place() ? std::string::npos : slot;
  if (!ok) Failed(trigger, error, failure);
  if (ok) LogReport(agent, trigger, path);
  // Under `gpuwatch run` the command says where the reports went, once.
  const bool announce = ok && agent.config().run_log.empty();
  if (summary) WriteStderr(report.Summary(announce ? path : "").c_str());
  // Once per failure: written again with PyTorch's counters, it is not said again.
  if (ok && oom != nullptr && !oom->has_torch) {
    Warn("out of memory: %s of %s failed at %s; report written to %s", oom->api.c_str(),
         FormatBytes(oom->size).c_str(), report.LocationOf(oom->stack_id).c_str(), path.c_str());
  }
  return ok;
}

// The stack a report needs, with a wide margin (libdw's line tables take
// ~160 KiB): a thread with less left writes it on a thread of gpuwatch's.
constexpr size_t kReportStackBytes = size_t{512} << 10;
// Set aside while a report is built, given back chunk by chunk to
// allocations that fail (libgpuwatch/base/memory_reserve.h): what the report
// needs to reach its next safe point and unwind from there.
constexpr int kReportReserveChunks = 16;
constexpr size_t kReportReserveChunkBytes = size_t{1} << 20;

// WriteReportOrThrow, for code that runs inside the host: whatever fails
// while the report is built (memory, a value JSON cannot hold, a thread
// whose stack is too small) costs the report and one line, never the
// program. With `failure`, that line is left to the caller: *failure says why.
bool WriteReport(Agent& agent, const std::string& path, const char* trigger, const char* label,
                 const OomInfo* oom, bool summary, uint64_t* leaked_device_bytes = nullptr,
                 const TrackerSnapshot* captured = nullptr, std::string* failure = nullptr,
                 CheckpointText* kept = nullptr) {
  bool ok = false;
  const auto write = [&] {
    const ScopedInsideGpuwatch inside;  // on whichever thread writes it
    const MemoryReserve reserve(kReportReserveChunks, kReportReserveChunkBytes);
    if (!reserve.held()) {
      Failed(trigger, "not enough memory", failure);
      return;
    }
    try {
      ok = WriteReportOrThrow(agent, path, trigger, label, oom, summary, leaked_device_bytes,
                              captured, failure, kept);
    } catch (const std::exception& e) {
      Failed(trigger, e.what(), failure);
    } catch (...) {
      Failed(trigger, "unknown error", failure);
    }
  };
  if (!RunWithStack(write, kReportStackBytes)) {
    Failed(trigger,
           "this thread's stack is too small and no thread with a larger one could be started",
           failure);
  }
  return ok;
}

// The reports callbacks queued, written now; the caller holds report_mu.
void WritePendingLocked(Agent& agent) {
  std::vector<PendingReport> pending;
  {
    std::lock_guard<Mutex> lock(agent.reports.pending_mu);
    pending.swap(agent.reports.pending);
  }
  for (const PendingReport& r : pending) {
    WriteReport(agent, r.path, r.trigger, nullptr, r.has_oom ? &r.oom : nullptr, false, nullptr,
                &r.snapshot);
  }
}

void WriteExitReport() {
  Agent& agent = GetAgent();
  if (!agent.active.load()) return;
  if (HoldsGpuwatchLock()) {
    // exit() from a signal handler that interrupted gpuwatch on this thread
    // while it held a lock: the report would wait for it forever.
    Warn(
        "no exit report: the process exited from a signal handler that interrupted gpuwatch "
        "while it held a lock the report needs");
    return;
  }
  // exit() from a signal handler that interrupted a CUPTI callback: CUPTI
  // may be in the middle of its own work, so its records are not flushed.
  const bool in_callback = InsideGpuwatch();
  const ScopedInsideGpuwatch inside;
  agent.reports.exiting.store(true);
  // Records of finished copies first; then calls whose records will never
  // come are counted from the calls alone. Outside report_mu: the buffer
  // callbacks run on the flushing thread.
  if (agent.attach.activity && !in_callback) FlushActivity(agent.attach.cupti);
  agent.events().CopiesSettled();
  std::lock_guard<Mutex> lock(agent.reports.report_mu);
  if (agent.reports.exit_report_written) return;
  agent.reports.exit_report_written = true;
  WritePendingLocked(agent);  // captured before the end: they come first
  // A forked child that never used CUDA itself writes nothing.
  if (agent.attach.fork_child && agent.events().EventCount() == 0) return;
  uint64_t leaked = 0;
  if (WriteReport(agent, agent.attach.output_path, "exit", nullptr, nullptr, agent.config().summary,
                  &leaked)) {
    agent.reports.exit_report_path = agent.attach.output_path;
  }
  agent.reports.exit_leaked_bytes.store(leaked);
  agent.reports.exit_leak_known.store(true);
}

std::atomic<bool> g_exit_handler{false};

// The status an at_quick_exit handler reports (it is not told one).
constexpr int kExitStatusUnknown = INT_MIN;

// The exit report's handler: registered at the first CUDA call (or at attach
// under injection, which happens inside that call), so it runs before the
// CUDA runtime's own teardown (registered earlier) in programs linked with
// cudart.
void OnProcessExit(int status, void*) {
  Agent& agent = GetAgent();
  if (CurrentSession() == nullptr) return;  // never attached: nothing to report
  CloseLiveSocket();                        // the process is ending: readers see it gone
  if (status != kExitStatusUnknown) agent.events().ExitStatus(status);
  WriteExitReport();
  agent.reports.exit_report_done_ns.store(agent.events().NowNs());
}

// Teardown: a CUDA runtime that destroys its contexts from its own exit
// handler does so after the exit report. CONTEXT_DESTROY_STARTING then
// registers this handler, which glibc runs as soon as the runtime's handler
// returns; the time since the exit report is written into the slot the
// report kept for it (SetReportTeardown). NVIDIA's runtime
// (driver 580, CUDA 13.0) reported no such destruction: teardown_ns stays null.
void OnTeardownDone(int, void*) {
  Agent& agent = GetAgent();
  const uint64_t done = agent.reports.exit_report_done_ns.load();
  const size_t slot = agent.reports.exit_teardown_slot;
  if (done == 0 || agent.reports.exit_report_path.empty() || slot == std::string::npos) return;
  std::string error;
  if (!SetReportTeardown(agent.reports.exit_report_path, slot, agent.events().NowNs() - done,
                         &error)) {
    Warn("could not add the teardown time to the exit report: %s", error.c_str());
  }
}

}  // namespace

// Registers OnProcessExit once. Exit handlers run in reverse order of registration,
// and the dynamic loader's destructor pass (_dl_fini) was registered by
// __libc_start_main, after the constructors of preloaded libraries had run: a
// handler registered from the preload constructor would run after every
// library destructor. So the preload path registers it at the first CUDA call
// instead (inside the program, after _dl_fini's registration).
void RegisterExitHandler() {
  if (g_exit_handler.exchange(true)) return;
  on_exit(OnProcessExit, nullptr);
  // quick_exit() runs at_quick_exit handlers only, and tells them no status.
  at_quick_exit([] { OnProcessExit(kExitStatusUnknown, nullptr); });
}

bool ExitHandlerRegistered() { return g_exit_handler.load(); }

// For what gpuwatch asks the driver: an out-of-memory report's free memory
// and graph pool, the size of memory opened through CUDA IPC. The reference
// is kept, so that the functions stay valid as long as gpuwatch may call
// them. Done by the background thread after the first CUDA call, or by the
// first callback that needs them before it did: two threads may both resolve
// them, and store the same values.
void ResolveDriverQueries(Agent& agent) {
  if (agent.driver.resolved.load(std::memory_order_acquire)) return;
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    agent.driver.mem_get_info.store(
        reinterpret_cast<MemGetInfoFn>(dlsym(driver, "cuMemGetInfo_v2")));
    agent.driver.graph_mem_attribute.store(
        reinterpret_cast<GraphMemAttributeFn>(dlsym(driver, "cuDeviceGetGraphMemAttribute")));
    agent.driver.mem_get_address_range.store(
        reinterpret_cast<MemGetAddressRangeFn>(dlsym(driver, "cuMemGetAddressRange_v2")));
    agent.driver.resolved.store(true, std::memory_order_release);
  }
}

// The first CUDA call's callback keeps what must happen on the calling
// thread before the call returns to the program:
// - the exit report's handler (RegisterExitHandler: its place among the
//   program's exit handlers is this moment's);
// - under `gpuwatch run`, the "cuda" line: this process uses CUDA, so it owes
//   a report, and if it ends without one (_exit, the dynamic loader's status
//   127, an exec in its place) the command says so. A program may exec or
//   _exit as soon as the call returns (Run.SaysWhenAProgramReplacedItselfByExec
//   does), so the line cannot wait for another thread.
// The rest (FirstCallWork) goes to the background thread.
void OnFirstCall() {
  RegisterExitHandler();
  Agent& agent = GetAgent();
  LogReport(agent, "cuda", "");
  agent.background.first_call_work.store(true, std::memory_order_release);
  if (agent.background.running.load(std::memory_order_acquire) &&
      agent.background.request_pipe[1] >= 0) {
    const char byte = 'f';
    if (write(agent.background.request_pipe[1], &byte, 1) == 1) return;
  }
  // No background thread (or a full pipe, which a fresh process cannot have
  // at its first call; or attach under injection, before the thread starts:
  // DoAttach runs this once the thread is up).
  FirstCallWork();
}

void FirstCallWork() {
  Agent& agent = GetAgent();
  if (!agent.background.first_call_work.exchange(false, std::memory_order_acq_rel)) return;
  // The runtime may have been loaded after attach (dlopen, import torch).
  // (A context's creation refreshes them too, in its callback, before any
  // allocation in it captures a stack.)
  if (CurrentSession()->stacks() != nullptr) RefreshToolModules();
  ResolveDriverQueries(agent);
}

uint64_t MappedSize(uint64_t address) {
  Agent& agent = GetAgent();
  ResolveDriverQueries(agent);  // when the background thread has not yet
  const MemGetAddressRangeFn fn = agent.driver.mem_get_address_range.load();
  unsigned long long base = 0;
  size_t size = 0;
  if (fn == nullptr || fn(&base, &size, address) != 0) return 0;
  return size;
}

// Hands a report captured inside a callback to the background thread. The
// pipe is non-blocking: when it is full, a wake-up is pending anyway. Without
// a background thread the exit report writes it first.
void QueueReport(Agent& agent, PendingReport&& report) {
  {
    std::lock_guard<Mutex> lock(agent.reports.pending_mu);
    agent.reports.pending.push_back(std::move(report));
  }
  if (agent.background.request_pipe[1] >= 0) {
    const char byte = 'r';
    (void)!write(agent.background.request_pipe[1], &byte, 1);
  }
}

// A CUDA context is about to be destroyed (cudaDeviceReset, cuCtxDestroy, or
// the runtime's own teardown at exit): what is still live in it is leaked.
// This is the last moment at which the driver still holds that memory: the
// live memory is captured now by site (as for an out-of-memory failure),
// unless the exit report already covers it, and the background thread
// writes the report.
void OnContextDestroy() {
  Agent& agent = GetAgent();
  if (!agent.active.load()) return;
  if (agent.reports.exiting.load()) {
    // The runtime's teardown at exit: time it (OnTeardownDone).
    if (!agent.reports.teardown_handler.exchange(true)) on_exit(OnTeardownDone, nullptr);
    return;
  }
  if (agent.events().DeviceCurrentBytes() == 0) return;
  const int n = agent.reports.context_reports.fetch_add(1) + 1;
  PendingReport report;
  report.path = agent.attach.output_path + ".context-" + std::to_string(n);
  report.trigger = "context_destroy";
  report.snapshot = agent.events().LiveBySite();
  QueueReport(agent, std::move(report));
}

void WritePendingReports() {
  Agent& agent = GetAgent();
  std::lock_guard<Mutex> lock(agent.reports.report_mu);
  WritePendingLocked(agent);
}

// A report for a signal that ends the process (fatal_signals.h). Runs on the
// background thread while the handler waits, bounded: the interrupted thread
// may hold a lock, so report_mu is only tried, and the handler gives up on a
// report that takes too long.
void WriteSignalReport(int sig, bool final) {
  Agent& agent = GetAgent();
  if (final) CloseLiveSocket();  // the process ends with this signal
  // Only a process that made CUDA calls (of its own, after a fork) reports.
  if (!agent.active.load() || !ExitHandlerRegistered()) return;
  if (agent.attach.fork_child && agent.events().EventCount() == 0) return;
  const bool crash =
      sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
  // Not after a crash: CUPTI's state may be what broke.
  if (agent.attach.activity && !crash) FlushActivity(agent.attach.cupti);
  std::unique_lock<Mutex> lock(agent.reports.report_mu, std::defer_lock);
  const uint64_t deadline = MonotonicNs() + (kSignalReportWaitMs - 2000) * 1000000ULL;
  while (!lock.try_lock()) {
    if (MonotonicNs() >= deadline) return;
    poll(nullptr, 0, 1);
  }
  if (agent.reports.exit_report_written) return;  // already exiting: the exit report stands
  if (final) agent.reports.final_report = true;
  char name[32];
  WriteReport(agent, agent.attach.output_path, "signal", FatalSignalName(sig, name, sizeof(name)),
              nullptr, agent.config().summary);
}

// Checkpoints (GPUWATCH_CHECKPOINT_SECONDS): the main report, replaced in
// place, so that a process killed by SIGKILL or the OOM killer leaves a
// complete report behind. Written when the interval has passed and something
// changed, and at a new device peak, never at more than 5% of a core
// (libgpuwatch/report/checkpoint.h); looked at once a second.
void MaybeCheckpoint(Agent& agent, Checkpoints& c, uint64_t now) {
  if (!ExitHandlerRegistered()) return;  // no CUDA call yet
  const uint64_t events = agent.events().EventCount();
  const uint64_t peak = agent.events().DevicePeakBytes();
  const uint64_t interval_ns =
      static_cast<uint64_t>(agent.config().checkpoint_seconds) * 1000000000ULL;
  if (!CheckpointDue(c.last, now, events, peak, interval_ns)) return;
  std::lock_guard<Mutex> lock(agent.reports.report_mu);
  if (agent.reports.exit_report_written || agent.reports.final_report)
    return;  // the final report stands
  const uint64_t cpu_before = ThreadCpuNs();
  std::string failure;
  const bool written = WriteReport(agent, agent.attach.output_path, "checkpoint", nullptr, nullptr,
                                   false, nullptr, nullptr, &failure, &c.text);
  // What the next checkpoint keeps, packed now that the report's memory is
  // freed: made while it was held, it would pin the heap's pages around it.
  c.text.ReleaseRows();
  if (!written) {
    // Said once; tried again, less and less often (a disk full for a moment).
    if (c.last.failures == 0) {
      Warn(
          "could not write the checkpoint report: %s; checkpoints are tried again, at most a "
          "minute apart, until one is written",
          failure.c_str());
    }
    CheckpointFailed(&c.last, now);
    return;
  }
  if (c.last.failures > 0) {
    Warn("checkpoints are written again (after %u failed tries)", c.last.failures);
    c.last.failures = 0;
  }
  c.last.last_cost_ns = ThreadCpuNs() - cpu_before;
  c.last.last_ns = now;
  // What the report holds, from its snapshot: `events` and `peak` were read
  // before it, and an event counted in between would make the next look
  // write the same totals again.
  c.last.events = c.text.events();
  c.last.peak = c.text.peak();
}

std::string LiveSince(Tracker::Point point) {
  Agent& agent = GetAgent();
  std::lock_guard<Mutex> lock(agent.reports.report_mu);
  const std::string mode =
      PytorchAllocatorMode([](const char* n) { return std::getenv(n); });  // NOLINT
  return LiveSinceJson(*CurrentSession(), point,
                       CurrentSession()->stacks() != nullptr ? SharedSymbolizer(agent) : nullptr,
                       PytorchAllocatesPerTensor(mode));
}

int WriteSnapshot(const char* label) {
  Agent& agent = GetAgent();
  const int n = agent.reports.snapshots.fetch_add(1) + 1;
  if (agent.attach.activity) FlushActivity(agent.attach.cupti);  // outside report_mu
  std::lock_guard<Mutex> lock(agent.reports.report_mu);
  const std::string path = agent.attach.output_path + ".snapshot-" + std::to_string(n);
  return WriteReport(agent, path, "snapshot", label, nullptr, false) ? 0 : -1;
}

}  // namespace gpuwatch
