// Exported runtime API: what nvcc-generated host code calls to register a module and launch
// kernels, plus the public launch functions. Kernels never run: a launch records a kernel
// activity and succeeds.
#include <atomic>

#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

// What a registered module handle points at.
struct FatBinary {
  const void* fat_cubin = nullptr;
  FatBinary* next = nullptr;
};

// Every module registered, for the life of the process (a handle stays valid
// after __cudaUnregisterFatBinary): reachable, not leaked.
std::atomic<FatBinary*> g_modules{nullptr};

cudaError_t LaunchHandle(const Kernel& k, dim3 grid, dim3 block, void** args, size_t shared_mem,
                         cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  const CUresult r = (per_thread ? d.cuLaunchKernel_ptsz : d.cuLaunchKernel)(
      k.function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
      static_cast<unsigned>(shared_mem), stream, args, nullptr);
  return ToCudaError(r);
}

// cudaGetFuncBySymbol / cudaGetKernel: the function registered for the host stub `func`, as
// *out (a CUfunction is also the kernel's handle here).
template <typename Out>
cudaError_t RegisteredFunction(Out* out, const void* func) {
  Kernel k;
  if (out == nullptr) return cudaErrorInvalidValue;
  if (!FindKernelByHostFunction(func, &k)) return cudaErrorInvalidDeviceFunction;
  *out = reinterpret_cast<Out>(k.function);
  return cudaSuccess;
}

const char* NameOfHostFunction(const void* func) {
  Kernel k;
  return FindKernelByHostFunction(func, &k) ? k.name : nullptr;
}

const char* NameOfHandle(const void* handle) {
  Kernel k;
  return FindKernelByHandle(handle, &k) ? k.name : nullptr;
}

cudaError_t LaunchEx(const cudaLaunchConfig_t* config, const void* func, void** args,
                     bool per_thread) {
  if (config == nullptr) return cudaErrorInvalidValue;
  Kernel k;
  if (!FindKernelByHostFunction(func, &k) || k.function == nullptr) {
    return cudaErrorInvalidDeviceFunction;
  }
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUlaunchConfig c = ToDriverLaunchConfig(*config);
  const DriverApi& d = Drv();
  return ToCudaError(
      (per_thread ? d.cuLaunchKernelEx_ptsz : d.cuLaunchKernelEx)(&c, k.function, args, nullptr));
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Module registration (from the static constructors nvcc generates) and the call configuration
// of <<<>>> launches: the runtime's internal entry points, for which NVIDIA's CUPTI reports no
// callbacks (none were seen on the driver, CUDA 13.0). A <<<>>> launch is reported as
// cudaLaunchKernel.

GWSIM_EXPORT void** CUDARTAPI __cudaRegisterFatBinary(void* fatCubin) {
  // The handle stays valid for the life of the process.
  auto* module = new FatBinary{fatCubin, g_modules.load(std::memory_order_relaxed)};
  while (!g_modules.compare_exchange_weak(module->next, module, std::memory_order_acq_rel)) {
  }
  return reinterpret_cast<void**>(module);
}

GWSIM_EXPORT void CUDARTAPI __cudaRegisterFatBinaryEnd(void** fatCubinHandle) {
  (void)fatCubinHandle;
}

// Registrations are kept: kernels and variables of an unregistered module stay resolvable,
// which is harmless here and keeps late launches during exit safe.
GWSIM_EXPORT void CUDARTAPI __cudaUnregisterFatBinary(void** fatCubinHandle) {
  (void)fatCubinHandle;
}

GWSIM_EXPORT void CUDARTAPI __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun,
                                                   char* deviceFun, const char* deviceName,
                                                   int thread_limit, uint3* tid, uint3* bid,
                                                   dim3* bDim, dim3* gDim, int* wSize) {
  RegisterKernel(hostFun, deviceName);
}

GWSIM_EXPORT void CUDARTAPI __cudaRegisterVar(void** fatCubinHandle, char* hostVar,
                                              char* deviceAddress, const char* deviceName, int ext,
                                              size_t size, int constant, int global) {
  RegisterVariable(hostVar, deviceName, size);
}

GWSIM_EXPORT void CUDARTAPI __cudaRegisterManagedVar(void** fatCubinHandle,
                                                     void** hostVarPtrAddress, char* deviceAddress,
                                                     const char* deviceName, int ext, size_t size,
                                                     int constant, int global) {
  RegisterManagedVariable(fatCubinHandle, hostVarPtrAddress, deviceName, size);
}

GWSIM_EXPORT char CUDARTAPI __cudaInitModule(void** fatCubinHandle) {
  return static_cast<char>(InitManagedVariables(fatCubinHandle) == cudaSuccess ? 1 : 0);
}

// Launch: kernel<<<grid, block, shmem, stream>>>(args) compiles to push, __cudaGetKernel (once),
// pop and __cudaLaunchKernel.

GWSIM_EXPORT unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                                            size_t sharedMem,
                                                            struct CUstream_st* stream) {
  CallConfigurations().push_back(LaunchConfig{gridDim, blockDim, sharedMem, stream});
  return 0u;
}

GWSIM_EXPORT cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim,
                                                              size_t* sharedMem, void* stream) {
  auto& configs = CallConfigurations();
  if (configs.empty()) {
    SetLastError(cudaErrorMissingConfiguration);
    return cudaErrorMissingConfiguration;
  }
  const LaunchConfig c = configs.back();
  configs.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shared_mem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  const cudaError_t e = [&] {
    Kernel k;
    if (kernel == nullptr) return cudaErrorInvalidValue;
    if (!FindKernelByHostFunction(hostFun, &k)) return cudaErrorInvalidDeviceFunction;
    *kernel = reinterpret_cast<cudaKernel_t>(k.function);
    return cudaSuccess;
  }();
  SetLastError(e);
  return e;
}

// Reported as cudaLaunchKernel (cbid cudaLaunchKernel_v7000, or its _ptsz variant), with its
// params struct: `func` is the kernel handle, which cudaLaunchKernel also accepts.
GWSIM_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim,
                                                      dim3 blockDim, void** args, size_t sharedMem,
                                                      cudaStream_t stream) {
  return TraceRuntime(
      GWSIM_RT(cudaLaunchKernel, v7000),
      GWSIM_RT_PARAMS(cudaLaunchKernel, v7000){kernel, gridDim, blockDim, args, sharedMem, stream},
      [&] {
        Kernel k;
        if (!FindKernelByHandle(kernel, &k)) return cudaErrorInvalidDeviceFunction;
        return LaunchHandle(k, gridDim, blockDim, args, sharedMem, stream, false);
      },
      NameOfHandle(kernel));
}

GWSIM_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                                           dim3 blockDim, void** args,
                                                           size_t sharedMem, cudaStream_t stream) {
  return TraceRuntime(
      GWSIM_RT(cudaLaunchKernel_ptsz, v7000),
      GWSIM_RT_PARAMS(cudaLaunchKernel_ptsz, v7000){kernel, gridDim, blockDim, args, sharedMem,
                                                    stream},
      [&] {
        Kernel k;
        if (!FindKernelByHandle(kernel, &k)) return cudaErrorInvalidDeviceFunction;
        return LaunchHandle(k, gridDim, blockDim, args, sharedMem, stream, true);
      },
      NameOfHandle(kernel));
}

GWSIM_RT_PER_THREAD_TWINS(
    cudaLaunchKernel, v7000, cudaLaunchKernel_ptsz, v7000,
    (const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
     cudaStream_t stream),
    (func, gridDim, blockDim, args, sharedMem, stream),
    {
      Kernel k;
      if (!FindKernelByHostFunction(func, &k)) return cudaErrorInvalidDeviceFunction;
      return LaunchHandle(k, gridDim, blockDim, args, sharedMem, stream, per_thread);
    },
    NameOfHostFunction(func))

GWSIM_RT_PER_THREAD_TWINS(
    cudaLaunchKernelExC, v11060, cudaLaunchKernelExC_ptsz, v11060,
    (const cudaLaunchConfig_t* config, const void* func, void** args), (config, func, args),
    { return LaunchEx(config, func, args, per_thread); }, NameOfHostFunction(func))

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetFuncBySymbol(cudaFunction_t* functionPtr,
                                                       const void* symbolPtr) {
  return TraceRuntime(GWSIM_RT(cudaGetFuncBySymbol, v11000),
                      GWSIM_RT_PARAMS(cudaGetFuncBySymbol, v11000){functionPtr, symbolPtr},
                      [&] { return RegisteredFunction(functionPtr, symbolPtr); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t* kernelPtr,
                                                 const void* entryFuncAddr) {
  return TraceRuntime(GWSIM_RT(cudaGetKernel, v12000),
                      GWSIM_RT_PARAMS(cudaGetKernel, v12000){kernelPtr, entryFuncAddr},
                      [&] { return RegisteredFunction(kernelPtr, entryFuncAddr); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFuncGetName(const char** name, const void* func) {
  return TraceRuntime(GWSIM_RT(cudaFuncGetName, v12030),
                      GWSIM_RT_PARAMS(cudaFuncGetName, v12030){name, func}, [&] {
                        if (name == nullptr) return cudaErrorInvalidValue;
                        *name = NameOfHostFunction(func);
                        return *name != nullptr ? cudaSuccess : cudaErrorInvalidDeviceFunction;
                      });
}
