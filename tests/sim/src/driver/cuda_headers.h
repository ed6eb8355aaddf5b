// The CUDA/CUPTI headers as the fake driver sees them.
//
// The driver is compiled with __CUDA_API_VERSION_INTERNAL (set by CMake), so cuda.h declares
// every ABI name (cuMemAlloc_v2, cuMemcpyHtoD_v2_ptds, cuGetProcAddress, ...) instead of
// mapping the public names onto them; each definition is then checked against NVIDIA's
// prototype. cupti.h cannot be used in that mode (it re-declares the *_v1 structs), so its parts
// are included one by one; generated_cuda_meta.h has no include guard and is included only here.
#ifndef GWSIM_DRIVER_CUDA_HEADERS_H_
#define GWSIM_DRIVER_CUDA_HEADERS_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#error "the fake driver must be compiled with -D__CUDA_API_VERSION_INTERNAL"
#endif

#include <cuda.h>
#include <cudaProfiler.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_version.h>
#include <generated_cuda_meta.h>

#include "gwsim_abi.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // GWSIM_DRIVER_CUDA_HEADERS_H_
