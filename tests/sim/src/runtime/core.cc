#include "runtime/core.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/leaked.h"

// This library's handle for __cxa_atexit (defined by the toolchain's crtbegin).
extern "C" void* __dso_handle;
extern "C" int __cxa_atexit(void (*fn)(void*), void* arg, void* dso);

namespace gwsim::rt {
namespace {

std::atomic<bool> g_loaded{false};
std::atomic<bool> g_initialized{false};

struct DeviceSlot {
  std::atomic<int> retained{0};
  std::atomic<CUcontext> ctx{nullptr};
  std::atomic<uint64_t> generation{0};
};
DeviceSlot g_slots[kMaxDevices];  // trivially destructible: safe during exit

// Per-thread runtime state, on the heap behind a trivially destructible thread_local pointer:
// glibc destroys thread_local objects before it runs atexit handlers, and the teardown handler
// below runs on the exiting thread. A pthread key frees it when another thread exits.
struct ThreadRt {
  int device = 0;
  CUcontext bound = nullptr;
  int bound_device = -1;
  uint64_t bound_generation = 0;
  cudaError_t last_error = cudaSuccess;
  std::vector<LaunchConfig> configs;
};

thread_local ThreadRt* t_rt = nullptr;

void FreeThreadRt(void* state) {
  t_rt = nullptr;
  delete static_cast<ThreadRt*>(state);
}

// Created when the library loads and deleted when it unloads: a key whose
// destructor outlived a dlclose'd runtime would call unmapped code when a
// thread that used it exits.
pthread_key_t g_thread_key;
bool g_thread_key_ok = false;

__attribute__((constructor)) void CreateThreadKey() {
  g_thread_key_ok = pthread_key_create(&g_thread_key, FreeThreadRt) == 0;
}

__attribute__((destructor)) void DeleteThreadKey() {
  if (g_thread_key_ok) pthread_key_delete(g_thread_key);
  g_thread_key_ok = false;
}

ThreadRt& Thr() {
  if (t_rt == nullptr) {
    t_rt = new ThreadRt();
    if (g_thread_key_ok) pthread_setspecific(g_thread_key, t_rt);
  }
  return *t_rt;
}

DriverApi* Load() {
  auto* d = new DriverApi();
  g_loaded.store(true);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return d;
  auto get_config = reinterpret_cast<gwsim_get_config_fn>(dlsym(lib, "gwsim_get_config"));
  d->api_enter = reinterpret_cast<gwsim_api_enter_fn>(dlsym(lib, "gwsim_api_enter"));
  d->api_exit = reinterpret_cast<gwsim_api_exit_fn>(dlsym(lib, "gwsim_api_exit"));
  d->set_quiet = reinterpret_cast<gwsim_set_quiet_fn>(dlsym(lib, "gwsim_set_quiet"));
  d->register_function =
      reinterpret_cast<gwsim_register_function_fn>(dlsym(lib, "gwsim_register_function"));
  d->alloc_variable = reinterpret_cast<gwsim_alloc_variable_fn>(dlsym(lib, "gwsim_alloc_variable"));
  d->cuGetProcAddress_v2 =
      reinterpret_cast<decltype(d->cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
  // Not the simulator's driver: this runtime cannot use it.
  if (get_config == nullptr || d->api_enter == nullptr || d->api_exit == nullptr ||
      d->set_quiet == nullptr || d->register_function == nullptr || d->alloc_variable == nullptr ||
      d->cuGetProcAddress_v2 == nullptr) {
    return d;
  }
  gwsim_config_info info{};
  get_config(&info);
  if (info.fail_mode == GWSIM_FAIL_NO_DRIVER) return d;
  d->device_count = info.device_count;
  d->exit_context_destroy = info.exit_context_destroy != 0;
  bool complete = true;
  const int previous = d->set_quiet(1);
#define X(symbol, name, per_thread)                                                     \
  {                                                                                     \
    void* fn = nullptr;                                                                 \
    CUdriverProcAddressQueryResult status{};                                            \
    d->cuGetProcAddress_v2(name, &fn, kRuntimeVersion,                                  \
                           (per_thread) ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM \
                                        : CU_GET_PROC_ADDRESS_LEGACY_STREAM,            \
                           &status);                                                    \
    d->symbol = reinterpret_cast<decltype(d->symbol)>(fn);                              \
    complete = complete && fn != nullptr;                                               \
  }
#include "runtime/driver_api.inc"
#undef X
  d->set_quiet(previous);
  d->ok = complete;
  return d;
}

}  // namespace

bool InitializesBeforeEnter(uint32_t cbid) {
  if (g_initialized.load(std::memory_order_acquire)) return false;  // nothing left to do
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorString_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorName_v6050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaCreateChannelDesc_v3020:
      return false;
    default:
      return true;
  }
}

cudaError_t EnsureInit() {
  const DriverApi& d = Drv();
  if (!d.ok) return cudaErrorInsufficientDriver;
  if (g_initialized.load(std::memory_order_acquire)) return cudaSuccess;
  CUresult r;
  {
    Quiet quiet;
    r = d.cuInit(0);  // may load CUDA_INJECTION64_PATH and call its InitializeInjection
  }
  if (r != CUDA_SUCCESS) return r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : ToCudaError(r);
  g_initialized.store(true, std::memory_order_release);
  return cudaSuccess;
}

namespace {

// GWSIM_EXIT_CONTEXT_DESTROY=1: releases the primary contexts the runtime holds when the
// process exits (or the runtime is unloaded), which is when a subscriber sees
// CONTEXT_DESTROY_STARTING for them. By default it does nothing: on NVIDIA's driver (580, CUDA
// 13.0) no program's subscriber saw a context destroyed at exit; what dlclose of the runtime
// does there is not known, so tests run both ways. Registered when the library loads, like the
// real runtime's handler. Everything it touches is leaked state, so it is safe after other
// libraries' destructors and when no subscriber is left.
void TearDownAtExit() {
  if (!g_loaded.load() || !g_initialized.load()) return;
  const DriverApi& d = Drv();
  if (!d.ok || !d.exit_context_destroy) return;
  Quiet quiet;
  for (int dev = 0; dev < d.device_count && dev < kMaxDevices; ++dev) {
    if (g_slots[dev].retained.exchange(0) == 1) d.cuDevicePrimaryCtxRelease_v2(dev);
  }
}

void TearDownAtExitOrUnload(void* /*unused*/) { TearDownAtExit(); }

// Bound to this library (its __dso_handle), as glibc does for a library's
// atexit: the handler runs when the library is dlclose'd, or at exit if it
// is still loaded then. Registered through __cxa_atexit directly because
// sanitizers intercept atexit() without the handle and would call the
// handler at exit even after a dlclose had unmapped it.
__attribute__((constructor)) void RegisterTearDown() {
  __cxa_atexit(TearDownAtExitOrUnload, nullptr, &__dso_handle);
}

// Kernels and variables.
struct Variable {
  std::string name;
  size_t size = 0;
  CUdeviceptr address[kMaxDevices] = {};
};
struct ManagedVariable {
  void** host_ptr_address = nullptr;
  std::string name;
  size_t size = 0;
  bool allocated = false;
};
struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, Kernel> by_host;
  std::unordered_map<const void*, Kernel> by_handle;
  std::unordered_map<const void*, Variable*> variables;
  std::unordered_map<void**, std::vector<ManagedVariable>> managed;
  std::vector<Variable*> replaced;  // kept: VariableAddress may still be reading one
};
Registry& Reg() { return Leaked<Registry>(); }

}  // namespace

const DriverApi& Drv() {
  static const DriverApi* const api = Load();
  return *api;
}

Quiet::Quiet() : previous_(Drv().set_quiet(1)) {}
Quiet::~Quiet() { Drv().set_quiet(previous_); }

// The runtime's error for each driver result it passes on; any other is cudaErrorUnknown.
constexpr std::pair<CUresult, cudaError_t> kDriverToRuntimeErrors[] = {
    {CUDA_SUCCESS, cudaSuccess},
    {CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue},
    {CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation},
    {CUDA_ERROR_NOT_INITIALIZED, cudaErrorInitializationError},
    {CUDA_ERROR_NO_DEVICE, cudaErrorNoDevice},
    {CUDA_ERROR_INVALID_DEVICE, cudaErrorInvalidDevice},
    {CUDA_ERROR_INVALID_CONTEXT, cudaErrorDeviceUninitialized},
    {CUDA_ERROR_INVALID_HANDLE, cudaErrorInvalidResourceHandle},
    {CUDA_ERROR_NOT_READY, cudaErrorNotReady},
    {CUDA_ERROR_NOT_FOUND, cudaErrorSymbolNotFound},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cudaErrorHostMemoryAlreadyRegistered},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cudaErrorHostMemoryNotRegistered},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cudaErrorPeerAccessAlreadyEnabled},
    {CUDA_ERROR_NOT_SUPPORTED, cudaErrorNotSupported},
    {CUDA_ERROR_MAP_FAILED, cudaErrorMapBufferObjectFailed},
    {CUDA_ERROR_NOT_PERMITTED, cudaErrorNotPermitted},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cudaErrorStreamCaptureUnsupported},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cudaErrorStreamCaptureInvalidated},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, cudaErrorStreamCaptureMerge},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, cudaErrorStreamCaptureUnmatched},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cudaErrorStreamCaptureUnjoined},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, cudaErrorStreamCaptureIsolation},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cudaErrorStreamCaptureImplicit},
    {CUDA_ERROR_CAPTURED_EVENT, cudaErrorCapturedEvent},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cudaErrorStreamCaptureWrongThread},
    {CUDA_ERROR_ILLEGAL_ADDRESS, cudaErrorIllegalAddress},
    {CUDA_ERROR_LAUNCH_FAILED, cudaErrorLaunchFailure},
};

cudaError_t ToCudaError(CUresult r) {
  for (const auto& [driver, runtime] : kDriverToRuntimeErrors) {
    if (driver == r) return runtime;
  }
  return cudaErrorUnknown;
}

cudaError_t EnsurePrimary(int device, CUcontext* out) {
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  if (device < 0 || device >= d.device_count || device >= kMaxDevices) {
    return cudaErrorInvalidDevice;
  }
  DeviceSlot& slot = g_slots[device];
  if (slot.retained.load(std::memory_order_acquire) == 0) {
    CUcontext ctx = nullptr;
    CUresult r;
    {
      Quiet quiet;
      r = d.cuDevicePrimaryCtxRetain(&ctx, device);  // CONTEXT_CREATED on first use
    }
    if (r != CUDA_SUCCESS) return ToCudaError(r);
    slot.ctx.store(ctx);
    int expected = 0;
    if (!slot.retained.compare_exchange_strong(expected, 1)) {
      Quiet quiet;  // another thread got there first: drop the extra reference
      d.cuDevicePrimaryCtxRelease_v2(device);
    }
  }
  *out = slot.ctx.load();
  return cudaSuccess;
}

cudaError_t EnsureContext() {
  ThreadRt& t = Thr();
  if (t.bound != nullptr && t.bound_device == t.device && t.device < kMaxDevices) {
    const DeviceSlot& slot = g_slots[t.device];
    if (slot.retained.load(std::memory_order_acquire) == 1 &&
        slot.generation.load(std::memory_order_acquire) == t.bound_generation) {
      return cudaSuccess;
    }
  }
  CUcontext ctx = nullptr;
  if (cudaError_t e = EnsurePrimary(t.device, &ctx); e != cudaSuccess) return e;
  {
    Quiet quiet;
    if (CUresult r = Drv().cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) return ToCudaError(r);
  }
  t.bound = ctx;
  t.bound_device = t.device;
  t.bound_generation = g_slots[t.device].generation.load();
  return cudaSuccess;
}

int CurrentDevice() { return Thr().device; }

cudaError_t SetCurrentDevice(int device) {
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  if (device < 0 || device >= Drv().device_count || device >= kMaxDevices) {
    return cudaErrorInvalidDevice;
  }
  Thr().device = device;
  return EnsureContext();  // CUDA 12+: cudaSetDevice initialises the primary context
}

cudaError_t ResetCurrentDevice() {
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  ThreadRt& t = Thr();
  const int device = t.device;
  DeviceSlot& slot = g_slots[device];
  slot.generation.fetch_add(1);
  ForgetVariables(device);
  slot.retained.store(0);
  t.bound = nullptr;
  return ToCudaError(Drv().cuDevicePrimaryCtxReset_v2(device));  // a traced, nested call
}

void SetLastError(cudaError_t e) {
  if (e != cudaSuccess) Thr().last_error = e;
}

cudaError_t TakeLastError() {
  ThreadRt& t = Thr();
  const cudaError_t e = t.last_error;
  // A sticky error (a faulted kernel's) stays: the context is unusable until the process ends.
  if (e != cudaErrorIllegalAddress && e != cudaErrorLaunchFailure) t.last_error = cudaSuccess;
  return e;
}

cudaError_t PeekLastError() { return Thr().last_error; }

CUlaunchConfig ToDriverLaunchConfig(const cudaLaunchConfig_t& config) {
  CUlaunchConfig c{};
  c.gridDimX = config.gridDim.x;
  c.gridDimY = config.gridDim.y;
  c.gridDimZ = config.gridDim.z;
  c.blockDimX = config.blockDim.x;
  c.blockDimY = config.blockDim.y;
  c.blockDimZ = config.blockDim.z;
  c.sharedMemBytes = static_cast<unsigned>(config.dynamicSmemBytes);
  c.hStream = config.stream;
  return c;
}

std::vector<LaunchConfig>& CallConfigurations() { return Thr().configs; }

namespace {

// Looks `key` up in one of the registry's kernel maps, under its lock.
bool FindKernel(std::unordered_map<const void*, Kernel> Registry::*map, const void* key,
                Kernel* out) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  const auto& kernels = reg.*map;
  auto it = kernels.find(key);
  if (it == kernels.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace

bool FindKernelByHostFunction(const void* host_fun, Kernel* out) {
  return FindKernel(&Registry::by_host, host_fun, out);
}

bool FindKernelByHandle(const void* handle, Kernel* out) {
  return FindKernel(&Registry::by_handle, handle, out);
}

void RegisterKernel(const void* host_fun, const char* device_name) {
  const DriverApi& d = Drv();
  // Copied and never freed: the name may live in a library that is unloaded later.
  const char* name = strdup(device_name != nullptr ? device_name : "");
  Kernel k;
  k.name = name;
  k.function = d.ok ? d.register_function(name) : nullptr;
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  reg.by_host[host_fun] = k;
  if (k.function != nullptr) reg.by_handle[k.function] = k;
}

void RegisterVariable(const void* host_var, const char* name, size_t size) {
  auto* v = new Variable();
  v->name = name != nullptr ? name : "";
  v->size = size;
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  Variable*& slot = reg.variables[host_var];
  if (slot != nullptr) reg.replaced.push_back(slot);
  slot = v;
}

void RegisterManagedVariable(void** fat_cubin, void** host_ptr_address, const char* name,
                             size_t size) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  reg.managed[fat_cubin].push_back(
      ManagedVariable{host_ptr_address, name != nullptr ? name : "", size, false});
}

cudaError_t InitManagedVariables(void** fat_cubin) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  std::vector<ManagedVariable> pending;
  Registry& reg = Reg();
  {
    std::lock_guard lock(reg.mu);
    for (ManagedVariable& v : reg.managed[fat_cubin]) {
      if (!v.allocated) {
        v.allocated = true;
        pending.push_back(v);
      }
    }
  }
  for (const ManagedVariable& v : pending) {
    CUdeviceptr p = 0;
    Quiet quiet;
    if (CUresult r = Drv().cuMemAllocManaged(&p, v.size, CU_MEM_ATTACH_GLOBAL); r != CUDA_SUCCESS) {
      return ToCudaError(r);
    }
    std::memset(reinterpret_cast<void*>(p), 0, v.size);  // the initial value is not known here
    *v.host_ptr_address = reinterpret_cast<void*>(p);
  }
  return cudaSuccess;
}

cudaError_t VariableAddress(const void* host_var, CUdeviceptr* address, size_t* size) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  const int device = CurrentDevice();
  Registry& reg = Reg();
  Variable* v = nullptr;
  {
    std::lock_guard lock(reg.mu);
    auto it = reg.variables.find(host_var);
    if (it == reg.variables.end()) return cudaErrorInvalidSymbol;
    v = it->second;
    if (v->address[device] != 0) {
      *address = v->address[device];
      *size = v->size;
      return cudaSuccess;
    }
  }
  // Allocated on first use on each device (like lazy module loading), without our lock held:
  // the allocation produces a MEMORY2 record, which may call the profiler's buffer callbacks.
  CUdeviceptr p = 0;
  if (CUresult r = Drv().alloc_variable(v->name.c_str(), v->size, device, &p); r != CUDA_SUCCESS) {
    return ToCudaError(r);
  }
  std::lock_guard lock(reg.mu);
  if (v->address[device] == 0) v->address[device] = p;  // a racing thread's copy is leaked
  *address = v->address[device];
  *size = v->size;
  return cudaSuccess;
}

void ForgetVariables(int device) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  for (auto& [host, v] : reg.variables) v->address[device] = 0;
}

}  // namespace gwsim::rt
