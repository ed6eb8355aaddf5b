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
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gpuwatch/gpuwatch.h"
#include "interpose/callbacks.h"
#include "interpose/cupti_loader.h"
#include "libgpuwatch/config.h"
#include "libgpuwatch/log.h"
#include "libgpuwatch/report.h"
#include "libgpuwatch/stack_table.h"
#include "libgpuwatch/tracker.h"
#include "libgpuwatch/unwind.h"
#include "libgpuwatch/version.h"

namespace gpuwatch {
namespace {

struct State {
  Config config;
  CuptiApi cupti;
  CUpti_SubscriberHandle subscriber = nullptr;
  Tracker* tracker = nullptr;
  StackTable* stacks = nullptr;
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
  std::mutex report_mu;              // one report written at a time
  bool exit_report_written = false;  // guarded by report_mu
};

State& GetState() {
  static State* state = new State();  // leaked on purpose: exit order cannot bite
  return *state;
}

pthread_once_t g_once = PTHREAD_ONCE_INIT;
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
  return context;
}

// Writes one report; the caller holds report_mu. With `summary`, also prints
// the short summary on stderr.
bool WriteReport(State& s, const std::string& path, const char* trigger, const char* label,
                 const OomInfo* oom, bool summary) {
  const TrackerSnapshot snap = s.tracker->Snapshot();
  ReportContext context = MakeContext(s, trigger, label);
  context.oom = oom;
  context.oom_count = s.ooms.load();
  context.stacks_dropped = s.stacks != nullptr ? s.stacks->dropped() : 0;
  context.depth = s.config.depth;
  SiteResolver sites(s.stacks);
  const std::string json = BuildReportJson(snap, context, &sites);
  std::string error;
  const bool ok = WriteFileAtomically(path, json, &error);
  if (!ok) Warn("could not write the %s report: %s", trigger, error.c_str());
  if (summary) WriteStderr(BuildSummaryText(snap, &sites, ok ? path : "").c_str());
  return ok;
}

void WriteExitReport() {
  State& s = GetState();
  if (!s.active.load()) return;
  std::lock_guard<std::mutex> lock(s.report_mu);
  if (s.exit_report_written) return;
  s.exit_report_written = true;
  WriteReport(s, s.output_path, "exit", nullptr, nullptr, s.config.summary);
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
  DeviceMemoryInfo(&oom.device_free, &oom.device_total);
  std::lock_guard<std::mutex> lock(s.report_mu);
  const std::string path = s.output_path + ".oom-" + std::to_string(n);
  if (WriteReport(s, path, "oom", nullptr, &oom, false)) {
    SiteResolver sites(s.stacks);
    Warn("out of memory: %s of %s failed at %s; report written to %s", event.api,
         FormatBytes(event.size).c_str(), sites.LocationOf(event.stack_id).c_str(), path.c_str());
  }
}

// Snapshots on a signal. The handler only writes a byte to a pipe (no CUDA,
// lock or allocation in it); this thread does the work.
void* SnapshotThread(void*) {
  State& s = GetState();
  char byte = 0;
  for (;;) {
    const ssize_t n = read(s.signal_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return nullptr;
    gpuwatch_snapshot("signal");
  }
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
  // The thread blocks every signal so that the host's signals go to its own
  // threads, as they would without gpuwatch.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const int rc = pthread_create(&thread, nullptr, SnapshotThread, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    Warn("cannot start the snapshot thread (%s); snapshots on a signal are off", std::strerror(rc));
    return;
  }
  pthread_detach(thread);
  pthread_setname_np(thread, "gpuwatch-snap");
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
  if (s.exit_report_written) return;
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
// with a lock held forever: take every lock around the fork.
void ForkPrepare() {
  State& s = GetState();
  if (!s.active.load()) return;
  s.report_mu.lock();
  if (s.stacks != nullptr) s.stacks->LockForFork();
  s.tracker->LockForFork();
}

void ForkRelease() {
  State& s = GetState();
  if (!s.active.load()) return;
  s.tracker->UnlockAfterFork();
  if (s.stacks != nullptr) s.stacks->UnlockAfterFork();
  s.report_mu.unlock();
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

  // Stacks: up to 1M distinct stacks in at most 256 MiB; both leaked on purpose.
  constexpr uint32_t kMaxStacks = 1u << 20;
  if (s.config.depth > 0) {
    InitUnwinder();
    s.stacks = new StackTable(kMaxStacks, size_t{256} << 20);
  }
  s.tracker = new Tracker(kMaxStacks);
  s.attach_mode = g_attach_mode;
  s.command = ReadCommandLine();
  s.output_path = AbsolutePath(ExpandOutputPattern(
      s.config.output, getpid(), HostName(),
      RankFromEnvironment([](const char* n) { return std::getenv(n); })));  // NOLINT
  CallbackHooks hooks;
  hooks.tracker = s.tracker;
  hooks.stacks = s.stacks;
  hooks.depth = s.config.depth;
  hooks.on_oom = &OnOutOfMemory;
  hooks.on_context_destroy = &OnContextDestroy;
  SetCallbackHooks(hooks);
  if (!EnableCallbacks(s.cupti, s.subscriber, &error)) {
    Warn("profiling is off: %s", error.c_str());
    s.cupti.Unsubscribe(s.subscriber);
    return;
  }
  pthread_atfork(ForkPrepare, ForkRelease, ForkRelease);
  s.active.store(true);
  std::atexit(WriteExitReport);
  InstallSnapshotSignal(s);
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

int gpuwatch_snapshot(const char* label) {
  gpuwatch::State& s = gpuwatch::GetState();
  if (!s.active.load()) return -1;
  const int n = s.snapshots.fetch_add(1) + 1;
  std::lock_guard<std::mutex> lock(s.report_mu);
  const std::string path = s.output_path + ".snapshot-" + std::to_string(n);
  return gpuwatch::WriteReport(s, path, "snapshot", label, nullptr, false) ? 0 : -1;
}

}  // extern "C"
