// The CUPTI callback switchboard: turns callback data into core events
// (callbacks.cc: the API calls; graph_callbacks.cc: graph launches and nodes,
// and the resource domain; callback_state.h: what the two share).
//
// What each callback id means is in the registry (calls.h); this file decides
// when each event is recorded:
// - frees at the ENTER of the freeing call, before the driver can hand the
//   address to another thread's allocation; undone when the call fails or
//   was captured into a graph;
// - allocations at a successful EXIT (their address is known only then);
// - copies registered at ENTER, before their activity record can arrive;
// - a call that makes a graph node (explicitly, or captured from a stream)
//   does nothing now: its node's work is replayed at each graph launch.
//
// Rules for everything reachable from OnCuptiCallback (as in Kineto's): an
// array lookup, not a map, per callback; no allocation beyond what the event
// needs (a table insert); no logging; no lock held while calling back into
// CUDA or CUPTI.
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_CALLBACKS_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_CALLBACKS_H_

#include <cupti.h>

#include "interpose/calls/calls.h"
#include "libgpuwatch/record/event.h"

namespace gpuwatch {

// An allocation that failed for lack of memory.
struct OomEvent {
  uint64_t size = 0;
  MemKind kind = MemKind::kDevice;
  const char* api = "";  // CUPTI's functionName, static storage
  int error = 0;
  uint32_t stack_id = 0;
  int32_t device = 0;  // the ordinal of the failing call's context
};

// Hooks for events the switchboard does not handle itself. The tables, the
// stack table and the graphs are the published Session's
// (current_session.h); while none is, callbacks record nothing.
struct CallbackHooks {
  int depth = 0;  // user frames to keep per stack
  // Called on the failing thread, inside the callback, after an allocation
  // failed with cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY.
  void (*on_oom)(const OomEvent& event) = nullptr;
  bool copy_activity = false;  // MEMCPY activity records will come
  // cuptiGetDeviceId: the device of an allocation's context. Null: device 0.
  decltype(&cuptiGetDeviceId) get_device_id = nullptr;
  // cuptiGetGraphNodeId. Null: graph nodes are not followed.
  decltype(&cuptiGetGraphNodeId) get_graph_node_id = nullptr;
  // The size of the allocation mapped at `address` (the driver's
  // cuMemGetAddressRange), for another process's memory opened through CUDA
  // IPC, whose call does not say it; 0 when unknown. Called inside the
  // callback, with no gpuwatch lock held. May be null.
  uint64_t (*mapped_size)(uint64_t address) = nullptr;
  // Called once, on the first CUDA API call seen (not in injection mode, where
  // attach itself happens inside the first call). May be null.
  void (*on_first_call)() = nullptr;
  // Called (outside any gpuwatch lock) when a CUDA context is about to be
  // destroyed, including at process exit. May be null.
  void (*on_context_destroy)() = nullptr;
};

// Installs the hooks; call before enabling callbacks.
void SetCallbackHooks(const CallbackHooks& hooks);

// The calling thread's stack, interned, as an allocation's is captured (the
// user's frames, with Python's in a Python process); for events outside a
// CUDA call (NVTX's memory extension). 0 before the hooks are installed or
// without stacks.
uint32_t CaptureSiteNow();

// The function registered with cuptiSubscribe: gpuwatch's callback, or the
// multiplexer's dispatch while another CUPTI client shares it (cupti_mux.h).
void CUPTIAPI OnCuptiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* data);

// gpuwatch's own handling of one callback.
void GpuwatchCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_CALLBACKS_H_
