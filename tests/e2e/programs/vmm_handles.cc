// VMM memory as the driver counts it, per physical handle (cuda.h: the
// memory is freed when every mapping of it is unmapped and the handle is
// released, in either order). On device 0, in MiB of device memory live:
//   a 12 MiB handle mapped at two addresses, then unmapped and released   12, 0
//   a 4 MiB handle released while mapped; a 2 MiB handle made before the
//     4 MiB one is unmapped (freed there)                                 4, 6, 2
//   the 2 MiB handle mapped and unmapped, never released (leaked)         2
//   a 6 MiB handle never mapped (leaked)                                  8
//   a 2 MiB handle exported as a file descriptor, imported again (another
//     process's memory as far as the import goes), the import mapped and
//     kept; the exported handle released (never mapped: freed)            10, 8
// The peak is 12 MiB; 8 MiB leak, at the two cuMemCreate lines marked LEAK.
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "driver_program.h"

namespace {

using driver_program::Check;

constexpr size_t kMiB = 1 << 20;

CUmemAllocationProp Prop(CUmemAllocationHandleType types = CU_MEM_HANDLE_TYPE_NONE) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = types;
  return prop;
}

}  // namespace

int main() {
  driver_program::UsePrimaryContext(0);
  const CUmemAllocationProp prop = Prop();
  CUdeviceptr va = 0;
  Check(cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0), "cuMemAddressReserve");

  // One handle, two mappings: its memory counts once.
  CUmemGenericAllocationHandle shared = 0;
  Check(cuMemCreate(&shared, 12 * kMiB, &prop, 0), "cuMemCreate");  // VMM:shared
  Check(cuMemMap(va, 12 * kMiB, 0, shared, 0), "cuMemMap");
  Check(cuMemMap(va + 12 * kMiB, 12 * kMiB, 0, shared, 0), "cuMemMap");
  Check(cuMemUnmap(va, 12 * kMiB), "cuMemUnmap");
  Check(cuMemUnmap(va + 12 * kMiB, 12 * kMiB), "cuMemUnmap");
  Check(cuMemRelease(shared), "cuMemRelease");

  // Released while mapped: freed at the unmap, after the next handle was made.
  CUmemGenericAllocationHandle early = 0;
  Check(cuMemCreate(&early, 4 * kMiB, &prop, 0), "cuMemCreate");
  Check(cuMemMap(va, 4 * kMiB, 0, early, 0), "cuMemMap");
  Check(cuMemRelease(early), "cuMemRelease");
  CUmemGenericAllocationHandle unreleased = 0;
  Check(cuMemCreate(&unreleased, 2 * kMiB, &prop, 0), "cuMemCreate");  // LEAK:vmm_unreleased
  Check(cuMemUnmap(va, 4 * kMiB), "cuMemUnmap");

  // Mapped and unmapped, never released: leaked.
  Check(cuMemMap(va + 4 * kMiB, 2 * kMiB, 0, unreleased, 0), "cuMemMap");
  Check(cuMemUnmap(va + 4 * kMiB, 2 * kMiB), "cuMemUnmap");

  // Never mapped, never released: leaked.
  CUmemGenericAllocationHandle unmapped = 0;
  Check(cuMemCreate(&unmapped, 6 * kMiB, &prop, 0), "cuMemCreate");  // LEAK:vmm_unmapped

  // Exported and imported again: the import is shown as imported, not leaked.
  const CUmemAllocationProp shareable = Prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemGenericAllocationHandle exported = 0;
  Check(cuMemCreate(&exported, 2 * kMiB, &shareable, 0), "cuMemCreate");  // VMM:exported
  int fd = -1;
  Check(cuMemExportToShareableHandle(&fd, exported, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemExportToShareableHandle");
  CUmemGenericAllocationHandle imported = 0;
  Check(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{fd}),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle");
  close(fd);
  Check(cuMemMap(va + 8 * kMiB, 2 * kMiB, 0, imported, 0), "cuMemMap");  // VMM:imported
  Check(cuMemRelease(exported), "cuMemRelease");
  std::printf("vmm_handles: done\n");
  return 0;
}
