// The simulator's model of what a real driver leaves open, each way it can go: freed addresses
// handed out again at once (always), driver callbacks nested in runtime calls or not
// (GWSIM_NESTED_DRIVER_CALLBACKS), correlation ids shared, own or unjoinable
// (GWSIM_CORRELATION), and the CUPTI version reported (GWSIM_CUPTI_VERSION). The env suites
// run as their own ctest entries with the environment they need and skip without it.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "recorder.h"

namespace gwsim::test {
namespace {

// A freed block goes to the next allocation of its size, even on another thread.
TEST(AddressReuse, AFreedAddressIsHandedOutAgainAtOnceFromAnyThread) {
  void* first = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&first, 8192));
  ASSERT_EQ(cudaFree(first), cudaSuccess);
  void* again = nullptr;
  std::thread other([&] { ASSERT_EQ(cudaMalloc(&again, 8000), cudaSuccess); });  // rounds to 8192
  other.join();
  EXPECT_EQ(again, first);
  // Most recently freed first; another size does not take it.
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
  void* other_size = nullptr;
  ASSERT_EQ(cudaMalloc(&other_size, 2 << 20), cudaSuccess);
  EXPECT_NE(other_size, a);
  EXPECT_NE(other_size, b);
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&c, 1 << 20), cudaSuccess);
  EXPECT_EQ(c, b);
  // Reused memory is charged again and returned again.
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  ASSERT_EQ(cudaFree(c), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after - free_before, size_t{1} << 20);
  ASSERT_EQ(cudaFree(again), cudaSuccess);
  ASSERT_EQ(cudaFree(other_size), cudaSuccess);
  // Pinned host memory is reused among pinned host allocations only.
  void* host = nullptr;
  ASSERT_EQ(cudaMallocHost(&host, 4096), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(host), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  EXPECT_NE(device, host);
  void* host2 = nullptr;
  ASSERT_EQ(cudaMallocHost(&host2, 4096), cudaSuccess);
  EXPECT_EQ(host2, host);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(host2), cudaSuccess);
}

// Driver callbacks seen between one runtime call's ENTER and EXIT.
int NestedDriverCallbacks(const std::vector<Event>& events) {
  int depth = 0;
  int nested = 0;
  for (const Event& e : events) {
    if (e.domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      depth += e.site == CUPTI_API_ENTER ? 1 : -1;
    } else if (e.domain == CUPTI_CB_DOMAIN_DRIVER_API && depth > 0) {
      ++nested;
    }
  }
  return nested;
}

TEST(NestedDriverCallbacks, OnByDefaultOffWhenAsked) {
  const bool off = EnvIs("GWSIM_NESTED_DRIVER_CALLBACKS", "0");
  InitCuda();
  Recorder rec({CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API});
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  char host[256] = {};
  ASSERT_EQ(cudaMemcpy(p, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  CUdeviceptr direct = 0;
  ASSERT_EQ(cuMemAlloc(&direct, 256), CUDA_SUCCESS);  // a driver call of the program's own
  ASSERT_EQ(cuMemFree(direct), CUDA_SUCCESS);
  const std::vector<Event> events = rec.Take();
  EXPECT_EQ(NestedDriverCallbacks(events), off ? 0 : 6);  // cuMemAlloc, cuMemcpyHtoD, cuMemFree
  int top_level_driver = 0;
  for (const Event& e : events) {
    if (e.domain == CUPTI_CB_DOMAIN_DRIVER_API &&
        (e.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 ||
         e.cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2)) {
      ++top_level_driver;
    }
  }
  EXPECT_EQ(top_level_driver, off ? 4 : 8);
}

TEST(Correlation, RecordsCarryTheIdsTheModeSays) {
  const bool own = EnvIs("GWSIM_CORRELATION", "own");
  const bool unjoinable = EnvIs("GWSIM_CORRELATION", "unjoinable");
  void* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&p, 256));
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API});
  char host[256] = {};
  ASSERT_EQ(cudaMemcpy(p, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<Event> runtime =
      rec.Of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  const std::vector<Event> driver =
      rec.Of(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2);
  const Activity a = collector.Collect();
  ASSERT_EQ(runtime.size(), 2u);
  ASSERT_EQ(a.memcpy.size(), 1u);
  const uint32_t runtime_id = runtime[0].correlation_id;
  const CUpti_ActivityMemcpy6& r = a.memcpy[0];
  if (unjoinable) {
    EXPECT_EQ(r.runtimeCorrelationId, 0u);
    EXPECT_GE(r.correlationId, 0xF0000000u);
  } else if (own) {
    EXPECT_EQ(r.runtimeCorrelationId, runtime_id);
    EXPECT_NE(r.correlationId, runtime_id);
    if (!driver.empty()) {
      EXPECT_EQ(r.correlationId, driver[0].correlation_id);
    }
  } else {
    // `shared`, as NVIDIA's CUPTI does: the runtime call's id, runtimeCorrelationId 0.
    EXPECT_EQ(r.correlationId, runtime_id);
    EXPECT_EQ(r.runtimeCorrelationId, 0u);
    if (!driver.empty()) {
      EXPECT_EQ(driver[0].correlation_id, runtime_id);
    }
  }
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST(CuptiVersion, IsTheHeadersUnlessToldOtherwise) {
  uint32_t version = 0;
  ASSERT_EQ(cuptiGetVersion(&version), CUPTI_SUCCESS);
  const char* wanted = std::getenv("GWSIM_CUPTI_VERSION");
  EXPECT_EQ(version, wanted != nullptr ? std::strtoul(wanted, nullptr, 10) : CUPTI_API_VERSION);
}

}  // namespace
}  // namespace gwsim::test
