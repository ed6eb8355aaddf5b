// Exported runtime API: allocation, pools and pointer queries. Each call nests the driver call
// the real runtime makes (cudaMalloc -> cuMemAlloc_v2, ...), traced in the driver domain.
#include <cstring>

#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

void* Ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

// cudaMemPoolSetAttribute / cudaMemPoolGetAttribute: `call` is the driver's Set or Get.
cudaError_t PoolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value,
                          decltype(&::cuMemPoolSetAttribute) call) {
  return WithContext([&] { return call(pool, static_cast<CUmemPool_attribute>(attr), value); });
}

// Runs `call` (a driver call that writes a device address) in the context and, if it succeeds,
// stores the address as *out; a null `out` is cudaErrorInvalidValue.
template <typename Call>
cudaError_t AddressOut(void** out, Call&& call) {
  if (out == nullptr) return cudaErrorInvalidValue;
  return WithContext([&] {
    CUdeviceptr p = 0;
    const CUresult r = call(&p);
    if (r == CUDA_SUCCESS) *out = Ptr(p);
    return r;
  });
}

cudaError_t MallocAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream,
                        bool per_thread) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  return WithContext([&] {
    const DriverApi& d = Drv();
    CUdeviceptr p = 0;
    CUresult r;
    if (pool == nullptr) {
      r = per_thread ? d.cuMemAllocAsync_ptsz(&p, size, stream)
                     : d.cuMemAllocAsync(&p, size, stream);
    } else {
      r = per_thread ? d.cuMemAllocFromPoolAsync_ptsz(&p, size, pool, stream)
                     : d.cuMemAllocFromPoolAsync(&p, size, pool, stream);
    }
    if (r == CUDA_SUCCESS) *ptr = Ptr(p);
    return r;
  });
}

cudaError_t FreeAsync(void* ptr, cudaStream_t stream, bool per_thread) {
  return WithContext([&] {
    const DriverApi& d = Drv();
    return per_thread ? d.cuMemFreeAsync_ptsz(Dev(ptr), stream)
                      : d.cuMemFreeAsync(Dev(ptr), stream);
  });
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  return TraceRuntime(GWSIM_RT(cudaMalloc, v3020), GWSIM_RT_PARAMS(cudaMalloc, v3020){devPtr, size},
                      [&] {
                        if (devPtr == nullptr) return cudaErrorInvalidValue;
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        if (size == 0) {  // the runtime answers this itself
                          *devPtr = nullptr;
                          return cudaSuccess;
                        }
                        CUdeviceptr p = 0;
                        const CUresult r = Drv().cuMemAlloc_v2(&p, size);
                        if (r == CUDA_SUCCESS) *devPtr = Ptr(p);
                        return ToCudaError(r);
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void** devPtr, size_t* pitch, size_t width,
                                                   size_t height) {
  return TraceRuntime(GWSIM_RT(cudaMallocPitch, v3020),
                      GWSIM_RT_PARAMS(cudaMallocPitch, v3020){devPtr, pitch, width, height}, [&] {
                        if (pitch == nullptr) return cudaErrorInvalidValue;
                        return AddressOut(devPtr, [&](CUdeviceptr* p) {
                          return Drv().cuMemAllocPitch_v2(p, pitch, width, height, 4);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr,
                                                struct cudaExtent extent) {
  return TraceRuntime(
      GWSIM_RT(cudaMalloc3D, v3020), GWSIM_RT_PARAMS(cudaMalloc3D, v3020){pitchedDevPtr, extent},
      [&] {
        if (pitchedDevPtr == nullptr) return cudaErrorInvalidValue;
        return WithContext([&] {
          CUdeviceptr p = 0;
          size_t pitch = 0;
          const CUresult r =
              Drv().cuMemAllocPitch_v2(&p, &pitch, extent.width, extent.height * extent.depth, 4);
          if (r == CUDA_SUCCESS) {
            *pitchedDevPtr = cudaPitchedPtr{Ptr(p), pitch, extent.width, extent.height};
          }
          return r;
        });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void** devPtr, size_t size,
                                                     unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaMallocManaged, v6000),
                      GWSIM_RT_PARAMS(cudaMallocManaged, v6000){devPtr, size, flags}, [&] {
                        return AddressOut(devPtr, [&](CUdeviceptr* p) {
                          return Drv().cuMemAllocManaged(p, size, flags);
                        });
                      });
}

GWSIM_RT_PER_THREAD_TWINS(cudaMallocAsync, v11020, cudaMallocAsync_ptsz, v11020,
                          (void** devPtr, size_t size, cudaStream_t hStream),
                          (devPtr, size, hStream),
                          { return MallocAsync(devPtr, size, nullptr, hStream, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaMallocFromPoolAsync, v11020, cudaMallocFromPoolAsync_ptsz, v11020,
                          (void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
                          (ptr, size, memPool, stream), {
                            if (memPool == nullptr) return cudaErrorInvalidValue;
                            return MallocAsync(ptr, size, memPool, stream, per_thread);
                          })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  return TraceRuntime(GWSIM_RT(cudaFree, v3020), GWSIM_RT_PARAMS(cudaFree, v3020){devPtr}, [&] {
    // cudaFree(NULL) is the classic way to initialise the context.
    if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
    if (devPtr == nullptr) return cudaSuccess;
    return ToCudaError(Drv().cuMemFree_v2(Dev(devPtr)));
  });
}

GWSIM_RT_PER_THREAD_TWINS(cudaFreeAsync, v11020, cudaFreeAsync_ptsz, v11020,
                          (void* devPtr, cudaStream_t hStream), (devPtr, hStream),
                          { return FreeAsync(devPtr, hStream, per_thread); })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
  return TraceRuntime(
      GWSIM_RT(cudaMallocHost, v3020), GWSIM_RT_PARAMS(cudaMallocHost, v3020){ptr, size},
      [&] { return WithContext([&] { return Drv().cuMemHostAlloc(ptr, size, 0); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return TraceRuntime(
      GWSIM_RT(cudaHostAlloc, v3020), GWSIM_RT_PARAMS(cudaHostAlloc, v3020){pHost, size, flags},
      [&] { return WithContext([&] { return Drv().cuMemHostAlloc(pHost, size, flags); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  return TraceRuntime(GWSIM_RT(cudaFreeHost, v3020), GWSIM_RT_PARAMS(cudaFreeHost, v3020){ptr},
                      [&] {
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        if (ptr == nullptr) return cudaSuccess;
                        return ToCudaError(Drv().cuMemFreeHost(ptr));
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  return TraceRuntime(
      GWSIM_RT(cudaHostRegister, v4000), GWSIM_RT_PARAMS(cudaHostRegister, v4000){ptr, size, flags},
      [&] { return WithContext([&] { return Drv().cuMemHostRegister_v2(ptr, size, flags); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaHostUnregister(void* ptr) {
  return TraceRuntime(GWSIM_RT(cudaHostUnregister, v4000),
                      GWSIM_RT_PARAMS(cudaHostUnregister, v4000){ptr},
                      [&] { return WithContext([&] { return Drv().cuMemHostUnregister(ptr); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost,
                                                            unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaHostGetDevicePointer, v3020),
                      GWSIM_RT_PARAMS(cudaHostGetDevicePointer, v3020){pDevice, pHost, flags}, [&] {
                        return AddressOut(pDevice, [&](CUdeviceptr* p) {
                          return Drv().cuMemHostGetDevicePointer_v2(p, pHost, flags);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
  return TraceRuntime(
      GWSIM_RT(cudaMemGetInfo, v3020), GWSIM_RT_PARAMS(cudaMemGetInfo, v3020){free, total},
      [&] { return WithContext([&] { return Drv().cuMemGetInfo_v2(free, total); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI
cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  return TraceRuntime(
      GWSIM_RT(cudaPointerGetAttributes, v4000),
      GWSIM_RT_PARAMS(cudaPointerGetAttributes, v4000){attributes, ptr}, [&] {
        if (attributes == nullptr) return cudaErrorInvalidValue;
        return WithContext([&] {
          unsigned memory_type = 0;
          int device = -2;
          unsigned char managed = 0;
          CUdeviceptr device_pointer = 0;
          void* host_pointer = nullptr;
          CUpointer_attribute which[] = {
              CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
              CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
              CU_POINTER_ATTRIBUTE_HOST_POINTER};
          void* data[] = {&memory_type, &device, &managed, &device_pointer, &host_pointer};
          const CUresult r = Drv().cuPointerGetAttributes(5, which, data, Dev(ptr));
          if (r != CUDA_SUCCESS) return r;
          *attributes = cudaPointerAttributes{};
          if (memory_type == 0) {  // not known to CUDA
            attributes->type = cudaMemoryTypeUnregistered;
            attributes->device = -2;
            attributes->hostPointer = const_cast<void*>(ptr);
            return CUDA_SUCCESS;
          }
          attributes->type = managed != 0                        ? cudaMemoryTypeManaged
                             : memory_type == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost
                                                                 : cudaMemoryTypeDevice;
          attributes->device = device;
          attributes->devicePointer = Ptr(device_pointer);
          attributes->hostPointer = host_pointer;
          return CUDA_SUCCESS;
        });
      });
}

// Pools

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t* memPool,
                                                     const struct cudaMemPoolProps* poolProps) {
  return TraceRuntime(
      GWSIM_RT(cudaMemPoolCreate, v11020),
      GWSIM_RT_PARAMS(cudaMemPoolCreate, v11020){memPool, poolProps}, [&] {
        if (memPool == nullptr || poolProps == nullptr) return cudaErrorInvalidValue;
        return WithContext([&] {
          CUmemPoolProps props{};
          props.allocType = static_cast<CUmemAllocationType>(poolProps->allocType);
          props.handleTypes = static_cast<CUmemAllocationHandleType>(poolProps->handleTypes);
          props.location.type = static_cast<CUmemLocationType>(poolProps->location.type);
          props.location.id = poolProps->location.id;
          props.maxSize = poolProps->maxSize;
          return Drv().cuMemPoolCreate(memPool, &props);
        });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool) {
  return TraceRuntime(GWSIM_RT(cudaMemPoolDestroy, v11020),
                      GWSIM_RT_PARAMS(cudaMemPoolDestroy, v11020){memPool},
                      [&] { return WithContext([&] { return Drv().cuMemPoolDestroy(memPool); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  return TraceRuntime(
      GWSIM_RT(cudaDeviceGetDefaultMemPool, v11020),
      GWSIM_RT_PARAMS(cudaDeviceGetDefaultMemPool, v11020){memPool, device}, [&] {
        return WithContext([&] { return Drv().cuDeviceGetDefaultMemPool(memPool, device); });
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  return TraceRuntime(
      GWSIM_RT(cudaDeviceGetMemPool, v11020),
      GWSIM_RT_PARAMS(cudaDeviceGetMemPool, v11020){memPool, device},
      [&] { return WithContext([&] { return Drv().cuDeviceGetMemPool(memPool, device); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  return TraceRuntime(
      GWSIM_RT(cudaMemPoolTrimTo, v11020),
      GWSIM_RT_PARAMS(cudaMemPoolTrimTo, v11020){memPool, minBytesToKeep},
      [&] { return WithContext([&] { return Drv().cuMemPoolTrimTo(memPool, minBytesToKeep); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool,
                                                           enum cudaMemPoolAttr attr, void* value) {
  return TraceRuntime(GWSIM_RT(cudaMemPoolSetAttribute, v11020),
                      GWSIM_RT_PARAMS(cudaMemPoolSetAttribute, v11020){memPool, attr, value}, [&] {
                        return PoolAttribute(memPool, attr, value, Drv().cuMemPoolSetAttribute);
                      });
}

// cudaMemAccessDesc and CUmemAccessDesc have one layout (a location, then the flags).
static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc));
GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t memPool,
                                                        const struct cudaMemAccessDesc* descList,
                                                        size_t count) {
  return TraceRuntime(GWSIM_RT(cudaMemPoolSetAccess, v11020),
                      GWSIM_RT_PARAMS(cudaMemPoolSetAccess, v11020){memPool, descList, count}, [&] {
                        return WithContext([&] {
                          return Drv().cuMemPoolSetAccess(
                              memPool, reinterpret_cast<const CUmemAccessDesc*>(descList), count);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool,
                                                           enum cudaMemPoolAttr attr, void* value) {
  return TraceRuntime(GWSIM_RT(cudaMemPoolGetAttribute, v11020),
                      GWSIM_RT_PARAMS(cudaMemPoolGetAttribute, v11020){memPool, attr, value}, [&] {
                        return PoolAttribute(memPool, attr, value, Drv().cuMemPoolGetAttribute);
                      });
}

// CUDA IPC memory handles: the runtime passes them to the driver (cudaIpcMemHandle_t and
// CUipcMemHandle are the same 64 bytes).

GWSIM_EXPORT cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  return TraceRuntime(GWSIM_RT(cudaIpcGetMemHandle, v4010),
                      GWSIM_RT_PARAMS(cudaIpcGetMemHandle, v4010){handle, devPtr}, [&] {
                        if (handle == nullptr) return cudaErrorInvalidValue;
                        return WithContext([&] {
                          CUipcMemHandle h{};
                          const CUresult r = Drv().cuIpcGetMemHandle(&h, Dev(devPtr));
                          if (r == CUDA_SUCCESS) std::memcpy(handle, &h, sizeof(h));
                          return r;
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle,
                                                        unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaIpcOpenMemHandle, v4010),
                      GWSIM_RT_PARAMS(cudaIpcOpenMemHandle, v4010){devPtr, handle, flags}, [&] {
                        CUipcMemHandle h{};
                        std::memcpy(&h, &handle, sizeof(h));
                        return AddressOut(devPtr, [&](CUdeviceptr* p) {
                          return Drv().cuIpcOpenMemHandle_v2(p, h, flags);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void* devPtr) {
  return TraceRuntime(
      GWSIM_RT(cudaIpcCloseMemHandle, v4010), GWSIM_RT_PARAMS(cudaIpcCloseMemHandle, v4010){devPtr},
      [&] { return WithContext([&] { return Drv().cuIpcCloseMemHandle(Dev(devPtr)); }); });
}
