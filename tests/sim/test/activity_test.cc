// The CUPTI activity contract: MEMCPY, MEMCPY2, MEMORY2 and KERNEL records, modelled
// durations, the simulated clock, buffer delivery and drops.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

TEST(Activity, MemcpyRecordsCarryKindsAndTheModelledDuration) {
  InitCuda();
  const Model m = ReadModel();
  constexpr size_t kBytes = 1 << 20;
  std::vector<char> pageable(kBytes, 1);
  void* pinned = nullptr;
  void* dev = nullptr;
  void* dev2 = nullptr;
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev2, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, kBytes), cudaSuccess);

  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  ASSERT_EQ(cudaMemcpy(dev, pageable.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, pinned, kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pageable.data(), dev, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev2, dev, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pinned, pageable.data(), kBytes, cudaMemcpyHostToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(managed, pageable.data(), kBytes, cudaMemcpyDefault), cudaSuccess);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memcpy.size(), 6u);

  struct Expect {
    uint8_t copy_kind;
    uint8_t src;
    uint8_t dst;
    double gbps;
  } const expected[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, kPageable, kDevice, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, kPinned, kDevice, m.bw_pinned},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, kDevice, kPageable, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, kDevice, kDevice, m.bw_device},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, kPageable, kPinned, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, kPageable, kManaged, m.bw_pageable},
  };
  for (size_t i = 0; i < a.memcpy.size(); ++i) {
    const CUpti_ActivityMemcpy6& r = a.memcpy[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(r.kind, CUPTI_ACTIVITY_KIND_MEMCPY);
    EXPECT_EQ(r.copyKind, expected[i].copy_kind);
    EXPECT_EQ(r.srcKind, expected[i].src);
    EXPECT_EQ(r.dstKind, expected[i].dst);
    EXPECT_EQ(r.bytes, kBytes);
    EXPECT_EQ(r.end - r.start, m.CopyNs(kBytes, expected[i].gbps));
    EXPECT_EQ(r.flags, 0);
    EXPECT_EQ(r.deviceId, 0u);
    EXPECT_NE(r.contextId, 0u);
    EXPECT_NE(r.correlationId, 0u);
    // GWSIM_CORRELATION=shared: correlationId is the runtime call's; as on NVIDIA's CUPTI,
    // runtimeCorrelationId stays 0.
    EXPECT_EQ(r.runtimeCorrelationId, 0u);
    // The simulated clock: each copy starts where the previous one ended.
    if (i > 0) {
      EXPECT_EQ(r.start, a.memcpy[i - 1].end);
    }
  }
  std::vector<char> back(kBytes);
  ASSERT_EQ(cudaMemcpy(back.data(), managed, kBytes, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back, pageable);
  cudaFree(managed);
  cudaFree(dev2);
  cudaFree(dev);
  cudaFreeHost(pinned);
}

TEST(Activity, AsyncCopiesAreFlaggedAndCarryTheirStreamAndCorrelation) {
  void* dev = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&dev, 4096));
  cudaStream_t stream = nullptr;
  unsigned long long stream_id = 0;
  ASSERT_NO_FATAL_FAILURE(CreateStreamWithId(&stream, &stream_id));
  std::vector<char> host(4096, 3);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({CUPTI_CB_DOMAIN_RUNTIME_API});
  ASSERT_EQ(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  // A driver call made directly has no runtime correlation.
  ASSERT_EQ(cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dev), host.data(), 100), CUDA_SUCCESS);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memcpy.size(), 2u);
  EXPECT_EQ(a.memcpy[0].flags, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC);
  EXPECT_EQ(a.memcpy[0].streamId, stream_id);
  EXPECT_EQ(a.memcpy[0].correlationId,
            rec.CorrelationOfOneCall(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  EXPECT_EQ(a.memcpy[0].runtimeCorrelationId, 0u);  // shared: correlationId is the runtime's
  EXPECT_EQ(a.memcpy[1].flags, 0);
  EXPECT_EQ(a.memcpy[1].runtimeCorrelationId, 0u);
  EXPECT_NE(a.memcpy[1].correlationId, 0u);
  EXPECT_EQ(a.memcpy[1].bytes, 100u);
  cudaStreamDestroy(stream);
  cudaFree(dev);
}

TEST(Activity, TimestampsAndEventsFollowTheSimulatedClock) {
  InitCuda();
  const Model m = ReadModel();
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1 << 16), cudaSuccess);
  std::vector<char> host(1 << 16);
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  uint64_t t0 = 0;
  uint64_t t1 = 0;
  ASSERT_EQ(cuptiGetTimestamp(&t0), CUPTI_SUCCESS);
  ASSERT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cuptiGetTimestamp(&t1), CUPTI_SUCCESS);
  const uint64_t expected = m.CopyNs(host.size(), m.bw_pageable);
  EXPECT_EQ(t1 - t0, expected);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_NEAR(ms, static_cast<double>(expected) / 1e6, 1e-6);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(dev);
}

TEST(Activity, MemoryRecordsForEachKindOfAllocation) {
  // A fresh context, so that the __device__ variable below is allocated again.
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  InitCuda();
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  Recorder rec({CUPTI_CB_DOMAIN_RUNTIME_API});
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1000), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 2000, cudaHostAllocDefault), cudaSuccess);
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 3000), cudaSuccess);
  cudaStream_t stream = nullptr;
  unsigned long long stream_id = 0;
  ASSERT_NO_FATAL_FAILURE(CreateStreamWithId(&stream, &stream_id));
  void* async = nullptr;
  ASSERT_EQ(cudaMallocAsync(&async, 4000, stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(async, stream), cudaSuccess);
  // A __device__ variable gets its storage (and a DEVICE_STATIC record) on first use.
  Module();
  int values[16] = {1, 2, 3};
  ASSERT_EQ(cudaMemcpyToSymbol(g_device_var_shadow, values, sizeof(values)), cudaSuccess);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memory.size(), 7u);
  const auto& alloc = a.memory[0];
  EXPECT_EQ(alloc.memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(alloc.memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(alloc.address, reinterpret_cast<uint64_t>(dev));
  EXPECT_EQ(alloc.bytes, 1000u);
  EXPECT_EQ(alloc.isAsync, 0u);
  EXPECT_EQ(alloc.streamId, CUPTI_INVALID_STREAM_ID);
  EXPECT_EQ(alloc.deviceId, 0u);
  EXPECT_EQ(alloc.correlationId,
            rec.CorrelationOfOneCall(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020));
  const auto& release = a.memory[1];
  EXPECT_EQ(release.memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(release.address, alloc.address);
  EXPECT_EQ(release.bytes, 1000u);
  EXPECT_EQ(a.memory[2].memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(a.memory[2].bytes, 2000u);
  EXPECT_EQ(a.memory[3].memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
  const auto& async_alloc = a.memory[4];
  EXPECT_EQ(async_alloc.isAsync, 1u);
  EXPECT_EQ(async_alloc.streamId, stream_id);
  EXPECT_EQ(async_alloc.memoryPoolConfig.memoryPoolType, CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL);
  EXPECT_EQ(a.memory[5].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(a.memory[5].isAsync, 1u);
  const auto& variable = a.memory[6];
  EXPECT_EQ(variable.memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC);
  ASSERT_NE(variable.name, nullptr);
  EXPECT_STREQ(variable.name, "g_device_var");
  EXPECT_EQ(variable.bytes, sizeof(g_device_var_shadow));
  cudaStreamDestroy(stream);
  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST(Activity, KernelRecordsCarryNameGridAndModelledDuration) {
  InitCuda();
  Module();
  const Model m = ReadModel();
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  Recorder rec({CUPTI_CB_DOMAIN_RUNTIME_API});
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&KernelStub), dim3(4, 2), dim3(128),
                             nullptr, 256, nullptr),
            cudaSuccess);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.kernels.size(), 1u);
  const CUpti_ActivityKernel10& k = a.kernels[0];
  EXPECT_EQ(k.kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  EXPECT_STREQ(k.name, "_Z6kernelPi");
  EXPECT_EQ(k.gridX, 4);
  EXPECT_EQ(k.gridY, 2);
  EXPECT_EQ(k.gridZ, 1);
  EXPECT_EQ(k.blockX, 128);
  EXPECT_EQ(k.dynamicSharedMemory, 256);
  EXPECT_EQ(k.end - k.start, m.kernel_ns);
  EXPECT_EQ(k.correlationId,
            rec.CorrelationOfOneCall(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
}

TEST(Activity, PlainKernelKindWhenOnlyKernelIsEnabled) {
  InitCuda();
  Module();
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_KERNEL});
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&OtherStub), dim3(1), dim3(1), nullptr,
                             0, nullptr),
            cudaSuccess);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_EQ(a.kernels[0].kind, CUPTI_ACTIVITY_KIND_KERNEL);
  EXPECT_STREQ(a.kernels[0].name, "_Z5otherv");
}

TEST(Activity, DisabledKindsProduceNoRecords) {
  InitCuda();
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_KERNEL});
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 64), cudaSuccess);
  char host[64] = {};
  ASSERT_EQ(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  const Activity a = collector.Collect();
  EXPECT_TRUE(a.memcpy.empty());
  EXPECT_TRUE(a.memory.empty());
}

TEST(Activity, FullBuffersAreDeliveredBeforeAnyFlush) {
  void* dev = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&dev, 64));
  char host[64] = {};
  // Room for three records per buffer.
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY}, 3 * sizeof(CUpti_ActivityMemcpy6));
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  }
  const Activity before_flush = collector.Peek();
  EXPECT_EQ(before_flush.buffers_completed, 3u);
  EXPECT_EQ(before_flush.memcpy.size(), 9u);
  const Activity rest = collector.Collect();
  EXPECT_EQ(rest.memcpy.size(), 1u);
  cudaFree(dev);
}

TEST(Activity, RecordsAreDroppedWithoutABuffer) {
  void* dev = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&dev, 64));
  char host[64] = {};
  size_t dropped_before = 0;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped_before), CUPTI_SUCCESS);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY}, 0);
  ASSERT_EQ(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE(collector.Collect().memcpy.empty());
  size_t dropped = 0;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped - dropped_before, 2u);
  cudaFree(dev);
}

TEST(Activity, PeerCopiesUseMemcpy2WhenEnabled) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs GWSIM_DEVICE_COUNT >= 2";
  const Model m = ReadModel();
  void* on0 = nullptr;
  void* on1 = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on0, 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on1, 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2});
    ASSERT_EQ(cudaMemcpyPeer(on1, 1, on0, 0, 4096), cudaSuccess);
    const Activity a = collector.Collect();
    EXPECT_TRUE(a.memcpy.empty());
    ASSERT_EQ(a.peer.size(), 1u);
    EXPECT_EQ(a.peer[0].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    EXPECT_EQ(a.peer[0].srcDeviceId, 0u);
    EXPECT_EQ(a.peer[0].dstDeviceId, 1u);
    EXPECT_EQ(a.peer[0].end - a.peer[0].start, m.CopyNs(4096, m.bw_device));
  }
  {
    ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
    ASSERT_EQ(cudaMemcpy(on0, on1, 4096, cudaMemcpyDefault), cudaSuccess);
    const Activity a = collector.Collect();
    ASSERT_EQ(a.memcpy.size(), 1u);
    EXPECT_EQ(a.memcpy[0].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  }
  cudaFree(on0);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaFree(on1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(Activity, GetNextRecordStopsAtTheEndOfValidData) {
  alignas(8) uint8_t buffer[sizeof(CUpti_ActivityMemcpy6) * 2] = {};
  CUpti_ActivityMemcpy6 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  std::memcpy(buffer, &r, sizeof(r));
  CUpti_Activity* record = nullptr;
  ASSERT_EQ(cuptiActivityGetNextRecord(buffer, sizeof(r), &record), CUPTI_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(record), buffer);
  EXPECT_EQ(cuptiActivityGetNextRecord(buffer, sizeof(r), &record), CUPTI_ERROR_MAX_LIMIT_REACHED);
  record = nullptr;
  EXPECT_EQ(cuptiActivityGetNextRecord(buffer, sizeof(r) - 8, &record), CUPTI_ERROR_INVALID_KIND);
}

}  // namespace
}  // namespace gwsim::test
