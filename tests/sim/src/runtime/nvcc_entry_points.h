// The entry points nvcc-generated host code calls, for the fake runtime that defines them and
// the simulator's tests that call them the way that code does.
#ifndef GWSIM_RUNTIME_NVCC_ENTRY_POINTS_H_
#define GWSIM_RUNTIME_NVCC_ENTRY_POINTS_H_

#include <cuda_runtime_api.h>

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

#endif  // GWSIM_RUNTIME_NVCC_ENTRY_POINTS_H_
