// Simulated memory: device, managed and pinned host allocations, registered host ranges,
// stream-ordered and pool allocations, and virtual memory management.
//
// Device memory is real host memory (anonymous mmap with MAP_NORESERVE for cuMemAlloc memory and
// large blocks, malloc for other small ones), so copies move real bytes; what makes it "device"
// memory is its entry in the MemoryTable and the bytes it charges against the device capacity.
#ifndef GWSIM_DRIVER_MEMORY_H_
#define GWSIM_DRIVER_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "driver/cuda_headers.h"
#include "driver/state.h"

namespace gwsim::drv {

struct AllocRequest {
  size_t size = 0;
  Origin origin = Origin::kDevice;
  uint8_t memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  bool charge = true;  // counts against the device capacity
  bool is_async = false;
  CUmemPoolHandle_st* pool = nullptr;
  uint32_t stream_id = CUPTI_INVALID_STREAM_ID;
  unsigned flags = 0;
  const char* name = nullptr;
};

// Allocates in the given context and emits the MEMORY2 ALLOCATION record.
CUresult Allocate(const AllocRequest& req, CUctx_st* ctx, uintptr_t* out);

// Frees the allocation that starts at p if its origin is one of `origins` (a bit mask of
// 1 << Origin) and emits the MEMORY2 RELEASE record.
CUresult Free(uintptr_t p, unsigned origins, bool is_async, uint32_t stream_id);

constexpr unsigned Bit(Origin o) { return 1u << static_cast<unsigned>(o); }

// Returns an allocation's memory to the system and its bytes to the device capacity.
void ReleaseBacking(const Allocation& a);

CUresult HostRegister(void* p, size_t size, unsigned flags);
CUresult HostUnregister(void* p);

// How the simulator sees an address: a CUpti_ActivityMemoryKind (PAGEABLE for anything it does
// not know), plus the allocation when there is one.
struct PointerClass {
  uint8_t kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  std::optional<Allocation> alloc;
  bool device_side() const {
    return kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ||
           kind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED ||
           kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
  }
};
PointerClass Classify(uintptr_t p);

CUresult GetPointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                             bool strict);

// Virtual memory management (vmm.cc).
CUresult AddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment);
CUresult AddressFree(CUdeviceptr ptr, size_t size);
CUresult CreatePhysical(CUmemGenericAllocationHandle* handle, size_t size,
                        const CUmemAllocationProp* prop);
CUresult ReleasePhysical(CUmemGenericAllocationHandle handle);
// cuMemRetainAllocationHandle: the handle mapped at `addr`, one reference more.
CUresult RetainPhysical(CUmemGenericAllocationHandle* handle, CUdeviceptr addr);
// cuMemGetAllocationPropertiesFromHandle: what cuMemCreate was given (device, handle types).
CUresult PhysicalProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle);
CUresult Map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle);
CUresult Unmap(CUdeviceptr ptr, size_t size);
CUresult SetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count);
// Sharing (POSIX file descriptors only): the memfd behind a handle, and a handle to the memory
// behind such an fd (this process's, or another's).
CUresult ExportPhysical(void* shareable, CUmemGenericAllocationHandle handle,
                        CUmemAllocationHandleType type, unsigned long long flags);
CUresult ImportPhysical(CUmemGenericAllocationHandle* handle, void* os_handle,
                        CUmemAllocationHandleType type);

// CUDA IPC memory handles between processes (ipc.cc).
CUresult IpcGetHandle(CUipcMemHandle* out, CUdeviceptr dptr);
CUresult IpcOpen(CUdeviceptr* out, const CUipcMemHandle& handle, unsigned flags);
CUresult IpcClose(CUdeviceptr dptr);
// Gives an exported allocation that left the MemoryTable private pages again (its memfd stays
// with the processes that opened it), so that its address can be handed out again.
void EndExport(const Allocation& a);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_MEMORY_H_
