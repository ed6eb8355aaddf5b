// The CUPTI callback switchboard: turns callback data into core events.
//
// Rules for everything reachable from OnCuptiCallback (as in Kineto's): a
// switch, not a map; no allocation beyond what the event needs (a table
// insert); no logging; no lock held while calling back into CUDA or CUPTI.
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_H_

#include <cupti.h>

#include <string>

#include "interpose/cupti_loader.h"
#include "libgpuwatch/event.h"

namespace gpuwatch {

class Tracker;
class StackTable;
class Transfers;
class KernelTable;
struct Lifecycle;

// An allocation that failed for lack of memory.
struct OomEvent {
  uint64_t size = 0;
  MemKind kind = MemKind::kDevice;
  const char* api = "";  // CUPTI's functionName, static storage
  int error = 0;
  uint32_t stack_id = 0;
  int32_t device = 0;  // the ordinal of the failing call's context
};

// Hooks for events the switchboard does not handle itself.
struct CallbackHooks {
  Tracker* tracker = nullptr;
  StackTable* stacks = nullptr;  // null: no stacks
  int depth = 0;                 // user frames to keep per stack
  // Called on the failing thread, inside the callback, after an allocation
  // failed with cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY.
  void (*on_oom)(const OomEvent& event) = nullptr;
  Transfers* transfers = nullptr;  // null: copies are only counted
  bool copy_activity = false;      // MEMCPY activity records will come
  KernelTable* kernels = nullptr;
  Lifecycle* lifecycle = nullptr;
  // cuptiGetDeviceId: the device of an allocation's context. Null: device 0.
  decltype(&cuptiGetDeviceId) get_device_id = nullptr;
  // Called once, on the first CUDA API call seen (not in injection mode, where
  // attach itself happens inside the first call). May be null.
  void (*on_first_call)() = nullptr;
  // Called (outside any gpuwatch lock) when a CUDA context is about to be
  // destroyed, including at process exit. May be null.
  void (*on_context_destroy)() = nullptr;
};

// Installs the hooks; call before enabling callbacks.
void SetCallbackHooks(const CallbackHooks& hooks);

// Enables, one callback id at a time, exactly the runtime, driver and
// resource callbacks gpuwatch handles. Returns false with a reason on error.
bool EnableCallbacks(const CuptiApi& api, CUpti_SubscriberHandle subscriber, std::string* error);

// The function registered with cuptiSubscribe.
void CUPTIAPI OnCuptiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* data);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_H_
