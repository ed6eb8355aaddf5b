// One virtual range striped over two devices with the driver's VMM API, as
// a multi-GPU allocator does: 2 MiB of physical memory created on device 0
// and 2 MiB on device 1, mapped side by side, then unmapped and released.
#include <cuda.h>

#include <cstdio>

#include "driver_program.h"

using driver_program::Check;

int main() {
  driver_program::UsePrimaryContext(0);  // every call below runs on device 0's context
  constexpr size_t kStripe = 2 << 20;
  CUdeviceptr base = 0;
  Check(cuMemAddressReserve(&base, 2 * kStripe, 0, 0, 0), "cuMemAddressReserve");
  CUmemGenericAllocationHandle handles[2] = {};
  for (int d = 0; d < 2; ++d) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    Check(cuMemCreate(&handles[d], kStripe, &prop, 0), "cuMemCreate");
    Check(cuMemMap(base + d * kStripe, kStripe, 0, handles[d], 0), "cuMemMap");
  }
  CUmemAccessDesc access[2] = {};
  for (int d = 0; d < 2; ++d) {
    access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[d].location.id = d;
    access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  Check(cuMemSetAccess(base, 2 * kStripe, access, 2), "cuMemSetAccess");
  Check(cuMemUnmap(base, 2 * kStripe), "cuMemUnmap");
  for (auto h : handles) Check(cuMemRelease(h), "cuMemRelease");
  Check(cuMemAddressFree(base, 2 * kStripe), "cuMemAddressFree");
  std::printf("vmm_striped: done\n");
  return 0;
}
