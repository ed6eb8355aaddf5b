// Entry points of libgpuwatch.so: the LD_PRELOAD constructor, the driver's
// InitializeInjection, and the public C API. Both entry points funnel into one
// idempotent Attach().
//
// Hazards handled here:
// - A preloaded library loads into every process, most of which never touch
//   CUDA (shells, `timeout`, Python before `import torch`). Such a process must
//   see no output, no file and no change in behaviour. So the constructor only
//   attaches when CUDA is already loaded; otherwise it points
//   CUDA_INJECTION64_PATH at this library, and the driver calls
//   InitializeInjection if and when the process initialises CUDA.
// - Exit order: atexit handlers run LIFO and global destructors may run before
//   ours, so all state is heap-allocated and never destroyed.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>

#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpuwatch/gpuwatch.h"
#include "interpose/activity.h"
#include "interpose/callbacks.h"
#include "interpose/calls.h"
#include "interpose/cupti_loader.h"
#include "interpose/fatal_signals.h"
#include "libgpuwatch/cfi_unwind.h"
#include "libgpuwatch/checkpoint.h"
#include "libgpuwatch/config.h"
#include "libgpuwatch/graphs.h"
#include "libgpuwatch/growth.h"
#include "libgpuwatch/kernels.h"
#include "libgpuwatch/lifecycle.h"
#include "libgpuwatch/log.h"
#include "libgpuwatch/python_stack.h"
#include "libgpuwatch/report.h"
#include "libgpuwatch/stack_table.h"
#include "libgpuwatch/suppressions.h"
#include "libgpuwatch/symbolizer.h"
#include "libgpuwatch/trace.h"
#include "libgpuwatch/tracker.h"
#include "libgpuwatch/transfers.h"
#include "libgpuwatch/unwind.h"
#include "libgpuwatch/version.h"

namespace gpuwatch {
namespace {

struct State {  // NOLINT(clang-analyzer-optin.performance.Padding): one, leaked
  Config config;
  CuptiApi cupti;
  CUpti_SubscriberHandle subscriber = nullptr;
  Tracker* tracker = nullptr;
  StackTable* stacks = nullptr;
  Transfers* transfers = nullptr;
  KernelTable* kernels = nullptr;
  Lifecycle* lifecycle = nullptr;
  GraphTable* graphs = nullptr;
  bool activity = false;    // CUPTI activity records are enabled
  std::string output_path;  // absolute, expanded at attach time
  std::string attach_mode;
  std::vector<std::string> command;
  std::atomic<bool> active{false};
  std::atomic<int> snapshots{0};
  std::atomic<uint64_t> ooms{0};
  std::atomic<int> context_reports{0};
  std::atomic<int> oom_reports{0};
  std::atomic<uint64_t> last_oom_report_ns{0};
  int signal_pipe[2] = {-1, -1};
  // The background thread holds bg_mu except in poll() and while it writes a
  // fatal signal's report, and bg_starting is set from pthread_create until
  // the thread first takes it (a thread allocates as it starts): see ForkPrepare.
  std::mutex bg_mu;
  std::condition_variable bg_started;
  bool bg_starting = false;          // guarded by bg_mu
  std::mutex report_mu;              // one report written at a time
  bool exit_report_written = false;  // guarded by report_mu
  // Kept from report to report (checkpoints, exit), so that a pc is
  // symbolized once per process; replaced when a module was unloaded, since
  // its cached pcs may then name another. Guarded by report_mu.
  std::unique_ptr<Symbolizer> symbolizer;
  unsigned long long symbolizer_unloads = 0;
  std::string exit_report_path;  // set once the exit report is on disk
  std::atomic<uint64_t> exit_report_done_ns{0};
  std::atomic<bool> teardown_handler{false};
  Timeline* timeline = nullptr;
  Trace* trace = nullptr;                      // GPUWATCH_TRACE_EVENTS; null: no event trace
  const Suppressions* suppressions = nullptr;  // GPUWATCH_SUPPRESSIONS; null: none
  CallbackHooks hooks;                         // as installed; a fork child swaps the tables
  std::string attach_dir;                      // working directory at attach
  bool fork_child = false;                     // forked after attach
  // A signal report that the process dies right after is on disk (or being
  // written): no checkpoint may replace it. Guarded by report_mu.
  bool final_report = false;
  // Device bytes the exit report counted as leaked (GPUWATCH_EXITCODE).
  std::atomic<uint64_t> exit_leaked_bytes{0};
  std::atomic<bool> exit_leak_known{false};
};

State& GetState() {
  static State* state = new State();  // leaked on purpose: exit order cannot bite
  return *state;
}

pthread_once_t g_once = PTHREAD_ONCE_INIT;
// Distinct stacks (and per-site counters) at most.
constexpr uint32_t kMaxStacks = 1u << 20;
const char* g_attach_mode = "preload";

std::vector<std::string> ReadCommandLine() {
  std::vector<std::string> args;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

ReportContext MakeContext(const State& s, const char* trigger, const char* label) {
  ReportContext context;
  context.trigger = trigger;
  context.label = label != nullptr ? label : "";
  context.pid = getpid();
  context.host = HostName();
  context.rank = RankFromEnvironment([](const char* n) { return std::getenv(n); });  // NOLINT
  context.command = s.command;
  context.attach_mode = s.attach_mode;
  context.cupti_path = s.cupti.path;
  // Read now, not at attach: PyTorch reads these when it first allocates.
  context.pytorch_allocator =
      PytorchAllocatorMode([](const char* n) { return std::getenv(n); });  // NOLINT
  return context;
}

// Under `gpuwatch run` (GPUWATCH_RUN_LOG), tells it a report was written:
// one line "TRIGGER<TAB>PATH<TAB>PID", appended with one write(2); trigger
// "cuda" (no path) when a process makes its first CUDA call.
void LogReport(const State& s, const char* trigger, const std::string& path) {
  if (s.config.run_log.empty()) return;
  const int fd = open(s.config.run_log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  const std::string line =
      std::string(trigger) + "\t" + path + "\t" + std::to_string(getpid()) + "\n";
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

int CountUnloads(dl_phdr_info* info, size_t /*size*/, void* data) {
  *static_cast<unsigned long long*>(data) = info->dlpi_subs;
  return 1;  // every entry carries the same count
}

// The symbolizer that reports share; the caller holds report_mu.
Symbolizer* ReportSymbolizer(State& s) {
  unsigned long long unloads = 0;
  dl_iterate_phdr(&CountUnloads, &unloads);
  if (s.symbolizer == nullptr || unloads != s.symbolizer_unloads) {
    s.symbolizer = std::make_unique<Symbolizer>();
    s.symbolizer_unloads = unloads;
  }
  return s.symbolizer.get();
}

// Writes one report; the caller holds report_mu. With `summary`, also prints
// the short summary on stderr. `leaked_device_bytes`, when given, receives
// what the report counts as leaked (LeakedDeviceBytes).
bool WriteReportOrThrow(State& s, const std::string& path, const char* trigger, const char* label,
                        const OomInfo* oom, bool summary, uint64_t* leaked_device_bytes) {
  const TrackerSnapshot snap = s.tracker->Snapshot();
  ReportContext context = MakeContext(s, trigger, label);
  context.oom = oom;
  context.oom_count = s.ooms.load();
  context.stacks_dropped = s.stacks != nullptr ? s.stacks->dropped() : 0;
  if (const PyFrameTable* py = PythonFrameTable()) context.python_frames_dropped = py->dropped();
  context.depth = s.config.depth;
  context.tool_frames = ToolFramesSeen();
  context.unwinder = s.config.depth > 0 ? UnwindMethodName(ActiveUnwindMethod()) : "none";
  context.unwind_fallbacks = CfiFallbacks();
  const TransfersSnapshot transfers = s.transfers->Snapshot();
  const std::vector<KernelStats> kernels = s.kernels->Snapshot();
  context.transfers = &transfers;
  context.kernels = &kernels;
  context.kernel_timing = s.config.kernel_timing;
  context.lifecycle = LifecycleFiguresOf(*s.lifecycle);
  const TimelineSnapshot timeline = s.timeline->Snapshot();
  context.timeline = &timeline;
  TraceSnapshot trace;
  if (s.trace != nullptr) {
    trace = s.trace->Snapshot();
    context.trace = &trace;
  }
  context.suppressions = s.suppressions;
  SiteResolver sites(s.stacks, s.stacks != nullptr ? ReportSymbolizer(s) : nullptr);
  sites.set_pytorch_per_tensor(PytorchAllocatesPerTensor(context.pytorch_allocator));
  const ReportAnalysis analysis = AnalyzeReport(snap, context, &sites);
  const std::string json = BuildReportJson(snap, context, &sites, analysis);
  if (leaked_device_bytes != nullptr) {
    *leaked_device_bytes = LeakedDeviceBytes(analysis, &sites, s.suppressions);
  }
  std::string error;
  const bool ok = WriteFileAtomically(path, json, &error);
  if (!ok) Warn("could not write the %s report: %s", trigger, error.c_str());
  if (ok) LogReport(s, trigger, path);
  // Under `gpuwatch run` the command says where the reports went, once.
  const bool announce = ok && s.config.run_log.empty();
  if (summary) {
    WriteStderr(BuildSummaryText(snap, context, analysis, &sites, announce ? path : "").c_str());
  }
  return ok;
}

// WriteReportOrThrow, for code that runs inside the host: whatever fails
// while the report is built (memory, a value JSON cannot hold) costs the
// report and one line, never the program.
bool WriteReport(State& s, const std::string& path, const char* trigger, const char* label,
                 const OomInfo* oom, bool summary, uint64_t* leaked_device_bytes = nullptr) {
  try {
    return WriteReportOrThrow(s, path, trigger, label, oom, summary, leaked_device_bytes);
  } catch (const std::exception& e) {
    Warn("could not write the %s report: %s", trigger, e.what());
  } catch (...) {
    Warn("could not write the %s report: unknown error", trigger);
  }
  return false;
}

void WriteExitReport() {
  State& s = GetState();
  if (!s.active.load()) return;
  // Records of finished copies first; then calls whose records will never
  // come are counted from the calls alone. Outside report_mu: the buffer
  // callbacks run on the flushing thread.
  if (s.activity) FlushActivity(s.cupti);
  s.transfers->Settle();
  std::lock_guard<std::mutex> lock(s.report_mu);
  if (s.exit_report_written) return;
  s.exit_report_written = true;
  // A forked child that never used CUDA itself writes nothing.
  if (s.fork_child && s.tracker->EventCount() == 0) return;
  uint64_t leaked = 0;
  if (WriteReport(s, s.output_path, "exit", nullptr, nullptr, s.config.summary, &leaked)) {
    s.exit_report_path = s.output_path;
  }
  s.exit_leaked_bytes.store(leaked);
  s.exit_leak_known.store(true);
}

// The exit report's handler: registered at attach, so it runs before the CUDA
// runtime's own teardown (registered earlier) in programs linked with cudart.
void OnExit(int status, void*) {
  State& s = GetState();
  if (s.lifecycle != nullptr) s.lifecycle->exit_status.store(status);
  WriteExitReport();
  s.exit_report_done_ns.store(s.tracker != nullptr ? s.tracker->NowNs() : 0);
}

// Teardown: the CUDA runtime destroys its contexts from its own exit handler,
// after the exit report. CONTEXT_DESTROY_STARTING then registers this
// handler, which glibc runs as soon as the runtime's handler returns; the time
// since the exit report is patched into it.
void OnTeardownDone(int, void*) {
  State& s = GetState();
  const uint64_t done = s.exit_report_done_ns.load();
  if (done == 0 || s.exit_report_path.empty()) return;
  std::string error;
  if (!SetReportTeardown(s.exit_report_path, s.tracker->NowNs() - done, &error)) {
    Warn("could not add the teardown time to the exit report: %s", error.c_str());
  }
}

// Registers OnExit once. Exit handlers run in reverse order of registration,
// and the dynamic loader's destructor pass (_dl_fini) was registered by
// __libc_start_main, after the constructors of preloaded libraries had run: a
// handler registered from the preload constructor would run after every
// library destructor. So the preload path registers it at the first CUDA call
// instead (inside the program, after _dl_fini's registration).
std::atomic<bool> g_exit_handler{false};

void RegisterExitHandler() {
  if (g_exit_handler.exchange(true)) return;
  on_exit(OnExit, nullptr);
}

void OnFirstCall() {
  RegisterExitHandler();
  // Under `gpuwatch run`: this process uses CUDA, so it owes a report. If it
  // ends without one (_exit, the dynamic loader's status 127), the command
  // says so and shows the last checkpoint.
  State& s = GetState();
  LogReport(s, "cuda", "");
  // The runtime may have been loaded after attach (dlopen, import torch).
  if (GetState().stacks != nullptr) RefreshToolModules();
}

// GPUWATCH_EXITCODE. An atexit handler cannot see the exit status; glibc's
// on_exit() handlers run in the same LIFO list and receive it (the value
// passed to exit() or returned from main). When it is 0 and the exit report
// counted leaked device memory, this handler flushes stdio and ends the
// process with _exit(N), as LeakSanitizer does: the exit handlers registered
// before it do not run. So it is registered as early as possible, always
// before the exit report's handler (it runs after the report was written):
// - from the preload constructor (LD_PRELOAD, `gpuwatch run`): that is before
//   __libc_start_main registers the loader's destructor pass, so it runs last
//   of all, after every library destructor, and the _exit skips only stdio's
//   final flush, which it does itself;
// - with CUDA_INJECTION64_PATH alone, at attach, inside the program's first
//   CUDA call: handlers the program registered before that call (static
//   destructors, say) do not run when the status is changed.
// It never writes the report itself: by then CUDA may be torn down.
void OnExitStatus(int status, void*) {
  State& s = GetState();
  if (!s.active.load() || s.config.exitcode == 0 || status != 0) return;
  if (!s.exit_leak_known.load() || s.exit_leaked_bytes.load() == 0) return;
  Warn("exit status 0 changed to %d: %s of device memory leaked (GPUWATCH_EXITCODE)",
       s.config.exitcode, FormatBytes(s.exit_leaked_bytes.load()).c_str());
  std::fflush(nullptr);
  _exit(s.config.exitcode);
}

std::atomic<bool> g_exit_status_handler{false};

void RegisterExitStatusHandler() {
  if (g_exit_status_handler.exchange(true)) return;
  on_exit(OnExitStatus, nullptr);
}

// One timeline sample of what each site holds now.
void SamplePeriodic(State& s) {
  s.timeline->AddPeriodic(s.tracker->NowNs(), s.tracker->DeviceCurrentBytes(),
                          s.tracker->LiveDeviceBytesBySite());
}

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Device free/total from the driver already in the process, or zeros.
void DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes) {
  *free_bytes = 0;
  *total_bytes = 0;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (driver == nullptr) return;
  using MemGetInfo = int (*)(size_t*, size_t*);
  auto fn = reinterpret_cast<MemGetInfo>(dlsym(driver, "cuMemGetInfo_v2"));
  size_t f = 0;
  size_t t = 0;
  if (fn != nullptr && fn(&f, &t) == 0) {
    *free_bytes = f;
    *total_bytes = t;
  }
  dlclose(driver);  // drops only the reference RTLD_NOLOAD took
}

// An allocation failed for lack of memory: write a report at once, on the
// failing thread, before the error reaches the caller. Frameworks retry after
// freeing caches, so reports are rate-limited (one per second, ten in all);
// every failure is counted.
void OnOutOfMemory(const OomEvent& event) {
  State& s = GetState();
  s.ooms.fetch_add(1);
  if (s.trace != nullptr) {
    s.trace->Oom(s.tracker->NowNs(), event.device, event.size, event.kind, event.stack_id);
  }
  constexpr uint64_t kMinGapNs = 1000000000ULL;
  constexpr int kMaxReports = 10;
  const uint64_t now = MonotonicNs();
  uint64_t last = s.last_oom_report_ns.load();
  if ((last != 0 && now - last < kMinGapNs) || s.oom_reports.load() >= kMaxReports ||
      !s.last_oom_report_ns.compare_exchange_strong(last, now)) {
    return;
  }
  const int n = s.oom_reports.fetch_add(1) + 1;
  OomInfo oom;
  oom.size = event.size;
  oom.kind = event.kind;
  oom.api = event.api;
  oom.error = event.error;
  oom.stack_id = event.stack_id;
  oom.device = event.device;
  DeviceMemoryInfo(&oom.device_free, &oom.device_total);
  std::lock_guard<std::mutex> lock(s.report_mu);
  const std::string path = s.output_path + ".oom-" + std::to_string(n);
  if (WriteReport(s, path, "oom", nullptr, &oom, false)) {
    SiteResolver sites(s.stacks, s.stacks != nullptr ? ReportSymbolizer(s) : nullptr);
    Warn("out of memory: %s of %s failed at %s; report written to %s", event.api,
         FormatBytes(event.size).c_str(), sites.LocationOf(event.stack_id).c_str(), path.c_str());
  }
}

// A report for a signal that ends the process (fatal_signals.h). Runs on the
// background thread while the handler waits, bounded: the interrupted thread
// may hold a lock, so report_mu is only tried, and the handler gives up on a
// report that takes too long.
void WriteSignalReport(int sig, bool final) {
  State& s = GetState();
  // Only a process that made CUDA calls (of its own, after a fork) reports.
  if (!s.active.load() || !g_exit_handler.load()) return;
  if (s.fork_child && s.tracker->EventCount() == 0) return;
  const bool crash =
      sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
  // Not after a crash: CUPTI's state may be what broke.
  if (s.activity && !crash) FlushActivity(s.cupti);
  std::unique_lock<std::mutex> lock(s.report_mu, std::defer_lock);
  const uint64_t deadline = MonotonicNs() + (kSignalReportWaitMs - 2000) * 1000000ULL;
  while (!lock.try_lock()) {
    if (MonotonicNs() >= deadline) return;
    poll(nullptr, 0, 1);
  }
  if (s.exit_report_written) return;  // already exiting: the exit report stands
  if (final) s.final_report = true;
  char name[32];
  WriteReport(s, s.output_path, "signal", FatalSignalName(sig, name, sizeof(name)), nullptr,
              s.config.summary);
}

// Checkpoints (GPUWATCH_CHECKPOINT_SECONDS): the main report, replaced in
// place, so that a process killed by SIGKILL or the OOM killer leaves a
// complete report behind. Written when the interval has passed and something
// changed, and at a new device peak, never at more than 5% of a core
// (libgpuwatch/checkpoint.h); looked at once a second.
struct Checkpoints {
  CheckpointState last;
  bool failed = false;  // one warning, then no more tries
};

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

void MaybeCheckpoint(State& s, Checkpoints& c, uint64_t now) {
  if (c.failed || !g_exit_handler.load()) return;  // no CUDA call yet
  const uint64_t events = s.tracker->EventCount();
  const uint64_t peak = s.tracker->DevicePeakBytes();
  const uint64_t interval_ns = static_cast<uint64_t>(s.config.checkpoint_seconds) * 1000000000ULL;
  if (!CheckpointDue(c.last, now, events, peak, interval_ns)) return;
  std::lock_guard<std::mutex> lock(s.report_mu);
  if (s.exit_report_written || s.final_report) return;  // the final report stands
  const uint64_t cpu_before = ThreadCpuNs();
  c.failed = !WriteReport(s, s.output_path, "checkpoint", nullptr, nullptr, false, nullptr);
  c.last.last_cost_ns = ThreadCpuNs() - cpu_before;
  c.last.last_ns = now;
  c.last.events = events;
  c.last.peak = peak;
}

// gpuwatch's background thread: reports for the signals that end the
// process, snapshots on a signal (the handlers only write a byte to a pipe:
// no CUDA, lock or allocation in them), periodic timeline samples
// (GPUWATCH_SAMPLE_MS) and checkpoints. It waits for all of them in poll(),
// whose timeout is the next timer's due time.
void* BackgroundThread(void*) {
  State& s = GetState();
  // Held except in poll(): ForkPrepare waits for that.
  std::unique_lock<std::mutex> working(s.bg_mu);
  s.bg_starting = false;
  s.bg_started.notify_all();
  SetFatalSignalServerThread();
  // An fd of -1 is ignored by poll.
  pollfd fds[2] = {{FatalSignalRequestFd(), POLLIN, 0}, {s.signal_pipe[0], POLLIN, 0}};
  const uint64_t interval_ns = static_cast<uint64_t>(s.config.sample_ms) * 1000000ULL;
  constexpr uint64_t kCheckpointTickNs = 1000000000ULL;  // at most one checkpoint a second
  const bool checkpoints = s.config.checkpoint_seconds != 0;
  Checkpoints checkpoint;
  uint64_t next = MonotonicNs() + interval_ns;
  uint64_t next_checkpoint = MonotonicNs() + kCheckpointTickNs;
  for (;;) {
    const uint64_t now = MonotonicNs();
    uint64_t due = UINT64_MAX;
    if (interval_ns != 0) due = next;
    if (checkpoints) due = std::min(due, next_checkpoint);
    int timeout_ms = -1;
    if (due != UINT64_MAX) {
      timeout_ms = now >= due ? 0 : static_cast<int>((due - now + 999999) / 1000000);
    } else if (fds[0].fd < 0 && fds[1].fd < 0) {
      return nullptr;
    }
    working.unlock();
    const int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return nullptr;
    // Before bg_mu: the signal may have interrupted ForkPrepare, which holds it.
    if (n > 0 && fds[0].revents != 0) ServeFatalSignalRequest();  // first: a handler waits
    working.lock();
    if (n > 0 && fds[1].revents != 0) {
      // Signals that came while the last snapshot was written make one more
      // snapshot, not one each: a burst of signals cannot queue work.
      char bytes[256];
      const ssize_t r = read(fds[1].fd, bytes, sizeof(bytes));
      if (r > 0) {
        gpuwatch_snapshot("signal");
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[1].fd = -1;  // the pipe is gone: keep the rest
      }
    }
    if (interval_ns != 0) {
      const uint64_t t = MonotonicNs();
      if (t >= next) {
        SamplePeriodic(s);
        next = std::max(next + interval_ns, t);  // a late tick is not made up twice
      }
    }
    if (checkpoints) {
      const uint64_t t = MonotonicNs();
      if (t >= next_checkpoint) {
        MaybeCheckpoint(s, checkpoint, t);
        next_checkpoint = t + kCheckpointTickNs;
      }
    }
  }
}

// Starts the background thread when there is work for it. It blocks every
// signal so that the host's signals go to its own threads, as they would
// without gpuwatch. Returns false when it could not start.
bool StartBackgroundThread(State& s) {
  if (s.signal_pipe[0] < 0 && s.config.sample_ms == 0 && FatalSignalRequestFd() < 0 &&
      s.config.checkpoint_seconds == 0) {
    return true;
  }
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  {
    std::lock_guard<std::mutex> lock(s.bg_mu);
    s.bg_starting = true;
  }
  const int rc = pthread_create(&thread, nullptr, BackgroundThread, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    {
      std::lock_guard<std::mutex> lock(s.bg_mu);
      s.bg_starting = false;
    }
    Warn(
        "cannot start gpuwatch's thread (%s); snapshots on a signal, periodic samples, "
        "checkpoints and reports on SIGTERM or a crash are off",
        std::strerror(rc));
    return false;
  }
  FatalSignalServerCreated();
  pthread_detach(thread);
  pthread_setname_np(thread, "gpuwatch-bg");
  return true;
}

void OnSnapshotSignal(int) {
  const int saved_errno = errno;
  const char byte = 's';
  (void)!write(GetState().signal_pipe[1], &byte, 1);  // non-blocking: a full pipe drops it
  errno = saved_errno;
}

void InstallSnapshotSignal(State& s) {
  const int sig = s.config.snapshot_signal;
  if (sig == 0) return;
  struct sigaction current {};
  if (sigaction(sig, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) {
    Warn(
        "signal %d already has a handler in this program; snapshots on a signal are off (set "
        "GPUWATCH_SIGNAL to choose another)",
        sig);
    return;
  }
  if (pipe2(s.signal_pipe, O_CLOEXEC) != 0) return;
  fcntl(s.signal_pipe[1], F_SETFL, fcntl(s.signal_pipe[1], F_GETFL) | O_NONBLOCK);
  if (!StartBackgroundThread(s)) {
    close(s.signal_pipe[0]);
    close(s.signal_pipe[1]);
    s.signal_pipe[0] = s.signal_pipe[1] = -1;
    return;
  }
  struct sigaction action {};
  action.sa_handler = OnSnapshotSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(sig, &action, nullptr);
}

// A CUDA context is about to be destroyed (cudaDeviceReset, cuCtxDestroy, or
// the runtime's own teardown at exit): what is still live in it is leaked.
// This is the last moment at which the driver still holds that memory, so
// write the leak report now, unless the exit report already covered it.
void OnContextDestroy() {
  State& s = GetState();
  if (!s.active.load()) return;
  std::lock_guard<std::mutex> lock(s.report_mu);
  if (s.exit_report_written) {
    // The runtime's teardown at exit: time it (OnTeardownDone).
    if (!s.teardown_handler.exchange(true)) on_exit(OnTeardownDone, nullptr);
    return;
  }
  if (s.tracker->DeviceCurrentBytes() == 0) return;
  const int n = s.context_reports.fetch_add(1) + 1;
  WriteReport(s, s.output_path + ".context-" + std::to_string(n), "context_destroy", nullptr,
              nullptr, false);
}

bool CudaAlreadyLoaded() {
  int found = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name == nullptr) return 0;
        const char* base = std::strrchr(name, '/');
        base = base != nullptr ? base + 1 : name;
        if (std::strncmp(base, "libcudart.so", 12) == 0 ||
            std::strncmp(base, "libcuda.so", 10) == 0) {
          *static_cast<int*>(data) = 1;
          return 1;
        }
        return 0;
      },
      &found);
  return found != 0;
}

std::string OwnPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnPath), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

const char* SubscribeErrorHint(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI client holds the subscription";
    case CUPTI_ERROR_UNKNOWN:
    case CUPTI_ERROR_NOT_INITIALIZED:
      return "no usable CUDA driver";
    default:
      return "CUPTI refused the subscription";
  }
}

// fork() while another thread is inside gpuwatch must not leave the child
// with a lock held forever: take every lock around the fork. That includes
// locks that are not ours: an allocator without fork handlers of its own
// (GCC 12's ASan allocator, for one) leaves the child a lock held forever if
// the background thread was allocating at the fork. So the thread is first
// brought to a point where it allocates nothing: started, and waiting in
// poll() (it holds bg_mu otherwise). The host's own threads are the host's
// business.
void ForkPrepare() {
  State& s = GetState();
  if (!s.active.load()) return;
  std::unique_lock<std::mutex> background(s.bg_mu);
  s.bg_started.wait(background, [&s] { return !s.bg_starting; });
  background.release();  // held until ForkRelease
  s.report_mu.lock();
  if (s.stacks != nullptr) s.stacks->LockForFork();
  s.tracker->LockForFork();
  s.timeline->LockForFork();
  s.transfers->LockForFork();
  s.kernels->LockForFork();
  s.graphs->LockForFork();
}

void ForkRelease() {
  State& s = GetState();
  if (!s.active.load()) return;
  s.graphs->UnlockAfterFork();
  s.kernels->UnlockAfterFork();
  s.transfers->UnlockAfterFork();
  s.timeline->UnlockAfterFork();
  s.tracker->UnlockAfterFork();
  if (s.stacks != nullptr) s.stacks->UnlockAfterFork();
  s.report_mu.unlock();
  s.bg_mu.unlock();
}

// The report path of process `pid`: GPUWATCH_OUTPUT expanded again, relative
// to the working directory at attach. When that is the parent's path (no %p
// in the pattern), the child's gets ".child-PID" appended.
std::string ForkOutputPath(const State& s, long pid) {
  std::string path = ExpandOutputPattern(
      s.config.output, pid, HostName(),
      RankFromEnvironment([](const char* n) { return std::getenv(n); }));  // NOLINT
  if (path.empty() || path[0] != '/') path = s.attach_dir + "/" + path;
  if (path == s.output_path) path += ".child-" + std::to_string(pid);
  return path;
}

// The child of a fork() (a DataLoader worker, say) reports what it allocates
// itself, never a copy of the parent's tables: it starts fresh ones (the
// parent's copies are left untouched and unused) and a report path of its own.
// The stack table is shared: it is append-only. Threads do not survive fork(),
// so the background thread is started again, on a pipe of the child's own.
void ForkChild() {
  State& s = GetState();
  if (!s.active.load()) return;
  ForkRelease();
  const bool paused = s.tracker->paused();
  Tracker* parent_tracker = s.tracker;
  s.tracker = new Tracker(kMaxStacks);
  s.tracker->SetPaused(paused);
  if (s.trace != nullptr) {
    // The child's clock starts now: GPU times shift by the time since attach.
    auto* trace = new Trace(s.trace->capacity());
    trace->SetGpuClockOffset(s.trace->gpu_clock_offset() +
                             static_cast<int64_t>(s.tracker->NowNs()) -
                             static_cast<int64_t>(parent_tracker->NowNs()));
    s.trace = trace;
    s.tracker->SetTrace(trace);
    SetActivityTrace(s.cupti.GetTimestamp != nullptr ? trace : nullptr);
  }
  s.timeline = new Timeline(static_cast<uint64_t>(s.config.sample_ms));
  s.transfers = new Transfers();
  s.kernels = new KernelTable();
  s.lifecycle = new Lifecycle();
  s.hooks.tracker = s.tracker;
  s.hooks.transfers = s.transfers;
  s.hooks.kernels = s.kernels;
  s.hooks.lifecycle = s.lifecycle;
  SetCallbackHooks(s.hooks);
  SetActivitySinks(s.transfers, s.kernels);
  s.snapshots.store(0);
  s.ooms.store(0);
  s.context_reports.store(0);
  s.oom_reports.store(0);
  s.last_oom_report_ns.store(0);
  s.exit_report_written = false;
  s.exit_leak_known.store(false);
  s.fork_child = true;
  s.final_report = false;
  FatalSignalsAfterFork();  // before the background thread starts: it polls the new pipe
  s.output_path = ForkOutputPath(s, getpid());
  if (s.signal_pipe[0] >= 0) {
    int fresh[2] = {-1, -1};
    if (pipe2(fresh, O_CLOEXEC) == 0) {
      fcntl(fresh[1], F_SETFL, fcntl(fresh[1], F_GETFL) | O_NONBLOCK);
    }
    const int old_read = s.signal_pipe[0];
    const int old_write = s.signal_pipe[1];
    s.signal_pipe[0] = fresh[0];
    s.signal_pipe[1] = fresh[1];
    close(old_read);
    close(old_write);
  }
  StartBackgroundThread(s);
}

void DoAttach() {
  State& s = GetState();
  std::vector<std::string> warnings;
  s.config = ConfigFromEnvironment(&warnings);
  for (const std::string& w : warnings) Warn("%s", w.c_str());
  if (s.config.disabled) return;

  std::string error;
  if (!LoadCupti(s.config.cupti_library, &s.cupti, &error)) {
    Warn("%s; profiling is off for this process", error.c_str());
    return;
  }

  CUptiResult r = CUPTI_SUCCESS;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  if (s.cupti.SubscribeV2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpuwatch";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof(holder);
    r = s.cupti.SubscribeV2(&s.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCuptiCallback),
                            nullptr, &params);
  } else {
    r = s.cupti.Subscribe(&s.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCuptiCallback),
                          nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    s.cupti.GetResultString(r, &text);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      Warn("profiling is off: %s (%s) (CUPTI error %d: %s)", SubscribeErrorHint(r),
           holder[0] != '\0' ? holder
                             : "unnamed; e.g. Nsight Systems, compute-sanitizer or the "
                               "PyTorch profiler",
           static_cast<int>(r), text != nullptr ? text : "?");
    } else {
      Warn("profiling is off: %s (cuptiSubscribe returned CUPTI error %d: %s)",
           SubscribeErrorHint(r), static_cast<int>(r), text != nullptr ? text : "?");
    }
    return;
  }

  // Stacks: up to kMaxStacks distinct stacks in at most 256 MiB; both leaked on purpose.
  if (s.config.depth > 0) {
    InitUnwinder();
    UseCfiUnwinder(s.config.cfi_unwind);
    RefreshToolModules();
    s.stacks = new StackTable(kMaxStacks, size_t{256} << 20);
    if (s.config.python) InitPythonStacks();  // Python frames too, in a CPython process
    // What the attaching thread's first capture would do, done now: with
    // LD_PRELOAD that is before main(), not in the program's first CUDA
    // call. Its stack bounds (the main thread's come from reading all of
    // /proc/self/maps: milliseconds under PyTorch) and the first chunk of
    // the stack table.
    PrimeStackBounds(pthread_self());
    s.stacks->Prepare();
  }
  s.tracker = new Tracker(kMaxStacks);
  s.timeline = new Timeline(static_cast<uint64_t>(s.config.sample_ms));
  if (s.config.trace_events > 0) {
    s.trace = new Trace(static_cast<size_t>(s.config.trace_events));
    if (s.trace->capacity() == 0) {
      Warn("cannot reserve the event trace (%ld events); the report has no trace",
           s.config.trace_events);
      delete s.trace;
      s.trace = nullptr;
    }
  }
  if (s.trace != nullptr) {
    s.tracker->SetTrace(s.trace);
    // Activity records are stamped on CUPTI's clock: measure its offset from
    // the tracker's once. Without it copies and kernels are not traced.
    uint64_t gpu_now = 0;
    if (s.cupti.GetTimestamp != nullptr && s.cupti.GetTimestamp(&gpu_now) == CUPTI_SUCCESS) {
      s.trace->SetGpuClockOffset(static_cast<int64_t>(s.tracker->NowNs()) -
                                 static_cast<int64_t>(gpu_now));
      SetActivityTrace(s.trace);
    } else {
      s.cupti.GetTimestamp = nullptr;
    }
  }
  if (!s.config.suppressions.empty()) {
    auto* suppressions = new Suppressions();
    if (suppressions->LoadFile(s.config.suppressions, &error)) {
      s.suppressions = suppressions;
    } else {
      Warn("%s; nothing is suppressed", error.c_str());
      delete suppressions;
    }
  }
  s.transfers = new Transfers();
  s.kernels = new KernelTable();
  s.lifecycle = new Lifecycle();
  s.graphs = new GraphTable();
  if (std::strcmp(g_attach_mode, "injection") == 0) {
    // Attached inside cuInit: the first call started before we could see it.
    s.lifecycle->first_call_observed = false;
    s.lifecycle->FirstCall(s.tracker->NowNs());
  }
  s.attach_mode = g_attach_mode;
  s.command = ReadCommandLine();
  s.output_path = AbsolutePath(ExpandOutputPattern(
      s.config.output, getpid(), HostName(),
      RankFromEnvironment([](const char* n) { return std::getenv(n); })));  // NOLINT
  char cwd[PATH_MAX];
  s.attach_dir = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  CallbackHooks hooks;
  hooks.tracker = s.tracker;
  hooks.stacks = s.stacks;
  hooks.depth = s.config.depth;
  hooks.on_oom = &OnOutOfMemory;
  hooks.on_context_destroy = &OnContextDestroy;
  hooks.transfers = s.transfers;
  hooks.kernels = s.kernels;
  hooks.lifecycle = s.lifecycle;
  hooks.on_first_call = &OnFirstCall;
  hooks.get_device_id = s.cupti.GetDeviceId;
  hooks.graphs = s.graphs;
  hooks.get_graph_node_id = s.cupti.GetGraphNodeId;
  // Activity first, so that no copy is registered waiting for a record that
  // will never come.
  s.activity = EnableActivity(s.cupti, s.transfers, s.kernels, s.config.kernel_timing, &error);
  if (!s.activity)
    Warn("%s; copies are counted without timing or host memory kinds", error.c_str());
  hooks.copy_activity = s.activity;
  SetCallbackHooks(hooks);
  s.hooks = hooks;
  if (!EnableCallbacks(s.cupti, s.subscriber, &error)) {
    Warn("profiling is off: %s", error.c_str());
    s.cupti.Unsubscribe(s.subscriber);
    return;
  }
  pthread_atfork(ForkPrepare, ForkRelease, ForkChild);
  if (s.config.exitcode != 0) RegisterExitStatusHandler();  // before the report's handler
  s.active.store(true);
  // on_exit rather than atexit: same list, and the handler learns the exit
  // status for the report. Injection runs inside the program's first CUDA
  // call, so register now; the preload constructor waits for that call.
  if (std::strcmp(g_attach_mode, "injection") == 0) {
    RegisterExitHandler();
    LogReport(s, "cuda", "");
  }
  // Before the snapshot signal, which may start the background thread: that
  // thread polls the request pipe made here.
  if (!InstallFatalSignalHandlers(s.config.snapshot_signal, &WriteSignalReport)) {
    Warn("cannot create a pipe (%s); no report is written when a signal ends the process",
         std::strerror(errno));
  }
  InstallSnapshotSignal(s);
  if (s.signal_pipe[0] < 0) StartBackgroundThread(s);  // the rest without snapshots
}

void Attach(const char* mode) {
  g_attach_mode = mode;  // only the first caller's mode matters: pthread_once
  pthread_once(&g_once, DoAttach);
}

bool EnvIsTrue(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): constructor
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 ||
                          std::strcmp(v, "yes") == 0 || std::strcmp(v, "on") == 0);
}

// True when this library came in through LD_PRELOAD rather than a dlopen
// (the driver's injection, or a program loading it to call the API).
bool LoadedByPreload(const std::string& self) {
  const char* preload = std::getenv("LD_PRELOAD");  // NOLINT(concurrency-mt-unsafe): constructor
  if (preload == nullptr || self.empty()) return false;
  const char* base = std::strrchr(self.c_str(), '/');
  base = base != nullptr ? base + 1 : self.c_str();
  return std::strstr(preload, base) != nullptr;
}

__attribute__((constructor)) void PreloadConstructor() {
  if (EnvIsTrue("GPUWATCH_DISABLE")) return;
  const std::string self = OwnPath();
  if (!LoadedByPreload(self)) return;  // the driver calls InitializeInjection

  // As early as possible: see OnExitStatus. The value is validated at attach.
  const char* exitcode = std::getenv("GPUWATCH_EXITCODE");  // NOLINT(concurrency-mt-unsafe)
  if (exitcode != nullptr && *exitcode != '\0' && std::strcmp(exitcode, "0") != 0) {
    RegisterExitStatusHandler();
  }
  if (CudaAlreadyLoaded()) {
    Attach("preload");
    return;
  }
  // CUDA may be loaded later (Python's `import torch`, static cudart): let the
  // driver inject us when it initialises. Another tool's injection path wins.
  if (std::getenv("CUDA_INJECTION64_PATH") == nullptr && !self.empty()) {  // NOLINT
    setenv("CUDA_INJECTION64_PATH", self.c_str(), 0);                      // NOLINT
  }
}

}  // namespace
}  // namespace gpuwatch

extern "C" {

// Called by the CUDA driver during cuInit when CUDA_INJECTION64_PATH names
// this library. Returns 1 (success) even when gpuwatch could not attach: the
// driver must carry on either way.
__attribute__((visibility("default"))) int InitializeInjection(void) {
  gpuwatch::Attach("injection");
  return 1;
}

const char* gpuwatch_version(void) { return gpuwatch::kGpuwatchVersion; }

int gpuwatch_is_active(void) { return gpuwatch::GetState().active.load() ? 1 : 0; }

int gpuwatch_mark(const char* label) {
  gpuwatch::State& s = gpuwatch::GetState();
  if (!s.active.load()) return -1;
  const uint64_t now = s.tracker->NowNs();
  const uint64_t ordinal =
      s.timeline->AddMark(now, label != nullptr ? label : "", s.tracker->DeviceCurrentBytes(),
                          s.tracker->LiveDeviceBytesBySite());
  if (s.trace != nullptr) s.trace->Mark(now, ordinal, label);
  return 0;
}

int gpuwatch_pause(void) {
  gpuwatch::State& s = gpuwatch::GetState();
  if (!s.active.load()) return -1;
  s.tracker->SetPaused(true);
  return 0;
}

int gpuwatch_resume(void) {
  gpuwatch::State& s = gpuwatch::GetState();
  if (!s.active.load()) return -1;
  s.tracker->SetPaused(false);
  return 0;
}

int gpuwatch_snapshot(const char* label) {
  gpuwatch::State& s = gpuwatch::GetState();
  if (!s.active.load()) return -1;
  const int n = s.snapshots.fetch_add(1) + 1;
  if (s.activity) gpuwatch::FlushActivity(s.cupti);  // outside report_mu
  std::lock_guard<std::mutex> lock(s.report_mu);
  const std::string path = s.output_path + ".snapshot-" + std::to_string(n);
  return gpuwatch::WriteReport(s, path, "snapshot", label, nullptr, false) ? 0 : -1;
}

}  // extern "C"
