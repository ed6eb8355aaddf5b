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
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpuwatch/gpuwatch.h"
#include "interpose/agent/agent.h"
#include "interpose/agent/background.h"
#include "interpose/agent/fatal_signals.h"
#include "interpose/agent/fork.h"
#include "interpose/agent/live.h"
#include "interpose/agent/reports.h"
#include "interpose/callbacks/activity.h"
#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/guard.h"
#include "interpose/callbacks/not_recording.h"
#include "interpose/calls/calls.h"
#include "interpose/cupti/cupti_loader.h"
#include "interpose/cupti/cupti_mux.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/base/config.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/read_file.h"
#include "libgpuwatch/base/version.h"
#include "libgpuwatch/stacks/cfi_unwind.h"
#include "libgpuwatch/stacks/python_stack.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch {

Agent& GetAgent() {
  static Agent* agent = [] {
    auto* made = new Agent();  // leaked on purpose: exit order cannot bite
    fork_locks::AddLeaf(&made->reports.pending_mu, "the report queue");
    // Held while gpuwatch_mark reads the live table: taken before the tables.
    fork_locks::AddOuter(&made->mark_scan_mu, "the mark's scan");
    return made;
  }();
  return *agent;
}

namespace {

// gpuwatch_pause()/gpuwatch_resume() before gpuwatch attaches (under Python it
// attaches at the first CUDA call: a warm-up paused before it is usual): the
// last one's state, applied when it attaches. -1: none came.
std::atomic<int> g_paused_before_attach{-1};

void ApplyPauseBeforeAttach(Agent& agent) {
  const int paused = g_paused_before_attach.exchange(-1);
  if (paused >= 0) agent.events().Paused(paused == 1);
}

// The arguments, each ended by a NUL (a program that rewrote its argv may
// leave the last one unended). Read without an ifstream: its locale would be
// the first in the process, and building it costs attach 40,000 instructions
// and the page faults on the code and data it touches.
std::vector<std::string> ReadCommandLine() {
  std::vector<std::string> args;
  std::string text;
  std::string problem;
  if (!ReadRegularFile("/proc/self/cmdline", uint64_t{64} << 20, &text, &problem)) return args;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\0', at), text.size());
    args.emplace_back(text, at, end - at);
    at = end + 1;
  }
  return args;
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
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

// Set by the preload constructor: gpuwatch comes before libcupti in the
// process's symbol lookup, so other CUPTI clients share CUPTI through it.
std::atomic<bool> g_preloaded{false};

void DoAttach(const char* mode) {
  Agent& agent = GetAgent();
  std::vector<std::string> warnings;
  Config config = ConfigFromEnvironment(&warnings);
  for (const std::string& w : warnings) Warn("%s", w.c_str());
  if (config.disabled) {
    MarkNotRecording("gpuwatch is disabled (GPUWATCH_DISABLE=1)", config.run_log);
    return;
  }

  std::string error;
  // Loaded by the driver alone, with a libcupti in the process already: a
  // CUPTI client (a profiler) may be here that gpuwatch cannot share with.
  const bool foreign_cupti =
      !g_preloaded.load() && dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  // The process's CUPTI (cupti_mux.h): loaded already if another CUPTI client
  // used it through gpuwatch first. gpuwatch's own view shares it with them.
  const CuptiApi* real = mux::Real(config.cupti_library, &error);
  if (real == nullptr) {
    Warn("%s; profiling is off for this process", error.c_str());
    MarkNotRecording(error, config.run_log);
    return;
  }
  agent.attach.cupti = mux::SelfView(*real);

  CUptiResult r = CUPTI_SUCCESS;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  if (agent.attach.cupti.SubscribeV2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpuwatch";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof(holder);
    r = agent.attach.cupti.SubscribeV2(&agent.attach.subscriber,
                                       reinterpret_cast<CUpti_CallbackFunc>(OnCuptiCallback),
                                       nullptr, &params);
  } else {
    r = agent.attach.cupti.Subscribe(
        &agent.attach.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCuptiCallback), nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    agent.attach.cupti.GetResultString(r, &text);
    const std::string code = "CUPTI error " + std::to_string(static_cast<int>(r)) + ": " +
                             (text != nullptr ? text : "?");
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      const std::string who = holder[0] != '\0' ? holder
                                                : "unnamed; e.g. Nsight Systems, compute-sanitizer "
                                                  "or the PyTorch profiler";
      Warn("profiling is off: %s (%s) (%s)", SubscribeErrorHint(r), who.c_str(), code.c_str());
      MarkNotRecording("CUPTI is held by " + who + " (" + code + ")", config.run_log);
    } else {
      Warn("profiling is off: %s (cuptiSubscribe returned %s)", SubscribeErrorHint(r),
           code.c_str());
      MarkNotRecording(
          std::string(SubscribeErrorHint(r)) + " (cuptiSubscribe returned " + code + ")",
          config.run_log);
    }
    return;
  }

  if (foreign_cupti) {
    Warn(
        "libcupti was loaded before gpuwatch, which the CUDA driver loaded alone "
        "(CUDA_INJECTION64_PATH): if a profiler in this process uses CUPTI's activity records, "
        "its records or gpuwatch's copy timings may be lost; under `gpuwatch run` or "
        "LD_PRELOAD both work");
  }
  // The tables: up to kMaxStacks distinct stacks in at most kMaxStackBytes.
  // Leaked on purpose, as the agent is.
  if (config.depth > 0) {
    InitUnwinder();
    UseCfiUnwinder(config.cfi_unwind);
    RefreshToolModules();
  }
  std::string warning;
  // Set up whole before it is published (current_session.h).
  auto* session = new Session(std::move(config), &warning, &ProcessPhases());
  if (!warning.empty()) Warn("%s", warning.c_str());
  if (const std::string notice = NvtxNotice(); !notice.empty()) Warn("%s", notice.c_str());
  if (session->stacks() != nullptr) {
    // Python frames too, in a CPython process: the table is the Session's.
    if (session->config().python && InitPythonStacks()) session->stacks()->EnablePythonFrames();
    // What the attaching thread's first capture would do, done now: with
    // LD_PRELOAD that is before main(), not in the program's first CUDA
    // call. Its stack bounds (the main thread's come from reading all of
    // /proc/self/maps: milliseconds under PyTorch). The stack table's first
    // chunk is mapped by gpuwatch's thread, below.
    PrimeStackBounds();
  }
  if (session->events().traced()) {
    // Activity records are stamped on CUPTI's clock: measure its offset from
    // the tracker's once. Without it copies and kernels are not traced.
    uint64_t gpu_now = 0;
    if (agent.attach.cupti.GetTimestamp != nullptr &&
        agent.attach.cupti.GetTimestamp(&gpu_now) == CUPTI_SUCCESS) {
      session->SetGpuClock(gpu_now);
    } else {
      agent.attach.cupti.GetTimestamp = nullptr;
    }
  }
  if (!session->LoadSuppressions(&error)) Warn("%s; nothing is suppressed", error.c_str());
  if (std::strcmp(mode, "injection") == 0) {
    // Attached inside cuInit, which the runtime runs at the start of the
    // program's first call, before that call's ENTER callback: the call is
    // seen whole, but it started before the attach.
    session->events().FirstCallUnobserved();
  }
  // Before anything that reads it is enabled: activity records, callbacks.
  PublishSession(session);
  ApplyPauseBeforeAttach(agent);
  agent.attach.attach_mode = mode;
  agent.attach.command = ReadCommandLine();
  agent.attach.output_path = AbsolutePath(ExpandOutputPattern(
      agent.config().output, getpid(), HostName(),
      RankFromEnvironment([](const char* n) { return std::getenv(n); })));  // NOLINT
  char cwd[PATH_MAX];
  agent.attach.attach_dir = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  CallbackHooks hooks;
  hooks.depth = agent.config().depth;
  hooks.on_oom = &OnOutOfMemory;
  hooks.on_context_destroy = &OnContextDestroy;
  hooks.on_first_call = &OnFirstCall;
  hooks.mapped_size = &MappedSize;
  hooks.get_device_id = agent.attach.cupti.GetDeviceId;
  hooks.get_graph_node_id = agent.attach.cupti.GetGraphNodeId;
  // Activity first, so that no copy is registered waiting for a record that
  // will never come.
  agent.attach.activity = EnableActivity(agent.attach.cupti, agent.config().kernel_timing, &error);
  if (!agent.attach.activity)
    Warn("%s; copies are counted without timing or host memory kinds", error.c_str());
  hooks.copy_activity = agent.attach.activity;
  SetCallbackHooks(hooks);
  if (!EnableCallbacks(agent.attach.cupti, agent.attach.subscriber, &error)) {
    Warn("profiling is off: %s", error.c_str());
    MarkNotRecording(error, agent.config().run_log);
    agent.attach.cupti.Unsubscribe(agent.attach.subscriber);
    PublishSession(nullptr);  // nothing records into it (NVTX's memory extension, activity)
    return;
  }
  InstallForkHandlers();
  if (agent.config().exitcode != 0) RegisterExitStatusHandler();  // before the report's handler
  agent.active.store(true);
  ApplyPauseBeforeAttach(agent);  // one that came while attaching
  // The background thread polls the request pipe and the live socket.
  if (!MakeRequestPipe(agent)) {
    Warn(
        "cannot create a pipe (%s); no report is written when a signal ends the process, "
        "snapshots on a signal are off, and out-of-memory and context reports are written at "
        "exit",
        std::strerror(errno));
  }
  InstallFatalSignalHandlers(agent.config().snapshot_signal, &WriteSignalReport,
                             agent.background.request_pipe[1]);
  OpenLiveSocket(agent);
  if (StartBackgroundThread(agent)) InstallSnapshotSignal(agent);
  // The stack table's first chunk (64 KiB, faulted in as it is mapped):
  // gpuwatch's thread maps it in its first round, beside the program, as it
  // maps every next one (a capture that comes first maps its own, and the
  // thread's is given back). Without that thread, here, before the first
  // capture.
  if (!agent.background.running.load(std::memory_order_acquire) && session->stacks() != nullptr) {
    session->stacks()->Prepare();
  }
  // Injection runs inside cuInit, within the program's first CUDA call: what
  // the first-call hook does (the exit handler, the "cuda" line; the rest on
  // the background thread, started just above) is done now, since
  // first_call_ns is set above and that call's ENTER (if any: a program may
  // call cuInit itself, which has none) does not run it again. The preload
  // constructor waits for that call.
  if (std::strcmp(mode, "injection") == 0) OnFirstCall();
}

// Attaches once, whichever entry point comes first; the first caller's mode
// is the one recorded (std::call_once passes it to DoAttach, with no shared
// variable written before).
std::once_flag g_once;

void Attach(const char* mode) {
  std::call_once(g_once, [mode] { DoAttach(mode); });
}

bool EnvIsTrue(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): constructor
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 ||
                          std::strcmp(v, "yes") == 0 || std::strcmp(v, "on") == 0);
}

namespace {
// 0; -1 when gpuwatch is disabled. Held until the attach when it comes before.
int SetPaused(bool paused) {
  static const bool disabled = EnvIsTrue("GPUWATCH_DISABLE");
  if (disabled) return -1;
  Agent& agent = GetAgent();
  if (!agent.active.load()) {
    g_paused_before_attach.store(paused ? 1 : 0);
    // The attach applies it, unless it became active meanwhile: then here.
    if (!agent.active.load()) return 0;
    g_paused_before_attach.store(-1);
  }
  agent.events().Paused(paused);
  return 0;
}
}  // namespace

// NVTX's entry points hand NVTX to the chained tool alone: gpuwatch is
// disabled or GPUWATCH_NVTX=0.
bool NvtxLeftToOthers() {
  return EnvIsTrue("GPUWATCH_DISABLE") ||
         NvtxSwitchedOff(std::getenv("GPUWATCH_NVTX"));  // NOLINT(concurrency-mt-unsafe)
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
  g_preloaded.store(true);
  // Under `gpuwatch run`: a process image began (after an exec, the pid's
  // earlier image is gone, and with it any report it had not written).
  if (const char* log = std::getenv("GPUWATCH_RUN_LOG")) {  // NOLINT(concurrency-mt-unsafe)
    AppendRunLog(log, "start", "");
  }

  // As early as possible: see OnExitStatus. The value is validated at attach.
  const char* exitcode = std::getenv("GPUWATCH_EXITCODE");  // NOLINT(concurrency-mt-unsafe)
  if (exitcode != nullptr && *exitcode != '\0' && std::strcmp(exitcode, "0") != 0) {
    RegisterExitStatusHandler();
  }
  // NVTX ranges as phases, unless GPUWATCH_NVTX=0.
  if (!NvtxSwitchedOff(std::getenv("GPUWATCH_NVTX"))) PointNvtxAtSelf(self);  // NOLINT
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

// Called by each NVTX instance on its first NVTX call when
// NVTX_INJECTION64_PATH names this library (interpose/nvtx/nvtx.h). Disabled, or
// with GPUWATCH_NVTX=0, only the tool it chains to is initialized.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(uint32_t)) {
  if (gpuwatch::NvtxLeftToOthers()) return gpuwatch::InitializeNvtxChainOnly(get_export_table);
  return gpuwatch::InitializeNvtx(get_export_table);
}

// Called by each NVTX instance for each extension module it initializes
// (the memory extension: nvtx_mem.cc), from the library NVTX_INJECTION64_PATH
// names.
__attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(void* module_info) {
  if (gpuwatch::NvtxLeftToOthers()) return gpuwatch::InitializeNvtxExtensionChainOnly(module_info);
  return gpuwatch::InitializeNvtxExtension(module_info);
}

const char* gpuwatch_version(void) { return gpuwatch::kGpuwatchVersion; }

int gpuwatch_phase_push(const char* name) {
  static const bool disabled = gpuwatch::EnvIsTrue("GPUWATCH_DISABLE");
  if (disabled) return -1;
  gpuwatch::PushPhase(name != nullptr ? name : "(unnamed)");
  return 0;
}

int gpuwatch_phase_pop(void) { return gpuwatch::PopPhase() ? 0 : -1; }

int gpuwatch_is_active(void) { return gpuwatch::GetAgent().active.load() ? 1 : 0; }

int gpuwatch_not_recording(char* why, size_t size) {
  gpuwatch::Agent& agent = gpuwatch::GetAgent();
  if (agent.active.load()) {
    const gpuwatch::ScopedInsideGpuwatch inside;
    gpuwatch::NoticeDetach(agent);
  }
  return gpuwatch::NotRecordingReason(why, size) ? 1 : 0;
}

int gpuwatch_mark(const char* label) {
  gpuwatch::Agent& agent = gpuwatch::GetAgent();
  if (!agent.active.load()) return -1;
  const gpuwatch::ScopedInsideGpuwatch inside;
  const std::unique_lock<std::mutex> kept(agent.mark_scan_mu, std::try_to_lock);
  std::vector<std::pair<uint32_t, uint64_t>> fresh;
  agent.events().Marked(label, kept.owns_lock() ? &agent.mark_scan : &fresh);
  return 0;
}

int gpuwatch_pause(void) { return gpuwatch::SetPaused(true); }

int gpuwatch_resume(void) { return gpuwatch::SetPaused(false); }

int gpuwatch_live(const char* kind, int device, uint64_t* bytes, uint64_t* count) {
  if (bytes != nullptr) *bytes = 0;
  if (count != nullptr) *count = 0;
  gpuwatch::Agent& agent = gpuwatch::GetAgent();
  if (!agent.active.load()) return -1;
  // The kinds asked for, a bit per MemKind: every device kind, both host
  // kinds, or one kind by its report name.
  uint32_t kinds = 0;
  if (kind == nullptr || *kind == '\0') {
    kinds = gpuwatch::kDeviceKinds;
  } else if (std::strcmp(kind, "host") == 0) {
    kinds = gpuwatch::kHostKinds;
  } else {
    for (int k = 0; k < gpuwatch::kNumMemKinds; ++k) {
      if (std::strcmp(kind, gpuwatch::MemKindName(static_cast<gpuwatch::MemKind>(k))) == 0)
        kinds |= 1u << k;
    }
  }
  if (kinds == 0) return -1;
  const gpuwatch::ScopedInsideGpuwatch inside;
  const gpuwatch::Tracker::LiveFigures live = agent.events().Live(kinds, device);
  if (bytes != nullptr) *bytes = live.bytes;
  if (count != nullptr) *count = live.count;
  return 0;
}

uint64_t gpuwatch_point(void) {
  gpuwatch::Agent& agent = gpuwatch::GetAgent();
  // Before gpuwatch is active (no CUDA call yet): the start, before every
  // allocation it will record.
  const gpuwatch::Tracker::Point p =
      agent.active.load() ? agent.events().NewPoint() : gpuwatch::Tracker::kStart;
  // The handle: the millisecond above, the generation (never 0) below.
  return uint64_t{p.time_ms} << 32 | (p.generation & 0xffffffffu);
}

long gpuwatch_live_since(uint64_t point, char* json, size_t size) {
  gpuwatch::Agent& agent = gpuwatch::GetAgent();
  if (!agent.active.load() || point == 0) return -1;
  const gpuwatch::ScopedInsideGpuwatch inside;
  std::string text;
  try {
    text = gpuwatch::LiveSince({point & 0xffffffffu, static_cast<uint32_t>(point >> 32)});
  } catch (const std::exception& e) {  // out of memory: the caller gets -1, not an exception
    gpuwatch::Warn("gpuwatch_live_since: %s", e.what());
    return -1;
  }
  if (json != nullptr && size > text.size()) std::memcpy(json, text.c_str(), text.size() + 1);
  return static_cast<long>(text.size());
}

int gpuwatch_snapshot(const char* label) {
  if (!gpuwatch::GetAgent().active.load()) return -1;
  const gpuwatch::ScopedInsideGpuwatch inside;
  return gpuwatch::WriteSnapshot(label);
}

}  // extern "C"
