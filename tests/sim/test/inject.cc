// A minimal profiler loaded through CUDA_INJECTION64_PATH, for the simulator's tests.
//
// InitializeInjection subscribes to the runtime and resource domains and enables MEMCPY
// activity. It counts what it sees, and at exit (an exit handler registered by
// InitializeInjection) and at every CONTEXT_DESTROY_STARTING (including those the runtime's
// exit handler causes under GWSIM_EXIT_CONTEXT_DESTROY=1, after that summary) flushes the
// activity buffers and prints one summary line to stderr. All state is leaked on purpose: the
// last callbacks may arrive while the process exits, after this library's own static
// destructors would have run.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "inject.h"

namespace {

struct State {
  GwsimInjectStats stats{0, 0, 0, 0, 0, 0, 0, -1, -1, 0};
  std::mutex mu;
  std::set<std::string> kernels;
  size_t memcpy_records = 0;
  unsigned long long memcpy_bytes = 0;
};
State& S() {
  static auto* const state = new State();
  return *state;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *max_records = 0;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& s = S();
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(s.mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      ++s.memcpy_records;
      s.memcpy_bytes += reinterpret_cast<CUpti_ActivityMemcpy6*>(record)->bytes;
    }
  }
  std::free(buffer);
}

void PrintSummary() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  State& s = S();
  std::lock_guard lock(s.mu);
  std::string kernels;
  for (const std::string& k : s.kernels) kernels += (kernels.empty() ? "" : ",") + k;
  const GwsimInjectStats& st = s.stats;
  std::fprintf(stderr,
               "gwsim-inject: initialize=%d cu_init_finished=%d contexts_created=%d "
               "destroy_starting=%d runtime_enter=%d runtime_exit=%d exit_without_enter=%d "
               "kernels=%s memcpy_records=%zu memcpy_bytes=%llu\n",
               st.initialize_calls, st.cu_init_finished, st.contexts_created, st.destroy_starting,
               st.runtime_enter, st.runtime_exit, st.exit_without_enter, kernels.c_str(),
               s.memcpy_records, s.memcpy_bytes);
}

void CUPTIAPI Callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                       const void* data) {
  State& s = S();
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    switch (cbid) {
      case CUPTI_CBID_RESOURCE_CU_INIT_FINISHED:
        ++s.stats.cu_init_finished;
        break;
      case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        ++s.stats.contexts_created;
        break;
      case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        ++s.stats.destroy_starting;
        PrintSummary();
        break;
      default:
        break;
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  std::lock_guard lock(s.mu);
  if (s.stats.first_runtime_cbid < 0) {
    s.stats.first_runtime_cbid = static_cast<int>(cbid);
    s.stats.first_runtime_site = d->callbackSite;
  }
  if (d->callbackSite == CUPTI_API_ENTER) {
    ++s.stats.runtime_enter;
    *d->correlationData = 1;
    if (d->symbolName != nullptr) {
      ++s.stats.launches;
      s.kernels.insert(d->symbolName);
    }
  } else {
    ++s.stats.runtime_exit;
    if (*d->correlationData != 1) ++s.stats.exit_without_enter;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  State& s = S();
  ++s.stats.initialize_calls;
  std::atexit(PrintSummary);
  CUpti_SubscriberHandle handle = nullptr;
  if (cuptiSubscribe(&handle, Callback, nullptr) != CUPTI_SUCCESS) return 0;
  cuptiEnableDomain(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, handle, CUPTI_CB_DOMAIN_RESOURCE);
  cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  return 1;
}

extern "C" __attribute__((visibility("default"))) const GwsimInjectStats* gwsim_inject_stats(void) {
  return &S().stats;
}
