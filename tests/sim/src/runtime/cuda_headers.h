// The CUDA/CUPTI headers as the fake runtime sees them.
//
// Compiled with __CUDA_API_VERSION_INTERNAL (set by CMake) so that cuda_runtime_api.h declares
// both the legacy-stream names (cudaMemcpy) and the per-thread ones (cudaMemcpy_ptds) and every
// definition is checked against NVIDIA's prototype. generated_cuda_runtime_api_meta.h has no
// include guard and is included only here.
#ifndef GWSIM_RUNTIME_CUDA_HEADERS_H_
#define GWSIM_RUNTIME_CUDA_HEADERS_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#error "the fake runtime must be compiled with -D__CUDA_API_VERSION_INTERNAL"
#endif

#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include "gwsim_abi.h"
#include "runtime/nvcc_entry_points.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // GWSIM_RUNTIME_CUDA_HEADERS_H_
