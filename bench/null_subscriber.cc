// A CUPTI client that does nothing: it subscribes, enables exactly the
// callbacks gpuwatch enables (the list is generated at configure time from
// interpose/callbacks/callbacks.cc) and the activity kinds gpuwatch enables by default
// (MEMCPY, MEMCPY2), and its callbacks return at once; activity buffers are
// walked record by record and dropped.
//
// Run a program under it (CUDA_INJECTION64_PATH=libgwbench_null_subscriber.so)
// to measure what merely being a CUPTI subscriber costs: the floor under
// gpuwatch. gpuwatch's own cost per event is its run minus this one's
// (bench/overhead.py does the subtraction). On the simulator this floor is the
// simulator's dispatch; on a GPU it is NVIDIA's CUPTI.
//
// libcupti is dlopen'ed, like gpuwatch does, so the same file works on the
// simulator (LD_LIBRARY_PATH) and on a GPU.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include <string>

#include "bench/cupti_injection.h"
#include "interpose/calls/calls.h"

namespace {

struct Cupti : cupti_injection::ActivityApi {
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
};

Cupti g_cupti;
unsigned long long g_records = 0;

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = size_t{1} << 20;  // as gpuwatch
  cupti_injection::AllocateActivityBuffer(kBytes, buffer, size, max_records);
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (g_cupti.ActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++g_records;
  std::free(buffer);
}

void OnExit() {
  if (g_cupti.ActivityFlushAll != nullptr)
    g_cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (std::getenv("GWBENCH_NULL_VERBOSE") != nullptr) {
    std::fprintf(stderr, "gwbench-null: %llu activity records\n", g_records);
  }
}

bool Attach() {
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) h = dlopen("/usr/local/cuda/lib64/libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "gwbench-null: cannot load libcupti.so.13: %s\n", dlerror());
    return false;
  }
  Cupti c;
  if (!cupti_injection::ResolveActivityApi(h, &c) ||
      !cupti_injection::Resolve(h, "cuptiEnableCallback", &c.EnableCallback)) {
    std::fprintf(stderr, "gwbench-null: libcupti lacks a function\n");
    return false;
  }
  g_cupti = c;
  CUpti_SubscriberHandle subscriber = nullptr;
  if (c.Subscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr) !=
      CUPTI_SUCCESS) {
    std::fprintf(stderr, "gwbench-null: cuptiSubscribe failed\n");
    return false;
  }
  c.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  c.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  c.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  // GWBENCH_NULL_LAUNCH: which of gpuwatch's launch callbacks to enable
  // (all, runtime, driver, none), to tell what each domain costs per launch.
  const char* launch = std::getenv("GWBENCH_NULL_LAUNCH");
  const std::string launches = launch != nullptr ? launch : "all";
  int failed = 0;
  for (const gpuwatch::CallbackSpec& spec : gpuwatch::CallbackRegistry()) {
    if (spec.role == gpuwatch::Role::kLaunch && launches != "all" &&
        launches != (spec.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver")) {
      continue;
    }
    failed += c.EnableCallback(1, subscriber, spec.domain, spec.cbid) != CUPTI_SUCCESS;
  }
  for (const CUpti_CallbackId cbid : gpuwatch::ResourceCallbacks()) {
    failed += c.EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid) != CUPTI_SUCCESS;
  }
  if (failed != 0) std::fprintf(stderr, "gwbench-null: %d callbacks not enabled\n", failed);
  std::atexit(OnExit);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  return cupti_injection::AttachOnce(Attach);
}
