// What the two CUDA_INJECTION64_PATH libraries outside gpuwatch share: the
// benchmarks' null subscriber (bench/null_subscriber.cc) and the GPU
// validation's recorder (tests/gpu/cupti_recorder.cc). Both dlopen libcupti,
// as gpuwatch does, so that the same file works on the simulator and on a GPU;
// this header resolves the activity functions they both use and hands CUPTI
// its activity buffers. Header-only: each library is one source file.
#ifndef GPUWATCH_BENCH_CUPTI_INJECTION_H_
#define GPUWATCH_BENCH_CUPTI_INJECTION_H_

#include <cupti.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace cupti_injection {

// *out = the function `name` of the library `handle`; false when it lacks it.
template <typename F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

// The libcupti functions both libraries call, resolved by ResolveActivityApi.
struct ActivityApi {
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
};

// Fills every member of `api` from `handle`; false when one is missing.
inline bool ResolveActivityApi(void* handle, ActivityApi* api) {
  return Resolve(handle, "cuptiSubscribe", &api->Subscribe) &&
         Resolve(handle, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks) &&
         Resolve(handle, "cuptiActivityEnable", &api->ActivityEnable) &&
         Resolve(handle, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord) &&
         Resolve(handle, "cuptiActivityFlushAll", &api->ActivityFlushAll);
}

// The body of a CUPTI buffer-request callback: an 8-byte aligned heap buffer
// of `bytes` (size 0 when there is none), as many records as fit. The
// buffer-completed callback frees it.
inline void AllocateActivityBuffer(size_t bytes, uint8_t** buffer, size_t* size,
                                   size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0;
}

// The body of the library's InitializeInjection, which the CUDA driver calls
// in cuInit (and the recorder's constructor may call first): runs `attach`
// once, and tells the driver all is well whatever it returned.
inline int AttachOnce(bool (*attach)()) {
  static const bool attached = attach();
  (void)attached;
  return 1;
}

}  // namespace cupti_injection

#endif  // GPUWATCH_BENCH_CUPTI_INJECTION_H_
