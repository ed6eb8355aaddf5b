// What PyTorch's profiler (Kineto) asks of CUPTI's activity API beyond copies and kernels:
// RUNTIME and DRIVER records of the API calls, EXTERNAL_CORRELATION records tying the ids a
// client pushes to the calls made meanwhile, and records on the client's clock once it registers
// a timestamp callback.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

// A 1 MiB device buffer and pageable host buffer to copy between, and the copy model.
class ApiRecords : public ::testing::Test {
 protected:
  static constexpr size_t kBytes = 1 << 20;
  void SetUp() override {
    InitCuda();
    ASSERT_EQ(cudaMalloc(&dev_, kBytes), cudaSuccess);
  }
  void TearDown() override { EXPECT_EQ(cudaFree(dev_), cudaSuccess); }
  cudaError_t CopyIn() { return cudaMemcpy(dev_, host_.data(), kBytes, cudaMemcpyHostToDevice); }
  uint64_t CopyNs() const { return model_.CopyNs(kBytes, model_.bw_pageable); }

  void* dev_ = nullptr;
  std::vector<char> host_ = std::vector<char>(kBytes, 1);
  Model model_ = ReadModel();
};

// A runtime call and the driver call it makes each have a record of their kind, with the
// call's cbid, the simulated clock at ENTER and EXIT (a copy's modelled duration between them),
// the process, the thread and the result. The runtime record's correlation id is the callbacks'
// (and the copy record's); the driver record's is one of its own. A call that fails has its
// error as returnValue. Calls the runtime makes for its own bookkeeping have none.
TEST_F(ApiRecords, RuntimeAndDriverCallsHaveRecordsWithTheirTimesAndResults) {
  ActivityCollector collector(
      {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({kRuntime});
  ASSERT_EQ(CopyIn(), cudaSuccess);
  const uint32_t correlation =
      rec.CorrelationOfOneCall(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  EXPECT_EQ(cudaFree(static_cast<char*>(dev_) + 8), cudaErrorInvalidValue);
  const Activity a = collector.Collect();

  ASSERT_EQ(a.memcpy.size(), 1u);
  std::vector<CUpti_ActivityAPI> runtime;
  std::vector<CUpti_ActivityAPI> driver;
  for (const CUpti_ActivityAPI& r : a.api) {
    (r.kind == CUPTI_ACTIVITY_KIND_RUNTIME ? runtime : driver).push_back(r);
    EXPECT_EQ(r.processId, static_cast<uint32_t>(getpid()));
    EXPECT_EQ(r.threadId, static_cast<uint32_t>(gettid()));
    EXPECT_LE(r.start, r.end);
  }
  ASSERT_EQ(runtime.size(), 2u);
  EXPECT_EQ(runtime[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  EXPECT_EQ(runtime[0].correlationId, correlation);
  EXPECT_EQ(a.memcpy[0].correlationId, correlation);
  EXPECT_EQ(runtime[0].returnValue, static_cast<uint32_t>(cudaSuccess));
  EXPECT_EQ(runtime[0].end - runtime[0].start, CopyNs());
  EXPECT_LE(runtime[0].start, a.memcpy[0].start);
  EXPECT_GE(runtime[0].end, a.memcpy[0].end);
  EXPECT_EQ(runtime[1].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
  EXPECT_EQ(runtime[1].returnValue, static_cast<uint32_t>(cudaErrorInvalidValue));
  ASSERT_EQ(driver.size(), 2u);
  EXPECT_EQ(driver[0].cbid, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2);
  EXPECT_NE(driver[0].correlationId, correlation);
  EXPECT_EQ(driver[0].end - driver[0].start, CopyNs());
  EXPECT_EQ(driver[1].cbid, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2);
  EXPECT_EQ(driver[1].returnValue, static_cast<uint32_t>(CUDA_ERROR_INVALID_VALUE));
}

// While a thread has external ids pushed, each runtime and driver call it makes has an
// EXTERNAL_CORRELATION record per kind of id, with the innermost id and the call's correlation
// id; none while the kind is disabled.
TEST_F(ApiRecords, ExternalCorrelationTiesPushedIdsToCalls) {
  void* dev = nullptr;
  {
    ActivityCollector collector(
        {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME});
    ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 41),
              CUPTI_SUCCESS);
    ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42),
              CUPTI_SUCCESS);
    ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 7),
              CUPTI_SUCCESS);
    ASSERT_EQ(cudaMalloc(&dev, 64), cudaSuccess);
    uint64_t last = 0;
    ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &last),
              CUPTI_SUCCESS);
    EXPECT_EQ(last, 7u);
    ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
              CUPTI_SUCCESS);
    ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
              CUPTI_SUCCESS);
    EXPECT_EQ(last, 41u);
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
    const Activity a = collector.Collect();
    ASSERT_EQ(a.api.size(), 2u);  // cudaMalloc, cudaFree
    const uint32_t malloc_id = a.api[0].correlationId;
    // cudaMalloc and the cuMemAlloc_v2 it makes (same id: GWSIM_CORRELATION=shared), two kinds.
    ASSERT_EQ(a.external.size(), 4u);
    for (const CUpti_ActivityExternalCorrelation& e : a.external) {
      EXPECT_EQ(e.correlationId, malloc_id);
      EXPECT_EQ(e.externalId, e.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 ? 42u : 7u);
    }
  }
  ActivityCollector runtime_only({CUPTI_ACTIVITY_KIND_RUNTIME});
  ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 9),
            CUPTI_SUCCESS);
  ASSERT_EQ(cudaMalloc(&dev, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr),
            CUPTI_SUCCESS);
  EXPECT_TRUE(runtime_only.Collect().external.empty());
}

uint64_t g_client_offset = 0;  // what the client's clock is ahead of the simulated one

uint64_t ClientClock() {
  uint64_t now = 0;
  EXPECT_EQ(cuptiGetTimestamp(&now), CUPTI_SUCCESS);
  return now + g_client_offset;
}

// After cuptiActivityRegisterTimestampCallback, records carry the client's clock: moved by the
// difference of the two clocks when they are made, durations kept. (The callback stays
// registered for the process; with the offset back at 0 it changes nothing for other tests.)
TEST_F(ApiRecords, RecordsFollowTheRegisteredTimestampCallback) {
  EXPECT_EQ(cuptiActivityRegisterTimestampCallback(nullptr), CUPTI_ERROR_INVALID_PARAMETER);
  ASSERT_EQ(cuptiActivityRegisterTimestampCallback(ClientClock), CUPTI_SUCCESS);
  g_client_offset = uint64_t{1} << 50;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_MEMCPY});
  uint64_t before = 0;
  ASSERT_EQ(cuptiGetTimestamp(&before), CUPTI_SUCCESS);
  ASSERT_EQ(CopyIn(), cudaSuccess);
  uint64_t after = 0;
  ASSERT_EQ(cuptiGetTimestamp(&after), CUPTI_SUCCESS);
  const Activity a = collector.Collect();
  g_client_offset = 0;
  ASSERT_EQ(a.memcpy.size(), 1u);
  ASSERT_EQ(a.api.size(), 1u);
  EXPECT_GE(a.memcpy[0].start, before + (uint64_t{1} << 50));
  EXPECT_LE(a.memcpy[0].end, after + (uint64_t{1} << 50));
  EXPECT_EQ(a.memcpy[0].end - a.memcpy[0].start, CopyNs());
  EXPECT_EQ(a.api[0].start, before + (uint64_t{1} << 50));
  EXPECT_EQ(a.api[0].end, after + (uint64_t{1} << 50));
}

}  // namespace
}  // namespace gwsim::test
