// Loads libcupti at run time and resolves the few functions gpuwatch calls.
//
// libcupti is never a link dependency of libgpuwatch.so: a preloaded library
// whose DT_NEEDED is missing makes the dynamic loader refuse the preload, and
// the right libcupti is the one that matches the process's CUDA.
#ifndef GPUWATCH_INTERPOSE_CUPTI_CUPTI_LOADER_H_
#define GPUWATCH_INTERPOSE_CUPTI_CUPTI_LOADER_H_

#include <cupti.h>

#include <string>
#include <vector>

namespace gpuwatch {

struct CuptiApi {
  void* handle = nullptr;
  std::string path;  // the file that was loaded

  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) SubscribeV2 = nullptr;  // may stay null (older CUPTI)
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiEnableDomain) EnableDomain = nullptr;
  // May stay null: then a detach under gpuwatch is not noticed.
  decltype(&cuptiGetCallbackState) GetCallbackState = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  // Activity API; null when this CUPTI lacks it (then no timing or host kinds).
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  // May stay null; used only for other CUPTI clients' views (cupti_mux.h).
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityGetAttribute) ActivityGetAttribute = nullptr;
  decltype(&cuptiActivitySetAttribute) ActivitySetAttribute = nullptr;
  // May stay null: then the event trace has no GPU slices (GetTimestamp) and
  // every allocation is put on device 0 (GetDeviceId).
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiGetDeviceId) GetDeviceId = nullptr;
  // May stay null: then graph nodes are not followed (graph launches are
  // counted, their copies and memory are not).
  decltype(&cuptiGetGraphNodeId) GetGraphNodeId = nullptr;
  // May stay null: then activity records are not read (their layout is not known).
  decltype(&cuptiGetVersion) GetVersion = nullptr;
};

// The places tried, in order: only `explicit_path` (GPUWATCH_CUPTI_LIBRARY)
// when it is set; otherwise a libcupti already in the process; the loader's own search
// (LD_LIBRARY_PATH, ldconfig); $CUDA_HOME, $CUDA_PATH and /usr/local/cuda
// (lib64 and extras/CUPTI/lib64); the nvidia CUPTI wheels next to a running
// CPython's site-packages.
std::vector<std::string> CuptiSearchList(const std::string& explicit_path);

// The dlsym of the C library (or of a tool preloaded after gpuwatch), not
// gpuwatch's own exported one (dlsym_hook.cc), which hands out gpuwatch's
// CUPTI entry points for a libcupti handle: CUPTI's own functions are
// resolved with this one.
void* RealDlsym(void* handle, const char* name);

// Loads the first library in the search list that has the needed symbols.
// On failure returns false with a one-line reason in `error`.
bool LoadCupti(const std::string& explicit_path, CuptiApi* api, std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CUPTI_CUPTI_LOADER_H_
