// Exported driver API: initialisation, devices, contexts, errors, and the gwsim_* plumbing.
#include <dlfcn.h>
#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "common/error_names.h"
#include "driver/cuda_headers.h"
#include "driver/graph.h"
#include "driver/hang.h"
#include "driver/memory.h"
#include "driver/state.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

// Reads the configuration when the library loads, as the failure modes are documented to be
// fixed at load time.
__attribute__((constructor)) void LoadConfig() { (void)D(); }

uint64_t SelfId() { return static_cast<uint64_t>(pthread_self()); }

// CUDA_INJECTION64_PATH: dlopen it and call InitializeInjection once; every failure is silent,
// as with the real driver.
void LoadInjection() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0') return;
  void* handle = dlopen(path, RTLD_NOW);
  if (handle == nullptr) return;
  using InitFn = int (*)();
  auto init = reinterpret_cast<InitFn>(dlsym(handle, "InitializeInjection"));
  if (init != nullptr) (void)init();
}

std::condition_variable& InitCv() {
  static auto* const cv = new std::condition_variable();
  return *cv;
}

CUresult Init(unsigned flags) {
  if (NoDriver()) return CUDA_ERROR_NO_DEVICE;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = D();
  if (d.init_state.load(std::memory_order_acquire) == 2) return d.init_result;
  {
    std::unique_lock lock(d.init_mu);
    const int state = d.init_state.load();
    if (state == 2) return d.init_result;
    if (state == 1) {
      // The injection library's InitializeInjection calling cuInit again.
      if (d.init_owner.load() == SelfId()) return CUDA_SUCCESS;
      InitCv().wait(lock, [&d] { return d.init_state.load() == 2; });
      return d.init_result;
    }
    d.init_owner.store(SelfId());
    d.init_state.store(1, std::memory_order_release);
  }
  LoadInjection();  // runs user code: no lock held
  const CUresult result = d.devices.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
  {
    std::lock_guard lock(d.init_mu);
    d.init_result = result;
    d.init_state.store(2, std::memory_order_release);
  }
  InitCv().notify_all();
  if (result == CUDA_SUCCESS) EmitResource(CUPTI_CBID_RESOURCE_CU_INIT_FINISHED, nullptr, nullptr);
  return result;
}

// The attributes of the simulated device (a compute capability 9.0 GPU): those not listed are 0,
// and the PCI bus id is the node's device (CUDA_VISIBLE_DEVICES) + 1.
constexpr std::pair<CUdevice_attribute, int> kAttributes[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
    {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    // Sizes in bytes.
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 << 10},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 64 << 10},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 50 << 20},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 << 10},
    // The occupancy model's limits.
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 << 10},
    {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1 << 10},
};

int Attribute(CUdevice_attribute attr, int device) {
  if (attr == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) {
    return D().devices[static_cast<size_t>(device)]->physical + 1;
  }
  for (const auto& [a, value] : kAttributes) {
    if (a == attr) return value;
  }
  return 0;
}

// Error names and strings, for the codes the simulator returns and a few more.
#define GWSIM_CU_ERRORS(X)                                                    \
  X(CUDA_SUCCESS, "no error")                                                 \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                             \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                       \
  X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                         \
  X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")               \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                      \
  X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                     \
  X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")            \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                     \
  X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                           \
  X(CUDA_ERROR_NOT_READY, "device not ready")                                 \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled") \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                  \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,                                \
    "part or all of the requested memory range is "                           \
    "already mapped")                                                         \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,                                    \
    "pointer does not correspond to a registered "                            \
    "memory region")                                                          \
  X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                      \
  X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")               \
  X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                              \
  X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                      \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,                                    \
    "operation not permitted "                                                \
    "when stream is capturing")                                               \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,                                    \
    "operation failed due to a previous "                                     \
    "error during capture")                                                   \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE,                                          \
    "operation would result in a merge of "                                   \
    "separate capture sequences")                                             \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,                                      \
    "capture was not ended in the same "                                      \
    "stream as it began")                                                     \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,                                       \
    "capturing stream has "                                                   \
    "unjoined work")                                                          \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,                                      \
    "dependency created on uncaptured "                                       \
    "work in another stream")                                                 \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                       \
    "operation would make the legacy stream "                                 \
    "depend on a capturing blocking stream")                                  \
  X(CUDA_ERROR_CAPTURED_EVENT,                                                \
    "operation not permitted on an event "                                    \
    "last recorded in a capturing stream")                                    \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,                                   \
    "attempt to terminate a thread-local capture "                            \
    "sequence from another thread")                                           \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")   \
  X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                   \
  X(CUDA_ERROR_UNKNOWN, "unknown error")

// A device query's checks, in NVIDIA's order: the device, then `out`; then *out = value().
template <typename T, typename Value>
CUresult DeviceQuery(CUdevice dev, T* out, Value&& value) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = value();
  return CUDA_SUCCESS;
}

GWSIM_ERROR_NAME_AND_STRING(CUresult, GWSIM_CU_ERRORS, nullptr)

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuInit), cuInit_params{Flags}, [&] { return Init(Flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  return TraceDriver(GWSIM_DRV(cuDriverGetVersion), cuDriverGetVersion_params{driverVersion}, [&] {
    if (NoDriver()) return CUDA_ERROR_NOT_INITIALIZED;
    if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = kDriverVersion;
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  return TraceDriver(GWSIM_DRV(cuDeviceGet), cuDeviceGet_params{device, ordinal},
                     [&] { return DeviceQuery(ordinal, device, [&] { return ordinal; }); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetCount), cuDeviceGetCount_params{count}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = static_cast<int>(D().devices.size());
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetName), cuDeviceGetName_params{name, len, dev}, [&] {
    if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s", "gwsim");
    return CUDA_SUCCESS;
  });
}

// "0000:<bus>:00.0", the bus being CU_DEVICE_ATTRIBUTE_PCI_BUS_ID (the node's device + 1).
GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetPCIBusId), cuDeviceGetPCIBusId_params{pciBusId, len, dev},
                     [&] {
                       if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
                       if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
                       std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0",
                                     D().devices[static_cast<size_t>(dev)]->physical + 1);
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceTotalMem_v2), cuDeviceTotalMem_v2_params{bytes, dev}, [&] {
    return DeviceQuery(dev, bytes, [&] { return D().config.device_memory; });
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                                   CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetAttribute), cuDeviceGetAttribute_params{pi, attrib, dev},
                     [&] { return DeviceQuery(dev, pi, [&] { return Attribute(attrib, dev); }); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetUuid_v2), cuDeviceGetUuid_v2_params{uuid, dev}, [&] {
    if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    char text[sizeof(uuid->bytes) + 1];
    // The node's device's (CUDA_VISIBLE_DEVICES), as NVML's UUID of it.
    std::snprintf(text, sizeof(text), "gwsim-device-%02d",
                  D().devices[static_cast<size_t>(dev)]->physical);
    std::memcpy(uuid->bytes, text, sizeof(uuid->bytes));
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev,
                                                    CUdevice peerDev) {
  return TraceDriver(GWSIM_DRV(cuDeviceCanAccessPeer),
                     cuDeviceCanAccessPeer_params{canAccessPeer, dev, peerDev}, [&] {
                       if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
                       if (CUresult r = CheckDevice(peerDev); r != CUDA_SUCCESS) return r;
                       if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       *canAccessPeer = dev != peerDev ? 1 : 0;
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  return TraceDriver(
      GWSIM_DRV(cuDeviceGetDefaultMemPool), cuDeviceGetDefaultMemPool_params{pool_out, dev},
      [&] { return DeviceQuery(dev, pool_out, [&] { return D().devices[dev]->default_pool; }); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetMemPool), cuDeviceGetMemPool_params{pool, dev}, [&] {
    return DeviceQuery(dev, pool, [&] { return D().devices[dev]->current_pool.load(); });
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  return TraceDriver(GWSIM_DRV(cuDeviceSetMemPool), cuDeviceSetMemPool_params{dev, pool}, [&] {
    if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (!ValidPool(pool) || pool->device != dev) return CUDA_ERROR_INVALID_VALUE;
    D().devices[dev]->current_pool.store(pool);
    return CUDA_SUCCESS;
  });
}

// Contexts

GWSIM_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                             unsigned int flags, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuCtxCreate_v4),
                     cuCtxCreate_v4_params{pctx, ctxCreateParams, flags, dev}, [&] {
                       if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       return CreateContext(dev, flags, pctx);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  return TraceDriver(GWSIM_DRV(cuCtxDestroy_v2), cuCtxDestroy_v2_params{ctx},
                     [&] { return DestroyContext(ctx); });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  return TraceDriver(GWSIM_DRV(cuCtxGetCurrent), cuCtxGetCurrent_params{pctx}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pctx = CurrentContext();
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  return TraceDriver(GWSIM_DRV(cuCtxSetCurrent), cuCtxSetCurrent_params{ctx}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    auto& stack = T().ctx_stack;
    if (ctx == nullptr) {
      if (!stack.empty()) stack.pop_back();
      return CUDA_SUCCESS;
    }
    if (!ValidContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (stack.empty()) {
      stack.push_back(ctx);
    } else {
      stack.back() = ctx;
    }
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  return TraceDriver(GWSIM_DRV(cuCtxPushCurrent_v2), cuCtxPushCurrent_v2_params{ctx}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (ctx == nullptr || !ValidContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    T().ctx_stack.push_back(ctx);
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  return TraceDriver(GWSIM_DRV(cuCtxPopCurrent_v2), cuCtxPopCurrent_v2_params{pctx}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    auto& stack = T().ctx_stack;
    if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != nullptr) *pctx = stack.back();
    stack.pop_back();
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  return TraceDriver(GWSIM_DRV(cuCtxGetDevice), cuCtxGetDevice_params{device}, [&] {
    CUctx_st* ctx = nullptr;
    if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device;
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) {
  return TraceDriver(GWSIM_DRV(cuCtxSynchronize), NoParams{}, [&] {
    CUctx_st* ctx = nullptr;
    if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
    // Not while a capture is open in the context: it would wait for the capture.
    if (auto r = CaptureContextSync(ctx)) return *r;
    WaitIfHung(ContextHangs(ctx));  // a kernel that never ends (hang.h)
    return CUDA_SUCCESS;            // all work is already complete
  });
}

// CUDA 13: the context to synchronise, NULL for the current one (what cudaDeviceSynchronize
// calls; cuGetProcAddress("cuCtxSynchronize") hands it out from CUDA version 13000).
GWSIM_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  return TraceDriver(GWSIM_DRV(cuCtxSynchronize_v2), cuCtxSynchronize_v2_params{ctx}, [&] {
    CUctx_st* c = ctx;
    if (c == nullptr) {
      if (CUresult r = RequireContext(&c); r != CUDA_SUCCESS) return r;
    } else {
      if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
      if (!ValidContext(c) || !c->active.load()) return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (auto r = CaptureContextSync(c)) return *r;
    WaitIfHung(ContextHangs(c));  // a kernel that never ends (hang.h)
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  return TraceDriver(GWSIM_DRV(cuCtxGetId), cuCtxGetId_params{ctx, ctxId}, [&] {
    CUctx_st* c = ctx;
    if (c == nullptr) {
      if (CUresult r = RequireContext(&c); r != CUDA_SUCCESS) return r;
    } else if (!ValidContext(c)) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *ctxId = c->uid.load();
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuCtxEnablePeerAccess),
                     cuCtxEnablePeerAccess_params{peerContext, Flags}, [&] {
                       CUctx_st* ctx = nullptr;
                       if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
                       if (peerContext == nullptr || !ValidContext(peerContext)) {
                         return CUDA_ERROR_INVALID_CONTEXT;
                       }
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDevicePrimaryCtxRetain),
                     cuDevicePrimaryCtxRetain_params{pctx, dev}, [&] {
                       if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       return RetainPrimary(dev, pctx);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDevicePrimaryCtxRelease_v2),
                     cuDevicePrimaryCtxRelease_v2_params{dev},
                     [&] { return ReleasePrimary(dev, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return TraceDriver(GWSIM_DRV(cuDevicePrimaryCtxReset_v2), cuDevicePrimaryCtxReset_v2_params{dev},
                     [&] { return ReleasePrimary(dev, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                         int* active) {
  return TraceDriver(GWSIM_DRV(cuDevicePrimaryCtxGetState),
                     cuDevicePrimaryCtxGetState_params{dev, flags, active}, [&] {
                       if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
                       if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       const CUctx_st* ctx = D().devices[dev]->primary;
                       *flags = ctx->flags;
                       *active = ctx->active.load() ? 1 : 0;
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  return TraceDriver(GWSIM_DRV(cuDevicePrimaryCtxSetFlags_v2),
                     cuDevicePrimaryCtxSetFlags_v2_params{dev, flags}, [&] {
                       if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
                       D().devices[dev]->primary->flags = flags;
                       return CUDA_SUCCESS;
                     });
}

// Errors

GWSIM_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  return TraceDriver(GWSIM_DRV(cuGetErrorString), cuGetErrorString_params{error, pStr}, [&] {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = ErrorString(error);
    return *pStr != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  return TraceDriver(GWSIM_DRV(cuGetErrorName), cuGetErrorName_params{error, pStr}, [&] {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = ErrorName(error);
    return *pStr != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

// The real runtime and CUPTI fetch private tables through this; the simulator has none.
GWSIM_EXPORT CUresult CUDAAPI cuGetExportTable(const void** ppExportTable,
                                               const CUuuid* pExportTableId) {
  if (ppExportTable != nullptr) *ppExportTable = nullptr;
  (void)pExportTableId;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// Private plumbing (gwsim_abi.h)

GWSIM_EXPORT void gwsim_get_config(gwsim_config_info* out) {
  const Driver& d = D();
  out->fail_mode = d.config.fail_mode;
  out->device_count = static_cast<int>(d.devices.size());
  out->node_device_count = d.config.device_count;
  out->cupti_version = d.config.cupti_version != 0 ? static_cast<uint32_t>(d.config.cupti_version)
                                                   : CUPTI_API_VERSION;
  out->exit_context_destroy = d.config.exit_context_destroy ? 1 : 0;
}

GWSIM_EXPORT uint64_t gwsim_now_ns(void) { return Now(); }

GWSIM_EXPORT int gwsim_context_ids(CUcontext ctx, uint32_t* context_id, uint32_t* device_id) {
  if (ctx == nullptr) ctx = CurrentContext();
  if (ctx == nullptr || !ValidContext(ctx)) return -1;
  if (context_id != nullptr) *context_id = ctx->uid.load();
  if (device_id != nullptr) *device_id = static_cast<uint32_t>(ctx->device);
  return 0;
}

GWSIM_EXPORT int gwsim_stream_id(CUcontext ctx, CUstream stream, int per_thread,
                                 uint32_t* stream_id) {
  if (stream_id == nullptr) return -1;
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    if (ctx == nullptr) ctx = CurrentContext();
    if ((ctx == nullptr || !ValidContext(ctx)) && (stream != nullptr || per_thread == 0)) return -1;
    if (per_thread == 0 || stream == CU_STREAM_LEGACY) {
      *stream_id = kLegacyStreamId;
      return 0;
    }
  }
  CUstream_st* resolved = nullptr;
  if (ResolveStream(stream, per_thread != 0, &resolved) != CUDA_SUCCESS) return -1;
  *stream_id = resolved->id;
  return 0;
}

GWSIM_EXPORT CUfunction gwsim_register_function(const char* device_name) {
  auto* f = new CUfunc_st{device_name != nullptr ? device_name : "<unnamed>"};
  Driver& d = D();
  std::lock_guard lock(d.mu);
  d.functions.insert(f);
  return f;
}

GWSIM_EXPORT CUresult gwsim_alloc_variable(const char* name, size_t size, int device,
                                           CUdeviceptr* out) {
  if (CUresult r = CheckDevice(device); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = D().devices[device]->primary;
  if (!ctx->active.load()) return CUDA_ERROR_INVALID_CONTEXT;
  AllocRequest req;
  req.size = size;
  req.origin = Origin::kVariable;
  req.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
  req.name = InternName(name);  // MEMORY2 records hand this pointer to the profiler
  uintptr_t p = 0;
  const CUresult r = Allocate(req, ctx, &p);
  if (r == CUDA_SUCCESS) {
    std::memset(reinterpret_cast<void*>(p), 0, size);  // static storage starts zeroed
    *out = p;
  }
  return r;
}
