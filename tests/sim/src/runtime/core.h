// The fake runtime's core: reaching the driver, lazy initialisation, per-thread state (current
// device, last error, launch configurations), error mapping and API tracing.
#ifndef GWSIM_RUNTIME_CORE_H_
#define GWSIM_RUNTIME_CORE_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/api_frame.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {

inline constexpr int kRuntimeVersion = 13000;
inline constexpr int kMaxDevices = 16;

// The driver, found with dlopen("libcuda.so.1"), entry points through cuGetProcAddress_v2.
struct DriverApi {
  bool ok = false;  // false: no driver (or GWSIM_FAIL=no-driver): cudaErrorInsufficientDriver
  int device_count = 0;
  bool exit_context_destroy = false;  // GWSIM_EXIT_CONTEXT_DESTROY: see TearDownAtExit (core.cc)
  gwsim_api_enter_fn api_enter = nullptr;
  gwsim_api_exit_fn api_exit = nullptr;
  gwsim_set_quiet_fn set_quiet = nullptr;
  gwsim_register_function_fn register_function = nullptr;
  gwsim_alloc_variable_fn alloc_variable = nullptr;
  decltype(&::cuGetProcAddress_v2) cuGetProcAddress_v2 = nullptr;
#define X(symbol, name, per_thread) decltype(&::symbol) symbol = nullptr;
#include "runtime/driver_api.inc"
#undef X
};

// Loaded on first use; never unloaded.
const DriverApi& Drv();

// Suppresses API callbacks for the runtime's own bookkeeping calls into the driver.
class Quiet {
 public:
  Quiet();
  ~Quiet();
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;

 private:
  int previous_ = 0;
};

cudaError_t ToCudaError(CUresult r);

// Loads the driver and runs cuInit once (without a context).
cudaError_t EnsureInit();
// cuInit (once) and the primary context of the calling thread's current device, made current.
cudaError_t EnsureContext();
// The primary context of `device`, retained (not made current).
cudaError_t EnsurePrimary(int device, CUcontext* out);
int CurrentDevice();
cudaError_t SetCurrentDevice(int device);
// cudaDeviceReset: destroys the current device's primary context.
cudaError_t ResetCurrentDevice();

void SetLastError(cudaError_t e);
cudaError_t TakeLastError();
cudaError_t PeekLastError();

// Kernel and variable registry (filled by __cudaRegisterFunction / __cudaRegisterVar).
struct Kernel {
  CUfunction function = nullptr;
  const char* name = nullptr;
};
bool FindKernelByHostFunction(const void* host_fun, Kernel* out);
bool FindKernelByHandle(const void* handle, Kernel* out);
void RegisterKernel(const void* host_fun, const char* device_name);
void RegisterVariable(const void* host_var, const char* name, size_t size);
void RegisterManagedVariable(void** fat_cubin, void** host_ptr_address, const char* name,
                             size_t size);
cudaError_t InitManagedVariables(void** fat_cubin);
// The device address and size of a __device__ variable on the current device.
cudaError_t VariableAddress(const void* host_var, CUdeviceptr* address, size_t* size);
void ForgetVariables(int device);

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_mem = 0;
  cudaStream_t stream = nullptr;
};
std::vector<LaunchConfig>& CallConfigurations();

struct NoParams {};

// Runs a driver call once the calling thread's context is set up, mapping its result.
template <typename Call>
cudaError_t WithContext(Call&& call) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  return ToCudaError(call());
}

// Runs the driver entry point `legacy`, or for a per-thread call its _ptsz/_ptds `twin`, with
// `args` once the calling thread's context is set up.
template <typename F, typename... Args>
cudaError_t InContext(bool per_thread, F legacy, F twin, Args... args) {
  return WithContext([&] { return (per_thread ? twin : legacy)(args...); });
}

// Runs a driver call that needs the driver and cuInit, not a context.
template <typename Call>
cudaError_t WithDriver(Call&& call) {
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  return ToCudaError(call());
}

inline CUdeviceptr Dev(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Calls the driver's copy or memset entry point `sync` (its _ptds twin when per_thread) with
// `args`, or when async, `async_call` (its _ptsz twin when per_thread) with `args` and `stream`.
template <typename Sync, typename Async, typename... Args>
CUresult SyncOrAsync(bool async, bool per_thread, cudaStream_t stream, Sync sync, Sync sync_ptds,
                     Async async_call, Async async_ptsz, Args... args) {
  if (!async) return (per_thread ? sync_ptds : sync)(args...);
  return (per_thread ? async_ptsz : async_call)(args..., stream);
}

// The driver's launch configuration for a runtime one (launch attributes are not simulated).
CUlaunchConfig ToDriverLaunchConfig(const cudaLaunchConfig_t& config);

// Whether the calling thread is the driver's host-function thread (api_graph.cc), where CUDA
// may not be called.
bool InHostFunction();

// Whether the runtime has yet to initialise the driver before it reports the call with this
// runtime cbid: until cuInit succeeded, every call but those that need no driver (the last
// error, error strings, versions, channel descriptors).
bool InitializesBeforeEnter(uint32_t cbid);

// Traces one runtime API call (ENTER, body, EXIT with the result). Errors become the
// thread's last error, except for the calls that report it (kRecordsError = false). On the
// host-function thread a call that returns a cudaError_t does not run: cudaErrorNotPermitted.
// As NVIDIA's runtime does, the driver is initialised before the ENTER callback: cuInit loads
// CUDA_INJECTION64_PATH, so a profiler injected there sees the whole first call (its ENTER, the
// context created inside it, its nested driver call and its EXIT). A call whose body fails to
// initialise reports the error from the body, as before.
template <bool kRecordsError = true, typename Params, typename Body>
auto TraceRuntime(uint32_t cbid, const char* name, const Params& params, Body&& body,
                  const char* symbol = nullptr) -> decltype(body()) {
  using Result = decltype(body());
  const DriverApi& d = Drv();
  if (!d.ok) {
    Result r = body();
    if constexpr (kRecordsError && std::is_same_v<Result, cudaError_t>) SetLastError(r);
    return r;
  }
  if (InitializesBeforeEnter(cbid)) (void)EnsureInit();
  gwsim_api_frame frame =
      ApiFrame<NoParams>(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, name, params, symbol);
  d.api_enter(&frame);
  Result result{};
  if constexpr (std::is_same_v<Result, cudaError_t>) {
    result = InHostFunction() ? cudaErrorNotPermitted : body();
  } else {
    result = body();
  }
  if constexpr (kRecordsError && std::is_same_v<Result, cudaError_t>) SetLastError(result);
  frame.return_value = &result;
  d.api_exit(&frame);
  return result;
}

// GWSIM_RT(cudaMalloc, v3020) -> the cbid CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 and the
// function name "cudaMalloc"; GWSIM_RT_PARAMS(cudaMalloc, v3020) -> cudaMalloc_v3020_params.
#define GWSIM_RT(api, version) CUPTI_RUNTIME_TRACE_CBID_##api##_##version, #api
#define GWSIM_RT_PARAMS(api, version) api##_##version##_params

// Defines the call `name` and its per-thread-default-stream twin `twin` (name_ptsz or name_ptds),
// which take the same parameters: each is traced under its own cbid (of its own `version`) with
// its own params struct (filled from `args`), and runs `body` with `per_thread` false or true.
// A trailing argument is TraceRuntime's `symbol` (a launch's kernel name).
#define GWSIM_RT_PER_THREAD_TWINS(name, version, twin, twin_version, params, args, body, ...) \
  GWSIM_RT_TRACED(name, version, false, params, args, body, __VA_ARGS__)                      \
  GWSIM_RT_TRACED(twin, twin_version, true, params, args, body, __VA_ARGS__)
#define GWSIM_RT_TRACED(name, version, per_thread_value, params, args, body, ...)                 \
  GWSIM_EXPORT cudaError_t CUDARTAPI name params {                                                \
    [[maybe_unused]] constexpr bool per_thread = per_thread_value;                                \
    return TraceRuntime(                                                                          \
        GWSIM_RT(name, version),                                                                  \
        GWSIM_RT_PARAMS(name, version){GWSIM_UNPAREN args}, [&] body __VA_OPT__(, ) __VA_ARGS__); \
  }

}  // namespace gwsim::rt

#endif  // GWSIM_RUNTIME_CORE_H_
