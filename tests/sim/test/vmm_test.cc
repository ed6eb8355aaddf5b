// VMM sharing: a handle's memory exported as a POSIX file descriptor and imported again (in this
// process, or another process's), and when the memory returns to the device.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "recorder.h"

namespace gwsim::test {
namespace {

constexpr size_t kGranularity = 2 << 20;

CUmemAllocationProp Prop(CUmemAllocationHandleType types) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = types;
  prop.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  return prop;
}

// A new handle of one granule that may be exported as a file descriptor.
CUmemGenericAllocationHandle Shareable() {
  const CUmemAllocationProp prop = Prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(cuMemCreate(&h, kGranularity, &prop, 0), CUDA_SUCCESS);
  return h;
}

CUresult Import(int fd, CUmemGenericAllocationHandle* handle) {
  return cuMemImportFromShareableHandle(handle, reinterpret_cast<void*>(intptr_t{fd}),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

// Maps `handle` read/write at a fresh reservation of one granule.
CUdeviceptr MapRw(CUmemGenericAllocationHandle handle) {
  CUdeviceptr va = 0;
  EXPECT_EQ(cuMemAddressReserve(&va, kGranularity, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va, kGranularity, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = Prop(CU_MEM_HANDLE_TYPE_NONE).location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemSetAccess(va, kGranularity, &access, 1), CUDA_SUCCESS);
  return va;
}

void Unmap(CUdeviceptr va) {
  EXPECT_EQ(cuMemUnmap(va, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, kGranularity), CUDA_SUCCESS);
}

TEST(Vmm, ExportNeedsTheHandleTypeRequestedAtCreation) {
  InitCuda();
  const CUmemAllocationProp plain = Prop(CU_MEM_HANDLE_TYPE_NONE);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, kGranularity, &plain, 0), CUDA_SUCCESS);
  int fd = -1;
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
            CUDA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE);  // released
  const CUmemAllocationProp fabric = Prop(CU_MEM_HANDLE_TYPE_FABRIC);
  EXPECT_EQ(cuMemCreate(&h, kGranularity, &fabric, 0), CUDA_ERROR_NOT_SUPPORTED);
  CUmemGenericAllocationHandle imported = 0;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);  // not a simulator memfd
  EXPECT_EQ(Import(pipe_fds[0], &imported), CUDA_ERROR_INVALID_VALUE);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// An import in the exporting process is one more reference to the same memory: the bytes are
// shared, nothing more is charged, and the memory returns to the device when the last handle
// that refers to it is released and unmapped.
TEST(Vmm, AnImportedHandleSharesTheMemoryAndKeepsItAllocated) {
  InitCuda();
  const size_t free_before = FreeMemory();
  const CUmemGenericAllocationHandle h = Shareable();
  int fd = -1;
  ASSERT_EQ(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  ASSERT_GE(fd, 0);
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(Import(fd, &imported), CUDA_SUCCESS);
  close(fd);  // the import does not need the fd any more
  EXPECT_NE(imported, h);
  EXPECT_EQ(FreeMemory(), free_before - kGranularity);

  const CUdeviceptr a = MapRw(h);
  const CUdeviceptr b = MapRw(imported);
  const uint32_t value = 0xC0FFEE;
  ASSERT_EQ(cuMemcpyHtoD(a + 64, &value, sizeof(value)), CUDA_SUCCESS);
  uint32_t seen = 0;
  ASSERT_EQ(cuMemcpyDtoH(&seen, b + 64, sizeof(seen)), CUDA_SUCCESS);
  EXPECT_EQ(seen, value);

  // The exporter's handle gone: the import still holds the memory.
  Unmap(a);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(), free_before - kGranularity);
  ASSERT_EQ(cuMemcpyDtoH(&seen, b + 64, sizeof(seen)), CUDA_SUCCESS);
  EXPECT_EQ(seen, value);
  // Released before it is unmapped: freed at the unmap.
  ASSERT_EQ(cuMemRelease(imported), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(), free_before - kGranularity);
  Unmap(b);
  EXPECT_EQ(FreeMemory(), free_before);
}

// Another process's exported memory: a simulator memfd this process did not make (made here by
// hand, as the other process's simulator names it) imports as memory on the device its name
// says, with its bytes, charging nothing here; released and unmapped, it is gone.
TEST(Vmm, AnotherProcesssMemoryImportsWithoutCharge) {
  InitCuda();
  const int foreign = memfd_create("gwsim-vmm-0", MFD_CLOEXEC);
  ASSERT_GE(foreign, 0);
  ASSERT_EQ(ftruncate(foreign, kGranularity), 0);
  const uint32_t value = 0x5EED;
  ASSERT_EQ(pwrite(foreign, &value, sizeof(value), 128), static_cast<ssize_t>(sizeof(value)));
  const size_t free_before = FreeMemory();
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(Import(foreign, &imported), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(), free_before);
  const CUdeviceptr b = MapRw(imported);
  uint32_t seen = 0;
  ASSERT_EQ(cuMemcpyDtoH(&seen, b + 128, sizeof(seen)), CUDA_SUCCESS);
  EXPECT_EQ(seen, value);
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, reinterpret_cast<void*>(b)), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attrs.device, 0);
  // An import of it again is one more handle to the same memory.
  CUmemGenericAllocationHandle again = 0;
  ASSERT_EQ(Import(foreign, &again), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(again), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(imported), CUDA_SUCCESS);
  Unmap(b);
  EXPECT_EQ(FreeMemory(), free_before);
  EXPECT_EQ(cuMemMap(b, kGranularity, 0, imported, 0), CUDA_ERROR_INVALID_HANDLE);
  close(foreign);
}

// cuMemRetainAllocationHandle (PyTorch's expandable segments resolve it): any address inside a
// mapping gives the handle it was mapped with and one reference more, which a cuMemRelease
// drops; the memory returns to the device only when the last reference is gone and it is
// unmapped. A released handle that is still mapped can be retained again. An address no mapping
// covers (reserved but unmapped, past the mapping, never reserved) is an invalid value. The call
// is traced under its cbid, with its params.
TEST(Vmm, RetainAddsAReferenceThatReleaseDrops) {
  InitCuda();
  const size_t free_before = FreeMemory();
  const CUmemAllocationProp prop = Prop(CU_MEM_HANDLE_TYPE_NONE);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, kGranularity, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, kGranularity, 0, h, 0), CUDA_SUCCESS);

  CUmemGenericAllocationHandle retained = 0;
  {
    Recorder rec({CUPTI_CB_DOMAIN_DRIVER_API});
    ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 4096)),
              CUDA_SUCCESS);
    const auto events =
        rec.Of(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].result, CUDA_SUCCESS);
    EXPECT_EQ(events[1].name, "cuMemRetainAllocationHandle");
  }
  EXPECT_EQ(retained, h);  // the same value, not a new handle
  CUmemGenericAllocationHandle none = 0;
  EXPECT_EQ(cuMemRetainAllocationHandle(&none, reinterpret_cast<void*>(va + kGranularity)),
            CUDA_ERROR_INVALID_VALUE);  // reserved, not mapped
  EXPECT_EQ(cuMemRetainAllocationHandle(&none, reinterpret_cast<void*>(va - 1)),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRetainAllocationHandle(&none, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRetainAllocationHandle(nullptr, reinterpret_cast<void*>(va)),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(none, 0u);

  // Two references: the first release leaves the handle usable.
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  CUdeviceptr second = 0;
  ASSERT_EQ(cuMemAddressReserve(&second, kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(second, kGranularity, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(second, kGranularity), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(second, kGranularity), CUDA_SUCCESS);
  // The last reference gone, the mapping keeps the memory, and a retain through it brings the
  // handle back.
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(FreeMemory(), free_before - kGranularity);
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)), CUDA_SUCCESS);
  EXPECT_EQ(retained, h);
  ASSERT_EQ(cuMemUnmap(va, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(), free_before - kGranularity);  // still referenced
  EXPECT_EQ(cuMemRetainAllocationHandle(&none, reinterpret_cast<void*>(va)),
            CUDA_ERROR_INVALID_VALUE);  // unmapped
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(), free_before);
  EXPECT_EQ(cuMemMap(va, kGranularity, 0, h, 0), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuMemAddressFree(va, 2 * kGranularity), CUDA_SUCCESS);
}

}  // namespace
}  // namespace gwsim::test
