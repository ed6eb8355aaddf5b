#include "driver/fault.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/leaked.h"
#include "driver/state.h"

namespace gwsim::drv {

namespace {

// GWSIM_FAULT_KERNEL and GWSIM_FAULT_ERROR, read once.
struct FaultConfig {
  const char* kernel = nullptr;  // a substring of the faulting kernel's name; null: none
  CUresult error = CUDA_ERROR_ILLEGAL_ADDRESS;
};

FaultConfig ReadFaultConfig() {
  FaultConfig c;
  const char* kernel = std::getenv("GWSIM_FAULT_KERNEL");
  if (kernel != nullptr && *kernel != '\0') c.kernel = strdup(kernel);
  const char* error = std::getenv("GWSIM_FAULT_ERROR");
  if (error == nullptr || std::strcmp(error, "illegal-address") == 0) return c;
  if (std::strcmp(error, "launch-failure") == 0) {
    c.error = CUDA_ERROR_LAUNCH_FAILED;
  } else {
    std::fprintf(stderr,
                 "gwsim: ignoring GWSIM_FAULT_ERROR='%s' (expected illegal-address or "
                 "launch-failure); using the default\n",
                 error);
  }
  return c;
}

const FaultConfig& Config() {
  static const FaultConfig config = ReadFaultConfig();
  return config;
}

// The contexts a faulting kernel ran on: pending until a synchronizing call surfaces the error,
// sticky from then on. A context is never cleared: the error lasts until the process ends.
struct FaultedContext {
  CUctx_st* ctx = nullptr;
  bool sticky = false;
};
struct Faults {
  std::mutex mu;
  FaultedContext contexts[16];
  int count = 0;
};
Faults& F() { return Leaked<Faults>(); }

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Calls that work on a context whose kernel faulted: they need no work of its to finish
// (errors, versions, devices and their primary contexts, the current context, entry points,
// destroying a context or unloading).
bool UnaffectedCall(const char* name) {
  static constexpr const char* kPrefixes[] = {
      "cuGetError",       "cuInit",          "cuDriverGetVersion", "cuDevice",       "cuGetProc",
      "cuGetExportTable", "cuCtxGetCurrent", "cuCtxSetCurrent",    "cuCtxPush",      "cuCtxPop",
      "cuCtxGetDevice",   "cuCtxDestroy",    "cuModuleUnload",     "cuLibraryUnload"};
  for (const char* prefix : kPrefixes) {
    if (StartsWith(name, prefix)) return true;
  }
  return false;
}

// Calls that wait for the context's work, where an asynchronous error surfaces: synchronize,
// query, a synchronous copy, a free (which synchronizes).
bool SynchronizingCall(const char* name) {
  if (StartsWith(name, "cuCtxSynchronize") || StartsWith(name, "cuStreamSynchronize") ||
      StartsWith(name, "cuEventSynchronize") || StartsWith(name, "cuStreamQuery") ||
      StartsWith(name, "cuEventQuery") || StartsWith(name, "cuMemFree")) {
    return true;
  }
  return StartsWith(name, "cuMemcpy") && std::strstr(name, "Async") == nullptr;
}

}  // namespace

void NoteLaunchFault(CUctx_st* ctx, const char* kernel_name) {
  const char* kernel = Config().kernel;
  if (kernel == nullptr || kernel_name == nullptr || std::strstr(kernel_name, kernel) == nullptr) {
    return;
  }
  Faults& f = F();
  const std::lock_guard lock(f.mu);
  for (int i = 0; i < f.count; ++i) {
    if (f.contexts[i].ctx == ctx) return;  // pending or sticky already
  }
  if (f.count == static_cast<int>(std::size(f.contexts))) return;
  f.contexts[f.count++] = FaultedContext{ctx, false};
  g_fault_launched.store(true, std::memory_order_relaxed);
}

CUresult FaultedCallResult(const char* call_name) {
  if (call_name == nullptr || UnaffectedCall(call_name)) return CUDA_SUCCESS;
  CUctx_st* ctx = CurrentContext();
  Faults& f = F();
  const std::lock_guard lock(f.mu);
  for (int i = 0; i < f.count; ++i) {
    FaultedContext& c = f.contexts[i];
    if (c.ctx != ctx) continue;
    if (!c.sticky && !SynchronizingCall(call_name)) return CUDA_SUCCESS;
    c.sticky = true;
    return Config().error;
  }
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
