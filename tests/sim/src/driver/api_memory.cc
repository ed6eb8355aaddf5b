// Exported driver API: memory allocation, pools, pointer queries and VMM.
#include <mutex>

#include "driver/cuda_headers.h"
#include "driver/graph.h"
#include "driver/memory.h"
#include "driver/state.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

constexpr unsigned kDeviceFreeable =
    Bit(Origin::kDevice) | Bit(Origin::kAsync) | Bit(Origin::kManaged);

CUresult AllocIn(CUdeviceptr* dptr, const AllocRequest& req) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (!req.is_async) {
    if (auto r = CaptureUnsafeCall()) return *r;  // not during a capture that prohibits it
  }
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  const CUresult r = Allocate(req, ctx, &p);
  if (r == CUDA_SUCCESS) *dptr = p;
  return r;
}

CUresult AllocHost(void** pp, size_t size, unsigned flags) {
  if (pp == nullptr) return CUDA_ERROR_INVALID_VALUE;
  AllocRequest req;
  req.size = size;
  req.origin = Origin::kHost;
  req.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  req.charge = false;
  req.flags = flags;
  CUdeviceptr p = 0;
  const CUresult r = AllocIn(&p, req);
  if (r == CUDA_SUCCESS) *pp = reinterpret_cast<void*>(p);
  return r;
}

CUresult AllocAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream stream,
                    bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (auto r = CaptureAllocAsync(dptr, size, pool, s)) return *r;  // a mem-alloc node
  if (pool == nullptr) {
    pool = D().devices[s->ctx->device]->current_pool.load();
  } else if (!ValidPool(pool)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  AllocRequest req;
  req.size = size;
  req.origin = Origin::kAsync;
  req.is_async = true;
  req.pool = pool;
  req.stream_id = s->id;
  return AllocIn(dptr, req);
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (auto r = GraphAwareFree(dptr, s)) return *r;  // a mem-free node, or graph memory
  return Free(dptr, Bit(Origin::kAsync) | Bit(Origin::kDevice), true, s->id);
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  return TraceDriver(GWSIM_DRV(cuMemGetInfo_v2), cuMemGetInfo_v2_params{free, total}, [&] {
    CUctx_st* ctx = nullptr;
    if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
    if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t capacity = D().config.device_memory;
    const uint64_t used = D().devices[ctx->device]->used.load();
    *total = capacity;
    *free = used < capacity ? capacity - used : 0;
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return TraceDriver(GWSIM_DRV(cuMemAlloc_v2), cuMemAlloc_v2_params{dptr, bytesize}, [&] {
    AllocRequest req;
    req.size = bytesize;
    return AllocIn(dptr, req);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch,
                                                 size_t WidthInBytes, size_t Height,
                                                 unsigned int ElementSizeBytes) {
  return TraceDriver(
      GWSIM_DRV(cuMemAllocPitch_v2),
      cuMemAllocPitch_v2_params{dptr, pPitch, WidthInBytes, Height, ElementSizeBytes}, [&] {
        if (pPitch == nullptr || WidthInBytes == 0 || Height == 0 ||
            (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        const size_t pitch =
            (WidthInBytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
        if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
        AllocRequest req;
        req.size = pitch * Height;
        const CUresult r = AllocIn(dptr, req);
        if (r == CUDA_SUCCESS) *pPitch = pitch;
        return r;
      });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  return TraceDriver(GWSIM_DRV(cuMemFree_v2), cuMemFree_v2_params{dptr}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (dptr == 0) return CUDA_SUCCESS;
    if (auto r = GraphAwareFree(dptr, nullptr)) return *r;  // graph memory, or refused
    return Free(dptr, kDeviceFreeable, false, CUPTI_INVALID_STREAM_ID);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                                unsigned int flags) {
  return TraceDriver(GWSIM_DRV(cuMemAllocManaged), cuMemAllocManaged_params{dptr, bytesize, flags},
                     [&] {
                       if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
                         return CUDA_ERROR_INVALID_VALUE;
                       }
                       AllocRequest req;
                       req.size = bytesize;
                       req.origin = Origin::kManaged;
                       req.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
                       req.charge = false;  // managed memory oversubscribes, as on Linux GPUs
                       req.flags = flags;
                       return AllocIn(dptr, req);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return TraceDriver(GWSIM_DRV(cuMemAllocHost_v2), cuMemAllocHost_v2_params{pp, bytesize},
                     [&] { return AllocHost(pp, bytesize, 0); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuMemHostAlloc), cuMemHostAlloc_params{pp, bytesize, Flags},
                     [&] { return AllocHost(pp, bytesize, Flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  return TraceDriver(GWSIM_DRV(cuMemFreeHost), cuMemFreeHost_params{p}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (auto r = CaptureUnsafeCall()) return *r;
    return Free(reinterpret_cast<uintptr_t>(p), Bit(Origin::kHost), false, CUPTI_INVALID_STREAM_ID);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuMemHostRegister_v2),
                     cuMemHostRegister_v2_params{p, bytesize, Flags},
                     [&] { return HostRegister(p, bytesize, Flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemHostUnregister(void* p) {
  return TraceDriver(GWSIM_DRV(cuMemHostUnregister), cuMemHostUnregister_params{p},
                     [&] { return HostUnregister(p); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                           unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuMemHostGetDevicePointer_v2),
                     cuMemHostGetDevicePointer_v2_params{pdptr, p, Flags}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       if (pdptr == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
                       const PointerClass c = Classify(reinterpret_cast<uintptr_t>(p));
                       if (c.kind != CUPTI_ACTIVITY_MEMORY_KIND_PINNED) {
                         return CUDA_ERROR_INVALID_VALUE;
                       }
                       *pdptr = reinterpret_cast<uintptr_t>(p);  // unified addressing
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize,
                                                      CUdeviceptr dptr) {
  return TraceDriver(GWSIM_DRV(cuMemGetAddressRange_v2),
                     cuMemGetAddressRange_v2_params{pbase, psize, dptr}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       const std::optional<Allocation> a = D().memory.Find(dptr);
                       if (!a) return CUDA_ERROR_NOT_FOUND;
                       if (pbase != nullptr) *pbase = a->base;
                       if (psize != nullptr) *psize = a->size;
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                                    CUdeviceptr ptr) {
  return TraceDriver(GWSIM_DRV(cuPointerGetAttribute),
                     cuPointerGetAttribute_params{data, attribute, ptr}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       return GetPointerAttribute(data, attribute, ptr, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                                     CUpointer_attribute* attributes, void** data,
                                                     CUdeviceptr ptr) {
  return TraceDriver(GWSIM_DRV(cuPointerGetAttributes),
                     cuPointerGetAttributes_params{numAttributes, attributes, data, ptr}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       if (attributes == nullptr || data == nullptr)
                         return CUDA_ERROR_INVALID_VALUE;
                       for (unsigned i = 0; i < numAttributes; ++i) {
                         if (CUresult r = GetPointerAttribute(data[i], attributes[i], ptr, false);
                             r != CUDA_SUCCESS) {
                           return r;
                         }
                       }
                       return CUDA_SUCCESS;
                     });
}

// Stream-ordered allocation

GWSIM_DRV_PER_THREAD_TWINS(cuMemAllocAsync, cuMemAllocAsync_ptsz,
                           (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
                           (dptr, bytesize, hStream),
                           { return AllocAsync(dptr, bytesize, nullptr, hStream, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,
                           (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool,
                            CUstream hStream),
                           (dptr, bytesize, pool, hStream), {
                             if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
                             return AllocAsync(dptr, bytesize, pool, hStream, per_thread);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemFreeAsync, cuMemFreeAsync_ptsz,
                           (CUdeviceptr dptr, CUstream hStream), (dptr, hStream),
                           { return FreeAsync(dptr, hStream, per_thread); })

GWSIM_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  return TraceDriver(GWSIM_DRV(cuMemPoolCreate), cuMemPoolCreate_params{pool, poolProps}, [&] {
    if (pool == nullptr || poolProps == nullptr ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (CUresult r = CheckDevice(poolProps->location.id); r != CUDA_SUCCESS) return r;
    auto* p = new CUmemPoolHandle_st{poolProps->location.id, false, 0};
    Driver& d = D();
    std::lock_guard lock(d.mu);
    d.pools.insert(p);
    *pool = p;
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  return TraceDriver(GWSIM_DRV(cuMemPoolDestroy), cuMemPoolDestroy_params{pool}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    Driver& d = D();
    std::lock_guard lock(d.mu);
    if (pool == nullptr || pool->is_default || d.pools.erase(pool) == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    d.retired.push_back(pool);  // kept: allocations may still point at it
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  return TraceDriver(GWSIM_DRV(cuMemPoolTrimTo), cuMemPoolTrimTo_params{pool, minBytesToKeep},
                     [&] { return ValidPool(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                                    void* value) {
  return TraceDriver(GWSIM_DRV(cuMemPoolSetAttribute),
                     cuMemPoolSetAttribute_params{pool, attr, value}, [&] {
                       if (!ValidPool(pool) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
                         pool->release_threshold = *static_cast<cuuint64_t*>(value);
                       }
                       return CUDA_SUCCESS;
                     });
}

// Access from other devices: validated (a pool, descriptors of existing devices, flags none or
// read-write), then nothing to do: simulated devices read each other's memory.
GWSIM_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map,
                                                 size_t count) {
  return TraceDriver(GWSIM_DRV(cuMemPoolSetAccess), cuMemPoolSetAccess_params{pool, map, count},
                     [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       if (!ValidPool(pool) || (map == nullptr && count > 0)) {
                         return CUDA_ERROR_INVALID_VALUE;
                       }
                       for (size_t i = 0; i < count; ++i) {
                         if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                             CheckDevice(map[i].location.id) != CUDA_SUCCESS ||
                             (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                              map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
                           return CUDA_ERROR_INVALID_VALUE;
                         }
                       }
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                                    void* value) {
  return TraceDriver(GWSIM_DRV(cuMemPoolGetAttribute),
                     cuMemPoolGetAttribute_params{pool, attr, value}, [&] {
                       if (!ValidPool(pool) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       switch (attr) {
                         case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
                         case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
                         case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
                           *static_cast<int*>(value) = 1;
                           return CUDA_SUCCESS;
                         case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
                           *static_cast<cuuint64_t*>(value) = pool->release_threshold;
                           return CUDA_SUCCESS;
                         default:  // usage counters; the simulator keeps no pool cache, so
                                   // reserved == used and the high marks are the current values
                           *static_cast<cuuint64_t*>(value) = D().memory.PoolBytes(pool);
                           return CUDA_SUCCESS;
                       }
                     });
}

// Virtual memory management

GWSIM_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                                  CUdeviceptr addr, unsigned long long flags) {
  return TraceDriver(GWSIM_DRV(cuMemAddressReserve),
                     cuMemAddressReserve_params{ptr, size, alignment, addr, flags},
                     [&] { return AddressReserve(ptr, size, alignment); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return TraceDriver(GWSIM_DRV(cuMemAddressFree), cuMemAddressFree_params{ptr, size},
                     [&] { return AddressFree(ptr, size); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                          const CUmemAllocationProp* prop,
                                          unsigned long long flags) {
  return TraceDriver(GWSIM_DRV(cuMemCreate), cuMemCreate_params{handle, size, prop, flags},
                     [&] { return CreatePhysical(handle, size, prop); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  return TraceDriver(GWSIM_DRV(cuMemRelease), cuMemRelease_params{handle},
                     [&] { return ReleasePhysical(handle); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                          void* addr) {
  return TraceDriver(GWSIM_DRV(cuMemRetainAllocationHandle),
                     cuMemRetainAllocationHandle_params{handle, addr},
                     [&] { return RetainPhysical(handle, reinterpret_cast<CUdeviceptr>(addr)); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  return TraceDriver(GWSIM_DRV(cuMemGetAllocationPropertiesFromHandle),
                     cuMemGetAllocationPropertiesFromHandle_params{prop, handle},
                     [&] { return PhysicalProperties(prop, handle); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                       CUmemGenericAllocationHandle handle,
                                       unsigned long long flags) {
  return TraceDriver(GWSIM_DRV(cuMemMap), cuMemMap_params{ptr, size, offset, handle, flags},
                     [&] { return Map(ptr, size, offset, handle); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return TraceDriver(GWSIM_DRV(cuMemUnmap), cuMemUnmap_params{ptr, size},
                     [&] { return Unmap(ptr, size); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                             const CUmemAccessDesc* desc, size_t count) {
  return TraceDriver(GWSIM_DRV(cuMemSetAccess), cuMemSetAccess_params{ptr, size, desc, count},
                     [&] { return SetAccess(ptr, size, desc, count); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle,
                                                           CUmemGenericAllocationHandle handle,
                                                           CUmemAllocationHandleType handleType,
                                                           unsigned long long flags) {
  return TraceDriver(
      GWSIM_DRV(cuMemExportToShareableHandle),
      cuMemExportToShareableHandle_params{shareableHandle, handle, handleType, flags},
      [&] { return ExportPhysical(shareableHandle, handle, handleType, flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(
    CUmemGenericAllocationHandle* handle, void* osHandle, CUmemAllocationHandleType shHandleType) {
  return TraceDriver(GWSIM_DRV(cuMemImportFromShareableHandle),
                     cuMemImportFromShareableHandle_params{handle, osHandle, shHandleType},
                     [&] { return ImportPhysical(handle, osHandle, shHandleType); });
}

// CUDA IPC memory handles (ipc.cc). cuIpcOpenMemHandle is the ABI of CUDA before 11.0 (cbid
// cuIpcOpenMemHandle); both forms behave alike.

GWSIM_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  return TraceDriver(GWSIM_DRV(cuIpcGetMemHandle), cuIpcGetMemHandle_params{pHandle, dptr},
                     [&] { return IpcGetHandle(pHandle, dptr); });
}

GWSIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                    unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuIpcOpenMemHandle_v2),
                     cuIpcOpenMemHandle_v2_params{pdptr, handle, Flags},
                     [&] { return IpcOpen(pdptr, handle, Flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                 unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuIpcOpenMemHandle), cuIpcOpenMemHandle_params{pdptr, handle, Flags},
                     [&] { return IpcOpen(pdptr, handle, Flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return TraceDriver(GWSIM_DRV(cuIpcCloseMemHandle), cuIpcCloseMemHandle_params{dptr},
                     [&] { return IpcClose(dptr); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(
    size_t* granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option) {
  return TraceDriver(GWSIM_DRV(cuMemGetAllocationGranularity),
                     cuMemGetAllocationGranularity_params{granularity, prop, option}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       if (granularity == nullptr || prop == nullptr)
                         return CUDA_ERROR_INVALID_VALUE;
                       *granularity = kVmmGranularity;
                       return CUDA_SUCCESS;
                     });
}
