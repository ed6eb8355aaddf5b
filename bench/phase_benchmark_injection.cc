// NVTX's static injection for phase_benchmark: a strong definition of the
// pointer that NVTX's headers define weak (in phase_benchmark.cc), in a file
// that does not include them.
#include "interpose/nvtx/nvtx.h"

extern "C" {
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): NVTX's interface
int (*InitializeInjectionNvtx2_fnptr)(gpuwatch::NvtxExportTableGetter) = &gpuwatch::InitializeNvtx;
}
