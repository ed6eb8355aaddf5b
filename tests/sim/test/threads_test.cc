// Many threads allocating at once, with a subscriber that calls back into CUDA.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 10000;

TEST(Threads, ConcurrentAllocationsAreAllTracedAndAccounted) {
  InitCuda();
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  std::atomic<int> runtime_enter{0};
  std::atomic<int> runtime_exit{0};
  std::atomic<int> driver_alloc{0};
  std::atomic<int> inner_device{0};
  // Counting only: a Recorder would keep 640,000 events.
  auto hook = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 &&
        d->callbackSite == CUPTI_API_EXIT) {
      driver_alloc.fetch_add(1);
    }
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API ||
        cbid != CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) {
      return;
    }
    if (d->callbackSite == CUPTI_API_ENTER) {
      runtime_enter.fetch_add(1);
      return;
    }
    runtime_exit.fetch_add(1);
    // Re-entering CUDA from the callback, on every thread at once.
    const auto* params = static_cast<const cudaMalloc_v3020_params*>(d->functionParams);
    cudaPointerAttributes attrs{};
    if (cudaPointerGetAttributes(&attrs, *params->devPtr) == cudaSuccess &&
        attrs.type == cudaMemoryTypeDevice) {
      inner_device.fetch_add(1);
    }
  };
  struct Counter {
    std::function<void(CUpti_CallbackDomain, CUpti_CallbackId, const void*)> hook;
    static void CUPTIAPI Callback(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const void* data) {
      static_cast<Counter*>(self)->hook(domain, cbid, data);
    }
  } counter{hook};
  CUpti_SubscriberHandle handle = nullptr;
  ASSERT_EQ(cuptiSubscribe(&handle, Counter::Callback, &counter), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableDomain(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableCallback(1, handle, CUPTI_CB_DOMAIN_DRIVER_API,
                                CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2),
            CUPTI_SUCCESS);
  size_t dropped_before = 0;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped_before), CUPTI_SUCCESS);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2}, 64 << 10);

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<void*> live;
      for (int i = 0; i < kIterations; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 64 + static_cast<size_t>((i * 7 + t) % 4096)) != cudaSuccess) {
          failures.fetch_add(1);
          continue;
        }
        live.push_back(p);
        if (live.size() == 16) {  // keep a few alive so that frees interleave with allocations
          for (void* q : live) {
            if (cudaFree(q) != cudaSuccess) failures.fetch_add(1);
          }
          live.clear();
        }
      }
      for (void* q : live) {
        if (cudaFree(q) != cudaSuccess) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(cuptiUnsubscribe(handle), CUPTI_SUCCESS);

  constexpr int kCalls = kThreads * kIterations;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(runtime_enter.load(), kCalls);
  EXPECT_EQ(runtime_exit.load(), kCalls);
  EXPECT_EQ(driver_alloc.load(), kCalls);
  EXPECT_EQ(inner_device.load(), kCalls);
  const Activity a = collector.Collect();
  EXPECT_EQ(a.memory.size(), 2u * kCalls);
  size_t dropped = 0;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, dropped_before);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
}

}  // namespace
}  // namespace gwsim::test
