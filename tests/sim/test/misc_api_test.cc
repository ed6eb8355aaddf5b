// Profiler control, managed-memory prefetch and advice, function attributes and the occupancy
// model (including NVIDIA's cudaOccupancyMaxPotentialBlockSize templates from cuda_runtime.h).
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recorder.h"

extern "C" {
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count,
                                                cudaMemLocation location, unsigned int flags,
                                                cudaStream_t stream);
CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                            CUmemLocation location, unsigned int flags,
                                            CUstream hStream);
}

namespace gwsim::test {
namespace {

std::vector<std::string> EnterNames(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const Event& e : events) {
    if (e.site == CUPTI_API_ENTER && (e.domain == kRuntime || e.domain == kDriver)) {
      names.push_back(e.name);
    }
  }
  return names;
}

CUfunction FunctionOf(void (*stub)()) {
  cudaFunction_t f = nullptr;
  EXPECT_EQ(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(stub)), cudaSuccess);
  return reinterpret_cast<CUfunction>(f);
}

TEST(Profiler, StartAndStopAreTracedAndSucceed) {
  InitCuda();
  Recorder rec({kRuntime, kDriver});
  EXPECT_EQ(cudaProfilerStart(), cudaSuccess);
  EXPECT_EQ(cudaProfilerStop(), cudaSuccess);
  EXPECT_EQ(cuProfilerStart(), CUDA_SUCCESS);
  EXPECT_EQ(cuProfilerStop(), CUDA_SUCCESS);
  const auto events = rec.Take();
  EXPECT_EQ(EnterNames(events),
            (std::vector<std::string>{"cudaProfilerStart", "cuProfilerStart", "cudaProfilerStop",
                                      "cuProfilerStop", "cuProfilerStart", "cuProfilerStop"}));
  ASSERT_EQ(events.size(), 12u);
  EXPECT_EQ(events[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
  EXPECT_EQ(events[1].cbid, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
  EXPECT_EQ(events[4].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
  EXPECT_EQ(events[5].cbid, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
  for (const Event& e : events) EXPECT_EQ(e.params, nullptr);  // no params struct exists
}

TEST(ManagedMemory, PrefetchAndAdviceNeedManagedMemory) {
  InitCuda();
  void* managed = nullptr;
  void* device = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 4096), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  std::vector<char> pageable(4096);
  const cudaMemLocation dev0{cudaMemLocationTypeDevice, 0};
  const cudaMemLocation host{cudaMemLocationTypeHost, 0};
  int seen_device = -1;
  size_t seen_count = 0;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({kRuntime, kDriver},
               [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
                 if (const auto* p = ParamsAt<cuMemPrefetchAsync_v2_params>(
                         kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_v2, CUPTI_API_ENTER,
                         domain, cbid, data)) {
                   seen_device = p->location.id;
                   seen_count = p->count;
                 }
               });
  ASSERT_EQ(cudaMemPrefetchAsync(managed, 4096, dev0, 0, nullptr), cudaSuccess);
  EXPECT_EQ(seen_device, 0);
  EXPECT_EQ(seen_count, 4096u);
  ASSERT_EQ(cudaMemPrefetchAsync(static_cast<char*>(managed) + 1024, 1024, host, 0, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaMemPrefetchAsync_ptsz(managed, 4096, dev0, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(managed, 4096, cudaMemAdviseSetReadMostly, dev0), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(managed, 4096, cudaMemAdviseSetPreferredLocation, dev0), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(managed, 2048, cudaMemAdviseSetAccessedBy, host), cudaSuccess);
  EXPECT_EQ(EnterNames(rec.Take()),
            (std::vector<std::string>{"cudaMemPrefetchAsync", "cuMemPrefetchAsync_v2",
                                      "cudaMemPrefetchAsync", "cuMemPrefetchAsync_v2",
                                      "cudaMemPrefetchAsync_ptsz", "cuMemPrefetchAsync_v2_ptsz",
                                      "cudaMemAdvise", "cuMemAdvise_v2", "cudaMemAdvise",
                                      "cuMemAdvise_v2", "cudaMemAdvise", "cuMemAdvise_v2"}));
  // Not managed memory, past its end, nothing, a device that does not exist, unknown flags.
  EXPECT_EQ(cudaMemPrefetchAsync(device, 4096, dev0, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(pageable.data(), 4096, dev0, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(static_cast<char*>(managed) + 2048, 4096, dev0, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(managed, 0, dev0, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(managed, 4096, cudaMemLocation{cudaMemLocationTypeDevice, 7}, 0,
                                 nullptr),
            cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemPrefetchAsync(managed, 4096, dev0, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemAdvise(device, 4096, cudaMemAdviseSetReadMostly, dev0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemAdvise(managed, 4096, static_cast<cudaMemoryAdvise>(7), dev0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemAdvise(managed, 4096, cudaMemAdviseSetAccessedBy,
                          cudaMemLocation{cudaMemLocationTypeDevice, 7}),
            cudaErrorInvalidDevice);
  cudaGetLastError();
  // The driver entry points directly.
  const auto m = reinterpret_cast<CUdeviceptr>(managed);
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = 0;
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, loc, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPrefetchAsync_v2_ptsz(m, 4096, loc, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAdvise(m, 4096, CU_MEM_ADVISE_UNSET_READ_MOSTLY, loc), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPrefetchAsync(reinterpret_cast<CUdeviceptr>(device), 4096, loc, 0, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, loc, 0, reinterpret_cast<CUstream>(&loc)),
            CUDA_ERROR_INVALID_HANDLE);
  // Nothing moves: no copy records.
  EXPECT_TRUE(collector.Collect().memcpy.empty());
  cudaFree(managed);
  cudaFree(device);
}

TEST(Functions, AttributesAreFixedAndSettable) {
  InitCuda();
  Module();
  cudaFuncAttributes attr{};
  ASSERT_EQ(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&KernelStub)), cudaSuccess);
  EXPECT_EQ(attr.numRegs, 32);
  EXPECT_EQ(attr.maxThreadsPerBlock, 1024);
  EXPECT_EQ(attr.sharedSizeBytes, 0u);
  EXPECT_EQ(attr.constSizeBytes, 0u);
  EXPECT_EQ(attr.localSizeBytes, 0u);
  EXPECT_EQ(attr.maxDynamicSharedSizeBytes, 48 << 10);
  EXPECT_EQ(attr.preferredShmemCarveout, -1);
  EXPECT_EQ(attr.ptxVersion, 90);
  EXPECT_EQ(attr.binaryVersion, 90);
  EXPECT_EQ(attr.nonPortableClusterSizeAllowed, 0);

  const void* other = reinterpret_cast<const void*>(&OtherStub);
  Recorder rec({kRuntime, kDriver});
  ASSERT_EQ(cudaFuncSetAttribute(other, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10),
            cudaSuccess);
  ASSERT_EQ(cudaFuncSetAttribute(other, cudaFuncAttributePreferredSharedMemoryCarveout, 50),
            cudaSuccess);
  ASSERT_EQ(cudaFuncSetCacheConfig(other, cudaFuncCachePreferShared), cudaSuccess);
  EXPECT_EQ(EnterNames(rec.Take()),
            (std::vector<std::string>{"cudaFuncSetAttribute", "cuFuncSetAttribute",
                                      "cudaFuncSetAttribute", "cuFuncSetAttribute",
                                      "cudaFuncSetCacheConfig", "cuFuncSetCacheConfig"}));
  ASSERT_EQ(cudaFuncGetAttributes(&attr, other), cudaSuccess);
  EXPECT_EQ(attr.maxDynamicSharedSizeBytes, 100 << 10);
  EXPECT_EQ(attr.preferredShmemCarveout, 50);
  EXPECT_TRUE(EnterNames(rec.Take()) == std::vector<std::string>{"cudaFuncGetAttributes"});
  // Launches may use what the attribute allows, and no more.
  EXPECT_EQ(cudaLaunchKernel(other, dim3(1), dim3(32), nullptr, 64 << 10, nullptr), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&KernelStub), dim3(1), dim3(32), nullptr,
                             64 << 10, nullptr),
            cudaErrorInvalidValue);
  // Limits and read-only attributes.
  EXPECT_EQ(cudaFuncSetAttribute(other, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(other, cudaFuncAttributeMaxDynamicSharedMemorySize, -1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(other, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(&InitCuda),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&InitCuda)),
            cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  const CUfunction f = FunctionOf(&OtherStub);
  int value = 0;
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 100 << 10);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 64), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX, f), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_NUM_REGS, reinterpret_cast<CUfunction>(&value)),
      CUDA_ERROR_INVALID_HANDLE);
  // Back to the defaults for the other tests of this process.
  ASSERT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 48 << 10),
            CUDA_SUCCESS);
  ASSERT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, -1),
            CUDA_SUCCESS);
  ASSERT_EQ(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_NONE), CUDA_SUCCESS);
}

TEST(Occupancy, ActiveBlocksFollowTheModel) {
  InitCuda();
  Module();
  const void* k = reinterpret_cast<const void*>(&KernelStub);
  auto blocks = [&](int block_size, size_t shared) {
    int n = -1;
    EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, block_size, shared),
              cudaSuccess);
    return n;
  };
  EXPECT_EQ(blocks(32, 0), 32);  // the block limit
  EXPECT_EQ(blocks(64, 0), 32);
  EXPECT_EQ(blocks(96, 0), 21);  // 64 warps / 3
  EXPECT_EQ(blocks(128, 0), 16);
  EXPECT_EQ(blocks(256, 0), 8);
  EXPECT_EQ(blocks(1024, 0), 2);
  EXPECT_EQ(blocks(1025, 0), 0);        // cannot be launched
  EXPECT_EQ(blocks(128, 48 << 10), 4);  // 228 KiB / (48 KiB + 1 KiB reserved)
  EXPECT_EQ(blocks(64, 20000), 11);     // 228 KiB / (20096 + 1024)
  EXPECT_EQ(blocks(256, 20000), 8);
  EXPECT_EQ(blocks(128, (48 << 10) + 1), 0);  // more than the function allows
  int n = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                &n, k, 256, 0, cudaOccupancyDisableCachingOverride),
            cudaSuccess);
  EXPECT_EQ(n, 8);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, k, 256, 0, 2),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &n, reinterpret_cast<const void*>(&InitCuda), 256, 0),
            cudaErrorInvalidDeviceFunction);
  size_t shared = 0;
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&shared, k, 2, 256), cudaSuccess);
  EXPECT_EQ(shared, 48u << 10);  // capped by the function's limit
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&shared, k, 8, 256), cudaSuccess);
  EXPECT_EQ(shared, 28160u);  // 228 KiB / 8 - 1 KiB
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&shared, k, 32, 32), cudaSuccess);
  EXPECT_EQ(shared, 6272u);
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&shared, k, 9, 256), cudaSuccess);
  EXPECT_EQ(shared, 0u);  // nine blocks of 256 threads never fit
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(8);
  config.blockDim = dim3(128);
  int cluster = 0;
  ASSERT_EQ(cudaOccupancyMaxPotentialClusterSize(&cluster, k, &config), cudaSuccess);
  EXPECT_EQ(cluster, 8);
  EXPECT_EQ(cudaOccupancyMaxPotentialClusterSize(&cluster, k, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();

  // The same through the driver, with the traced calls.
  const CUfunction f = FunctionOf(&KernelStub);
  Recorder rec({kRuntime, kDriver});
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, 96, 0), cudaSuccess);
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 96, 0), CUDA_SUCCESS);
  EXPECT_EQ(n, 21);
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 1024, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(n, 2);
  ASSERT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(&shared, f, 8, 256), CUDA_SUCCESS);
  EXPECT_EQ(shared, 28160u);
  const auto events = rec.Take();
  EXPECT_EQ(EnterNames(events),
            (std::vector<std::string>{"cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                                      "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                      "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                      "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                                      "cuOccupancyAvailableDynamicSMemPerBlock"}));
  EXPECT_EQ(events[0].cbid,
            CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050);
}

size_t SharedPerThread(int block_size) { return static_cast<size_t>(block_size) * 64; }

TEST(Occupancy, MaxPotentialBlockSizeTemplatesGetTheModelledAnswer) {
  InitCuda();
  Module();
  // Compiled by a host compiler (not nvcc), the templates take the kernel as `const void*`.
  const void* k = reinterpret_cast<const void*>(&KernelStub);
  int grid = 0;
  int block = 0;
  // 1024 threads reach the full 2048 threads of an SM with two blocks: 2 x 132 SMs.
  ASSERT_EQ(cudaOccupancyMaxPotentialBlockSize(&grid, &block, k), cudaSuccess);
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 264);
  // At most 200 threads: 128 is the largest size that fills an SM (16 blocks).
  ASSERT_EQ(cudaOccupancyMaxPotentialBlockSize(&grid, &block, k, 0, 200), cudaSuccess);
  EXPECT_EQ(block, 128);
  EXPECT_EQ(grid, 16 * 132);
  // 64 bytes of shared memory per thread: 512 threads (4 blocks of 33 KiB) fill an SM.
  ASSERT_EQ(cudaOccupancyMaxPotentialBlockSizeVariableSMem(&grid, &block, k, SharedPerThread),
            cudaSuccess);
  EXPECT_EQ(block, 512);
  EXPECT_EQ(grid, 4 * 132);
  // The driver's version agrees.
  const CUfunction f = FunctionOf(&KernelStub);
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 264);
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, nullptr, 0, 200, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(block, 128);
  auto per_thread = [](int size) -> size_t { return static_cast<size_t>(size) * 64; };
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, per_thread, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 512);
  EXPECT_EQ(grid, 528);
  EXPECT_EQ(cuOccupancyMaxPotentialBlockSize(nullptr, &block, f, nullptr, 0, 0),
            CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace gwsim::test
