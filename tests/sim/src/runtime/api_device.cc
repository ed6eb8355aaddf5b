// Exported runtime API: devices, streams, events, errors, versions and driver entry points.
#include <cstring>

#include "common/error_names.h"
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

cudaError_t DeviceProperties(cudaDeviceProp* prop, int device) {
  const DriverApi& d = Drv();
  if (prop == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  if (device < 0 || device >= d.device_count) return cudaErrorInvalidDevice;
  Quiet quiet;  // the real runtime caches these at initialisation
  std::memset(prop, 0, sizeof(*prop));
  d.cuDeviceGetName(prop->name, sizeof(prop->name), device);
  CUuuid uuid{};
  d.cuDeviceGetUuid_v2(&uuid, device);
  std::memcpy(prop->uuid.bytes, uuid.bytes, sizeof(uuid.bytes));
  d.cuDeviceTotalMem_v2(&prop->totalGlobalMem, device);
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    d.cuDeviceGetAttribute(&v, a, device);
    return v;
  };
  prop->sharedMemPerBlock =
      static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  prop->memPitch = 2147483647;
  prop->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  prop->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  prop->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  prop->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  prop->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  prop->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  prop->totalConstMem = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY));
  prop->textureAlignment = 512;
  prop->texturePitchAlignment = 32;
  prop->sharedMemPerMultiprocessor =
      static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  // The int members, each the driver's device attribute of the same meaning.
  struct IntMember {
    int cudaDeviceProp::*member;
    CUdevice_attribute attribute;
  };
  using P = cudaDeviceProp;
  static constexpr IntMember kInts[] = {
      {&P::regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
      {&P::warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
      {&P::maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {&P::major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&P::minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&P::multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&P::canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY},
      {&P::concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
      {&P::pciBusID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
      {&P::asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
      {&P::unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
      {&P::memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
      {&P::l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
      {&P::maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
      {&P::streamPrioritiesSupported, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED},
      {&P::regsPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
      {&P::managedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY},
      {&P::concurrentManagedAccess, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS},
      {&P::cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH},
      {&P::hostRegisterSupported, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED},
      {&P::memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
  };
  for (const auto& [member, a] : kInts) prop->*member = attr(a);
  prop->hostNumaId = -1;
  return cudaSuccess;
}

#define GWSIM_CUDA_ERRORS(X)                                                                       \
  X(cudaSuccess, "no error")                                                                       \
  X(cudaErrorInvalidValue, "invalid argument")                                                     \
  X(cudaErrorMemoryAllocation, "out of memory")                                                    \
  X(cudaErrorInitializationError, "initialization error")                                          \
  X(cudaErrorMissingConfiguration, "__global__ function call is not configured")                   \
  X(cudaErrorInvalidPitchValue, "invalid pitch argument")                                          \
  X(cudaErrorInvalidSymbol, "invalid device symbol")                                               \
  X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                          \
  X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version")   \
  X(cudaErrorInvalidDeviceFunction, "invalid device function")                                     \
  X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                       \
  X(cudaErrorInvalidDevice, "invalid device ordinal")                                              \
  X(cudaErrorDeviceUninitialized, "invalid device context")                                        \
  X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                     \
  X(cudaErrorSymbolNotFound, "named symbol not found")                                             \
  X(cudaErrorNotReady, "device not ready")                                                         \
  X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                           \
  X(cudaErrorHostMemoryAlreadyRegistered,                                                          \
    "part or all of the requested memory range is already mapped")                                 \
  X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
  X(cudaErrorNotSupported, "operation not supported")                                              \
  X(cudaErrorNotPermitted, "operation not permitted")                                              \
  X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")         \
  X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture")  \
  X(cudaErrorStreamCaptureMerge,                                                                   \
    "operation would result in a merge of separate capture sequences")                             \
  X(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began")       \
  X(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                          \
  X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")    \
  X(cudaErrorStreamCaptureImplicit,                                                                \
    "operation would make the legacy stream depend on a capturing blocking stream")                \
  X(cudaErrorCapturedEvent,                                                                        \
    "operation not permitted on an event last recorded in a capturing stream")                     \
  X(cudaErrorStreamCaptureWrongThread,                                                             \
    "attempt to terminate a thread-local capture sequence from another thread")                    \
  X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                           \
  X(cudaErrorLaunchFailure, "unspecified launch failure")                                          \
  X(cudaErrorUnknown, "unknown error")

GWSIM_ERROR_NAME_AND_STRING(cudaError_t, GWSIM_CUDA_ERRORS, "unrecognized error code")

cudaError_t EntryPoint(const char* symbol, void** funcPtr, int version, unsigned long long flags,
                       cudaDriverEntryPointQueryResult* status, bool per_thread) {
  const DriverApi& d = Drv();
  if (!d.ok) return cudaErrorInsufficientDriver;
  if (symbol == nullptr || funcPtr == nullptr) return cudaErrorInvalidValue;
  cuuint64_t cu_flags = flags;
  if (per_thread && (cu_flags & (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) == 0) {
    cu_flags |= CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  }
  CUdriverProcAddressQueryResult cu_status{};
  const CUresult r = d.cuGetProcAddress_v2(symbol, funcPtr, version, cu_flags, &cu_status);
  if (status != nullptr) *status = static_cast<cudaDriverEntryPointQueryResult>(cu_status);
  // As documented, a missing symbol is reported through the status, not the error.
  return r == CUDA_ERROR_NOT_FOUND ? cudaSuccess : ToCudaError(r);
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Devices

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  return TraceRuntime(GWSIM_RT(cudaGetDeviceCount, v3020),
                      GWSIM_RT_PARAMS(cudaGetDeviceCount, v3020){count}, [&] {
                        if (count == nullptr) return cudaErrorInvalidValue;
                        *count = 0;
                        const cudaError_t e = WithDriver([&] { return CUDA_SUCCESS; });
                        if (e == cudaSuccess) *count = Drv().device_count;
                        return e;
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device) {
  return TraceRuntime(GWSIM_RT(cudaSetDevice, v3020), GWSIM_RT_PARAMS(cudaSetDevice, v3020){device},
                      [&] { return SetCurrentDevice(device); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  return TraceRuntime(GWSIM_RT(cudaGetDevice, v3020), GWSIM_RT_PARAMS(cudaGetDevice, v3020){device},
                      [&] {
                        if (device == nullptr) return cudaErrorInvalidValue;
                        const cudaError_t e = WithDriver([&] { return CUDA_SUCCESS; });
                        if (e == cudaSuccess) *device = CurrentDevice();
                        return e;
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaSetDeviceFlags, v3020),
                      GWSIM_RT_PARAMS(cudaSetDeviceFlags, v3020){flags}, [&] {
                        return WithDriver([&] {
                          Quiet quiet;
                          return Drv().cuDevicePrimaryCtxSetFlags_v2(CurrentDevice(), flags);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int* flags) {
  return TraceRuntime(GWSIM_RT(cudaGetDeviceFlags, v7000),
                      GWSIM_RT_PARAMS(cudaGetDeviceFlags, v7000){flags}, [&] {
                        if (flags == nullptr) return cudaErrorInvalidValue;
                        return WithDriver([&] {
                          Quiet quiet;
                          int active = 0;
                          return Drv().cuDevicePrimaryCtxGetState(CurrentDevice(), flags, &active);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp* prop,
                                                           int device) {
  return TraceRuntime(GWSIM_RT(cudaGetDeviceProperties, v12000),
                      GWSIM_RT_PARAMS(cudaGetDeviceProperties, v12000){prop, device},
                      [&] { return DeviceProperties(prop, device); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr,
                                                          int device) {
  return TraceRuntime(GWSIM_RT(cudaDeviceGetAttribute, v5000),
                      GWSIM_RT_PARAMS(cudaDeviceGetAttribute, v5000){value, attr, device}, [&] {
                        return WithDriver([&] {
                          Quiet quiet;
                          return Drv().cuDeviceGetAttribute(
                              value, static_cast<CUdevice_attribute>(attr), device);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  return TraceRuntime(
      GWSIM_RT(cudaDeviceGetPCIBusId, v4010),
      GWSIM_RT_PARAMS(cudaDeviceGetPCIBusId, v4010){pciBusId, len, device},
      [&] { return WithDriver([&] { return Drv().cuDeviceGetPCIBusId(pciBusId, len, device); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int* leastPriority,
                                                                    int* greatestPriority) {
  return TraceRuntime(
      GWSIM_RT(cudaDeviceGetStreamPriorityRange, v5050),
      GWSIM_RT_PARAMS(cudaDeviceGetStreamPriorityRange, v5050){leastPriority, greatestPriority},
      [&] {
        return WithContext(
            [&] { return Drv().cuCtxGetStreamPriorityRange(leastPriority, greatestPriority); });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* canAccessPeer, int device,
                                                           int peerDevice) {
  return TraceRuntime(
      GWSIM_RT(cudaDeviceCanAccessPeer, v4000),
      GWSIM_RT_PARAMS(cudaDeviceCanAccessPeer, v4000){canAccessPeer, device, peerDevice}, [&] {
        return WithDriver(
            [&] { return Drv().cuDeviceCanAccessPeer(canAccessPeer, device, peerDevice); });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaDeviceEnablePeerAccess, v4000),
                      GWSIM_RT_PARAMS(cudaDeviceEnablePeerAccess, v4000){peerDevice, flags}, [&] {
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        CUcontext peer = nullptr;
                        if (cudaError_t e = EnsurePrimary(peerDevice, &peer); e != cudaSuccess) {
                          return e;
                        }
                        return ToCudaError(Drv().cuCtxEnablePeerAccess(peer, flags));
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  return TraceRuntime(GWSIM_RT(cudaDeviceSynchronize, v3020), NoParams{}, [&] {
    return WithContext([&] { return Drv().cuCtxSynchronize_v2(nullptr); });
  });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceReset(void) {
  return TraceRuntime(GWSIM_RT(cudaDeviceReset, v3020), NoParams{},
                      [&] { return ResetCurrentDevice(); });
}

// Streams

GWSIM_EXPORT cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  return TraceRuntime(
      GWSIM_RT(cudaStreamCreate, v3020), GWSIM_RT_PARAMS(cudaStreamCreate, v3020){pStream},
      [&] { return WithContext([&] { return Drv().cuStreamCreate(pStream, 0); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream,
                                                             unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaStreamCreateWithFlags, v5000),
                      GWSIM_RT_PARAMS(cudaStreamCreateWithFlags, v5000){pStream, flags}, [&] {
                        return WithContext([&] { return Drv().cuStreamCreate(pStream, flags); });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t* pStream,
                                                                unsigned int flags, int priority) {
  return TraceRuntime(
      GWSIM_RT(cudaStreamCreateWithPriority, v5050),
      GWSIM_RT_PARAMS(cudaStreamCreateWithPriority, v5050){pStream, flags, priority}, [&] {
        return WithContext(
            [&] { return Drv().cuStreamCreateWithPriority(pStream, flags, priority); });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  return TraceRuntime(
      GWSIM_RT(cudaStreamDestroy, v5050), GWSIM_RT_PARAMS(cudaStreamDestroy, v5050){stream},
      [&] { return WithContext([&] { return Drv().cuStreamDestroy_v2(stream); }); });
}

GWSIM_RT_PER_THREAD_TWINS(cudaStreamSynchronize, v3020, cudaStreamSynchronize_ptsz, v7000,
                          (cudaStream_t stream), (stream), {
                            return InContext(per_thread, Drv().cuStreamSynchronize,
                                             Drv().cuStreamSynchronize_ptsz, stream);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamQuery, v3020, cudaStreamQuery_ptsz, v7000,
                          (cudaStream_t stream), (stream), {
                            return InContext(per_thread, Drv().cuStreamQuery,
                                             Drv().cuStreamQuery_ptsz, stream);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamGetPriority, v5050, cudaStreamGetPriority_ptsz, v7000,
                          (cudaStream_t hStream, int* priority), (hStream, priority), {
                            return InContext(per_thread, Drv().cuStreamGetPriority,
                                             Drv().cuStreamGetPriority_ptsz, hStream, priority);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamWaitEvent, v3020, cudaStreamWaitEvent_ptsz, v7000,
                          (cudaStream_t stream, cudaEvent_t event, unsigned int flags),
                          (stream, event, flags), {
                            return InContext(per_thread, Drv().cuStreamWaitEvent,
                                             Drv().cuStreamWaitEvent_ptsz, stream, event, flags);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamGetId, v12000, cudaStreamGetId_ptsz, v12000,
                          (cudaStream_t hStream, unsigned long long* streamId), (hStream, streamId),
                          {
                            return InContext(per_thread, Drv().cuStreamGetId,
                                             Drv().cuStreamGetId_ptsz, hStream, streamId);
                          })

// Events

GWSIM_RT_TRACED(cudaEventCreate, v3020, false, (cudaEvent_t * event), (event),
                { return WithContext([&] { return Drv().cuEventCreate(event, 0); }); })

GWSIM_RT_TRACED(cudaEventCreateWithFlags, v3020, false, (cudaEvent_t * event, unsigned int flags),
                (event, flags),
                { return WithContext([&] { return Drv().cuEventCreate(event, flags); }); })

GWSIM_RT_PER_THREAD_TWINS(cudaEventRecord, v3020, cudaEventRecord_ptsz, v7000,
                          (cudaEvent_t event, cudaStream_t stream), (event, stream), {
                            return InContext(per_thread, Drv().cuEventRecord,
                                             Drv().cuEventRecord_ptsz, event, stream);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaEventRecordWithFlags, v11010, cudaEventRecordWithFlags_ptsz, v11010,
                          (cudaEvent_t event, cudaStream_t stream, unsigned int flags),
                          (event, stream, flags), {
                            return WithContext([&] {
                              return (per_thread
                                          ? Drv().cuEventRecordWithFlags_ptsz
                                          : Drv().cuEventRecordWithFlags)(event, stream, flags);
                            });
                          })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  return TraceRuntime(GWSIM_RT(cudaEventQuery, v3020),
                      GWSIM_RT_PARAMS(cudaEventQuery, v3020){event},
                      [&] { return WithContext([&] { return Drv().cuEventQuery(event); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  return TraceRuntime(GWSIM_RT(cudaEventSynchronize, v3020),
                      GWSIM_RT_PARAMS(cudaEventSynchronize, v3020){event},
                      [&] { return WithContext([&] { return Drv().cuEventSynchronize(event); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                                        cudaEvent_t end) {
  return TraceRuntime(
      GWSIM_RT(cudaEventElapsedTime, v12080),
      GWSIM_RT_PARAMS(cudaEventElapsedTime, v12080){ms, start, end},
      [&] { return WithContext([&] { return Drv().cuEventElapsedTime_v2(ms, start, end); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  return TraceRuntime(GWSIM_RT(cudaEventDestroy, v3020),
                      GWSIM_RT_PARAMS(cudaEventDestroy, v3020){event},
                      [&] { return WithContext([&] { return Drv().cuEventDestroy_v2(event); }); });
}

// Errors and versions

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetLastError(void) {
  return TraceRuntime<false>(GWSIM_RT(cudaGetLastError, v3020), NoParams{},
                             [&] { return TakeLastError(); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  return TraceRuntime<false>(GWSIM_RT(cudaPeekAtLastError, v3020), NoParams{},
                             [&] { return PeekLastError(); });
}

GWSIM_EXPORT const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  return TraceRuntime(GWSIM_RT(cudaGetErrorString, v3020),
                      GWSIM_RT_PARAMS(cudaGetErrorString, v3020){error},
                      [&] { return ErrorString(error); });
}

GWSIM_EXPORT const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  return TraceRuntime(GWSIM_RT(cudaGetErrorName, v6050),
                      GWSIM_RT_PARAMS(cudaGetErrorName, v6050){error},
                      [&] { return ErrorName(error); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* runtimeVersion) {
  return TraceRuntime(GWSIM_RT(cudaRuntimeGetVersion, v3020),
                      GWSIM_RT_PARAMS(cudaRuntimeGetVersion, v3020){runtimeVersion}, [&] {
                        if (runtimeVersion == nullptr) return cudaErrorInvalidValue;
                        *runtimeVersion = kRuntimeVersion;
                        return cudaSuccess;
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDriverGetVersion(int* driverVersion) {
  return TraceRuntime(GWSIM_RT(cudaDriverGetVersion, v3020),
                      GWSIM_RT_PARAMS(cudaDriverGetVersion, v3020){driverVersion}, [&] {
                        if (driverVersion == nullptr) return cudaErrorInvalidValue;
                        *driverVersion = 0;  // documented value when no driver is installed
                        const DriverApi& d = Drv();
                        if (d.ok) {
                          Quiet quiet;
                          d.cuDriverGetVersion(driverVersion);
                        }
                        return cudaSuccess;
                      });
}

// Driver entry points (how PyTorch reaches the VMM API, for example).

GWSIM_RT_PER_THREAD_TWINS(cudaGetDriverEntryPoint, v11030, cudaGetDriverEntryPoint_ptsz, v11030,
                          (const char* symbol, void** funcPtr, unsigned long long flags,
                           enum cudaDriverEntryPointQueryResult* driverStatus),
                          (symbol, funcPtr, flags, driverStatus), {
                            return EntryPoint(symbol, funcPtr, kRuntimeVersion, flags, driverStatus,
                                              per_thread);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaGetDriverEntryPointByVersion, v12050,
                          cudaGetDriverEntryPointByVersion_ptsz, v12050,
                          (const char* symbol, void** funcPtr, unsigned int cudaVersion,
                           unsigned long long flags,
                           enum cudaDriverEntryPointQueryResult* driverStatus),
                          (symbol, funcPtr, cudaVersion, flags, driverStatus), {
                            return EntryPoint(symbol, funcPtr, static_cast<int>(cudaVersion), flags,
                                              driverStatus, per_thread);
                          })
