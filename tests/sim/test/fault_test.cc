// A kernel that faults (GWSIM_FAULT_KERNEL, GWSIM_FAULT_ERROR): the launch succeeds, the error
// surfaces at the next synchronizing call on the kernel's context and is sticky from then on,
// through the runtime and the driver, with the CUPTI EXIT callbacks carrying it. CMake runs each
// test in its own process with the environment it needs; run without it, a test skips itself.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

// The results at EXIT of the callbacks `cbid` of `domain` among `events`.
std::vector<int> ResultsOf(const std::vector<Event>& events, CUpti_CallbackDomain domain,
                           CUpti_CallbackId cbid) {
  std::vector<int> results;
  for (const Event& e : events) {
    if (e.domain == domain && e.cbid == cbid && e.site == CUPTI_API_EXIT) {
      results.push_back(e.result);
    }
  }
  return results;
}

bool FaultsKernel(const char* substring) {
  const char* kernel = std::getenv("GWSIM_FAULT_KERNEL");
  return kernel != nullptr && std::strcmp(kernel, substring) == 0;
}

TEST(FaultKernel, RuntimeErrorSurfacesAtTheNextSynchronizingCallAndSticks) {
  if (!FaultsKernel("kernel")) GTEST_SKIP() << "needs GWSIM_FAULT_KERNEL=kernel";
  InitCuda();
  ASSERT_NE(Module().handle, nullptr);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  char host[256] = {};
  // A kernel whose name does not contain the substring runs, and a synchronization succeeds.
  ASSERT_EQ(LaunchStub(&OtherStub), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  Recorder rec({kRuntime, kDriver});
  int arg = 0;
  void* args[] = {&arg};
  // "_Z6kernelPi": the launch succeeds, as do calls that do not wait for it.
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&KernelStub), dim3(2), dim3(32), args, 0,
                             nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(d, host, sizeof(host), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  // The next synchronous copy is where the error surfaces, in the runtime call and its driver
  // call alike.
  EXPECT_EQ(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost), cudaErrorIllegalAddress);
  const std::vector<Event> events = rec.Take();
  EXPECT_EQ(ResultsOf(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
            std::vector<int>{cudaSuccess});
  EXPECT_EQ(ResultsOf(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020),
            std::vector<int>{cudaErrorIllegalAddress});
  EXPECT_EQ(ResultsOf(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2),
            std::vector<int>{CUDA_ERROR_ILLEGAL_ADDRESS});

  // Sticky: the last error is not reset, and every later call on the context fails with it.
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorIllegalAddress);
  void* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 64), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemcpyAsync(d, host, sizeof(host), cudaMemcpyHostToDevice, nullptr),
            cudaErrorIllegalAddress);
  EXPECT_EQ(LaunchStub(&OtherStub), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaFree(d), cudaErrorIllegalAddress);
  // What needs no work of the context still answers.
  int count = 0;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorIllegalAddress),
               "an illegal memory access was encountered");
}

// A PTX module with one kernel, for the driver path.
constexpr char kPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry faulty_kernel()\n{\n\tret;\n}\n";

TEST(FaultKernel, DriverErrorSurfacesAtTheNextSynchronizingCallOnItsContextOnly) {
  if (!FaultsKernel("faulty")) GTEST_SKIP() << "needs GWSIM_FAULT_KERNEL=faulty";
  const char* error = std::getenv("GWSIM_FAULT_ERROR");
  const CUresult expected = error != nullptr && std::strcmp(error, "launch-failure") == 0
                                ? CUDA_ERROR_LAUNCH_FAILED
                                : CUDA_ERROR_ILLEGAL_ADDRESS;
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext healthy = nullptr;
  CUcontext faulted = nullptr;
  ASSERT_EQ(cuCtxCreate(&healthy, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate(&faulted, nullptr, 0, 0), CUDA_SUCCESS);  // current
  CUmodule mod = nullptr;
  ASSERT_EQ(cuModuleLoadData(&mod, kPtx), CUDA_SUCCESS);
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, mod, "faulty_kernel"), CUDA_SUCCESS);
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 256), CUDA_SUCCESS);

  Recorder rec({kDriver});
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemsetD8Async(d, 0, 256, nullptr), CUDA_SUCCESS);  // does not wait
  EXPECT_EQ(cuCtxSynchronize(), expected);
  EXPECT_EQ(ResultsOf(rec.Take(), kDriver, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize),
            std::vector<int>{expected});
  CUdeviceptr more = 0;
  EXPECT_EQ(cuMemAlloc(&more, 64), expected);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), expected);
  EXPECT_EQ(cuStreamQuery(nullptr), expected);
  EXPECT_EQ(cuMemFree(d), expected);
  const char* name = nullptr;
  EXPECT_EQ(cuGetErrorName(expected, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, expected == CUDA_ERROR_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED"
                                                          : "CUDA_ERROR_ILLEGAL_ADDRESS");

  // The other context never ran the kernel: it works on.
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, faulted);
  ASSERT_EQ(cuCtxSetCurrent(healthy), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&more, 64), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(more), CUDA_SUCCESS);
}

}  // namespace
}  // namespace gwsim::test
