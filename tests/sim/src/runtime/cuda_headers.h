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

// The entry points nvcc-generated host code calls (crt/host_runtime.h and
// crt/device_functions.h declare them only for nvcc's own compilation).
extern "C" {
void** CUDARTAPI __cudaRegisterFatBinary(void* fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void** fatCubinHandle);
void CUDARTAPI __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress,
                                 const char* deviceName, int ext, size_t size, int constant,
                                 int global);
void CUDARTAPI __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress,
                                        char* deviceAddress, const char* deviceName, int ext,
                                        size_t size, int constant, int global);
char CUDARTAPI __cudaInitModule(void** fatCubinHandle);
void CUDARTAPI __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                      const char* deviceName, int thread_limit, uint3* tid,
                                      uint3* bid, dim3* bDim, dim3* gDim, int* wSize);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st* stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                 void* stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void** args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                              void** args, size_t sharedMem, cudaStream_t stream);
}

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // GWSIM_RUNTIME_CUDA_HEADERS_H_
