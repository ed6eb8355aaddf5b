// What the callback switchboard's files share: callbacks.cc (API calls:
// ENTER and EXIT of each tracked call), alloc_callbacks.cc and
// error_callbacks.cc (the paths of allocations, frees and launches) and
// graph_callbacks.cc (graph launches, graph nodes and the resource domain).
// Internal to them; the rest of gpuwatch uses callbacks.h.
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_CALLBACK_STATE_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_CALLBACK_STATE_H_

#include <cupti.h>

#include <cstdint>
#include <type_traits>

#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/current_session.h"
#include "interpose/calls/calls.h"
#include "libgpuwatch/base/status_page.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/session/events.h"
#include "libgpuwatch/session/session.h"

namespace gpuwatch::switchboard {

extern CallbackHooks g_hooks;

// The outermost tracked call in progress on this thread, from its ENTER to
// its EXIT. Plain data: a thread_local with a destructor could not be
// initial-exec.
struct CallInProgress {
  const CallbackSpec* spec = nullptr;
  ParsedCall call;  // as read at ENTER
  uint32_t correlation = 0;
  uint32_t stack_id = 0;  // captured once per call (CallSite)
  bool stack_captured = false;
  bool made_node = false;  // a graph node was made inside it (GRAPHNODE_CREATED)
  uint64_t node = 0;
  uint64_t enter_ticks = 0;  // kAlloc, kFree: Ticks() at ENTER (the call's time)
  bool freed = false;        // kFree: the allocation was removed at ENTER
  LiveAlloc removed;
  const char* symbol = nullptr;  // kLaunch: the kernel's name (CUPTI's symbolName)
  bool vmm_released = false;     // kVmmRelease: the handle was released at ENTER
  Tracker::VmmRelease vmm_release;
  bool ipc_closed = false;  // kIpcClose: a reference to the mapping was dropped at ENTER
  Tracker::IpcClose ipc_close;
  // Not the call's but the thread's (callbacks.cc): the depth of runtime API
  // calls on it, and whether a runtime callback came on it yet. Kept here so
  // that a callback reaches them and the call through one thread-local's
  // address (one offset load from the GOT, not one per variable).
  int runtime_depth = 0;
  bool runtime_seen = false;
  // The thread's last context (its uid) and its device ordinal
  // (DeviceOfContext's cache).
  uint32_t context_uid = 0;
  int32_t device = 0;
};
// initial-exec TLS: reading it never allocates, even when the driver
// dlopen'ed gpuwatch through CUDA_INJECTION64_PATH.
extern thread_local constinit CallInProgress t_call __attribute__((tls_model("initial-exec")));
extern thread_local constinit bool t_in_call __attribute__((tls_model("initial-exec")));

inline uint64_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The call in progress on the status page (status_page.h), with its site
// when ENTER captured it: a few stores. A call's name on the page is its
// index in the registry. Returns the page's Ticks() (0: no page).
inline uint64_t PublishEnter(const CallbackSpec& spec) {
  const CallInProgress& c = t_call;
  return StatusCallBegins(static_cast<uint32_t>(&spec - calls_internal::kRegistryEntries),
                          c.stack_captured ? c.stack_id : 0);
}
// The same for a call whose ENTER captured no stack (an allocation's, a
// free's: its site comes at EXIT): no test of the call in progress, which
// the params' reader, called through a pointer, makes the compiler load again.
inline uint64_t PublishEnterWithoutSite(const CallbackSpec& spec) {
  return StatusCallBegins(static_cast<uint32_t>(&spec - calls_internal::kRegistryEntries), 0);
}

// The API a call's return type belongs to (cudaError_t or CUresult).
template <typename Result>
constexpr CUpti_CallbackDomain DomainOf() {
  return std::is_same_v<Result, cudaError_t> ? CUPTI_CB_DOMAIN_RUNTIME_API
                                             : CUPTI_CB_DOMAIN_DRIVER_API;
}

// The event API (libgpuwatch/session/events.h) to the recording events go
// to now (a fork child swaps it: Session): taken once per event. Only once a
// Session is published (GpuwatchCallback checks).
inline Events CurrentEvents() { return CurrentSession()->events(); }

inline bool IsRecording() { return CurrentEvents().enabled(); }

// The name a kernel node added to a graph explicitly counts under at each
// launch (CUPTI names the kernel of a captured launch only).
inline constexpr char kGraphKernelNode[] = "(graph kernel node)";

// callbacks.cc.
// Captures and interns the calling thread's stack (its id; 0: none), before
// any lock.
uint32_t CaptureSite();
// The stack of the call in progress, captured once per call. Inline: a
// call and a frame less on every capture's path, and two frames less for
// the walk to check (docs/BENCHMARKS.md, "Issue 33, stop 49").
inline uint32_t CallSite() {
  CallInProgress& c = t_call;
  if (!c.stack_captured) {
    c.stack_id = CaptureSite();
    c.stack_captured = true;
  }
  return c.stack_id;
}
// The device ordinal of a context, cached per thread by context uid (a
// program rarely switches devices between calls); 0 when unknown. The
// cached answer inline, CUPTI asked out of line (callbacks.cc).
int32_t AskDeviceOfContext(CUcontext context, uint32_t context_uid);
inline int32_t DeviceOfContext(CUcontext context, uint32_t context_uid) {
  if (g_hooks.get_device_id == nullptr || context == nullptr) return 0;
  if (context_uid != 0 && context_uid == t_call.context_uid) return t_call.device;
  return AskDeviceOfContext(context, context_uid);
}
// The device ordinal of the calling context.
inline int32_t DeviceOf(const CUpti_CallbackData* d) {
  return DeviceOfContext(d->context, d->contextUid);
}
// A copy's direction and host memory kind, from the call and gpuwatch's
// tables where the call does not say.
void ClassifyCopy(const ParsedCall& parsed, CopyCall* call);
// A kernel (or graph) launch, counted under `name`.
void Launch(const char* name);

// alloc_callbacks.cc.
// An allocation recorded (`call` read at a successful EXIT; `call_ticks`:
// the call's time in Ticks(), 0 when unknown), and one that failed for lack
// of memory (the on_oom hook).
void Alloc(const ParsedCall& call, const CUpti_CallbackData* d, uint64_t call_ticks = 0);
void OutOfMemory(const ParsedCall& call, const CUpti_CallbackData* d, int error);
// An allocation's and a free's ENTER and EXIT (a spec of Role::kAlloc or
// Role::kFree), apart from the general path: ENTER reads the params into
// the call in progress (a free is begun there); EXIT records the
// allocation, the free or the failure.
void AllocEnter(const CallbackSpec& spec, const CUpti_CallbackData* d);
void FreeEnter(const CallbackSpec& spec, const CUpti_CallbackData* d);
template <typename Result>
void AllocExit(const CUpti_CallbackData* d, Result ok_value, Result oom_value);
extern template void AllocExit(const CUpti_CallbackData* d, cudaError_t ok_value,
                               cudaError_t oom_value);
extern template void AllocExit(const CUpti_CallbackData* d, CUresult ok_value, CUresult oom_value);
template <typename Result>
void FreeExit(const CUpti_CallbackData* d, Result ok_value);
extern template void FreeExit(const CUpti_CallbackData* d, cudaError_t ok_value);
extern template void FreeExit(const CUpti_CallbackData* d, CUresult ok_value);

// error_callbacks.cc.
// A kernel launch's ENTER and EXIT (a spec of Role::kLaunch: never a graph
// node's), apart from the general path: ENTER reads nothing of the params,
// EXIT counts the launch (KernelLaunch, with the stream LaunchStream reads)
// or the failure.
void LaunchEnter(const CallbackSpec& spec, const CUpti_CallbackData* d);
template <typename Result>
void LaunchExit(const CUpti_CallbackData* d, Result ok_value);
extern template void LaunchExit(const CUpti_CallbackData* d, cudaError_t ok_value);
extern template void LaunchExit(const CUpti_CallbackData* d, CUresult ok_value);
// A kernel launched by the call `d` on `stream` (not a graph's): counted, and
// kept in its context's ring of launches since the last successful
// synchronization, with its kernel's first launch site; `ticks`: when
// (Ticks(), the status page's read of the call's end).
void KernelLaunch(const CUpti_CallbackData* d, const void* stream, uint64_t ticks);
// A call that returned `code`, not success (`domain`: which API's code).
void CallFailed(const CUpti_CallbackData* d, CUpti_CallbackDomain domain, int code);

// graph_callbacks.cc.
// A graph launch: the copies of its memcpy nodes wait for their records from
// ENTER (with activity); its memory nodes allocate and free at a successful
// EXIT, where copies without activity are counted too.
void GraphLaunchEnter(const ParsedCall& call, uint32_t correlation);
void GraphLaunchExit(const ParsedCall& call, uint32_t correlation, bool succeeded);
// The resource domain: contexts made and destroyed, graph nodes and
// instances made, cloned and destroyed.
void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* r);

}  // namespace gpuwatch::switchboard

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_CALLBACK_STATE_H_
