#include "interpose/callbacks/callbacks.h"

#include <pthread.h>

#include <algorithm>
#include <cstdint>

#include "interpose/callbacks/callback_state.h"
#include "interpose/callbacks/guard.h"
#include "interpose/cupti/cupti_mux.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/status_page.h"
#include "libgpuwatch/session/session.h"
#include "libgpuwatch/stacks/python_stack.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch {

thread_local constinit int t_inside_gpuwatch __attribute__((tls_model("initial-exec"))) = 0;

namespace switchboard {

CallbackHooks g_hooks;
thread_local constinit CallInProgress t_call __attribute__((tls_model("initial-exec")));
thread_local constinit bool t_in_call __attribute__((tls_model("initial-exec"))) = false;

namespace {

// The depth of runtime API calls on this thread (t_call.runtime_depth): a
// runtime call that nests a driver call (cudaMalloc -> cuMemAlloc_v2) is
// counted at the runtime level only.
//
// gpuwatch may attach while runtime calls are in flight (injection attaches
// inside cuInit, inside the program's first runtime call, and other threads
// may be inside theirs): such a call delivers its EXIT without its ENTER, and
// the driver calls it makes after the attach may be seen on their own. So a
// thread's driver events that come before any runtime callback of its own
// (t_call.runtime_seen) are nested in a call whose ENTER was missed, if any:
// that call's EXIT then adds nothing more. initial-exec TLS: reading it
// never allocates, even when the driver dlopen'ed us through
// CUDA_INJECTION64_PATH.
thread_local bool t_driver_before_runtime __attribute__((tls_model("initial-exec"))) = false;

// Start of the outermost blocking call on this thread, 0 when none.
thread_local uint64_t t_block_start __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

// CaptureSite (callback_state.h): the frames of gpuwatch, CUPTI, the driver and the
// runtime above the user's call are left out (CaptureUserStack). In a Python process the
// Python frames follow the native pcs (python_stack.h).
uint32_t CaptureSite() {
  StackTable* stacks = CurrentSession()->stacks();
  if (stacks == nullptr || g_hooks.depth <= 0) return 0;
  // The frames are interned where the walk left them (in the buffer or the
  // walker's record): the buffer has room for a whole capture and for the
  // Python frames after it.
  uintptr_t buffer[2 * kMaxCaptureDepth];
  const uintptr_t* frames = buffer;
  int n = CaptureUserStackInPlace(buffer, std::min(g_hooks.depth, kMaxCaptureDepth), &frames);
  // In a CPython process (the stack table has a Python frame table then) the
  // Python frames follow the native ones, in the buffer.
  if (PyFrameTable* python_frames = stacks->python_frames(); python_frames != nullptr) {
    uintptr_t* pcs = buffer;
    if (frames != buffer) std::copy_n(frames, n, pcs);
    n += CapturePythonFrames(python_frames, pcs + n, std::min(g_hooks.depth, kMaxCaptureDepth - n));
    frames = pcs;
  }
  return stacks->Intern(frames, n);
}

int32_t AskDeviceOfContext(CUcontext context, uint32_t context_uid) {
  uint32_t device = 0;
  if (g_hooks.get_device_id(context, &device) != CUPTI_SUCCESS) return 0;
  t_call.context_uid = context_uid;
  t_call.device = static_cast<int32_t>(device);
  return t_call.device;
}

namespace {

// A VMM handle's memory (cuMemCreate's, or a handle first seen mapped: made
// before attach), at the calling site; while paused known but not counted,
// and no stack captured.
void VmmCreate(const ParsedCall& call, const CUpti_CallbackData* d) {
  Events events = CurrentEvents();
  AllocEvent e;
  e.size = call.size;
  e.kind = call.kind;
  e.device = call.device >= 0 ? call.device : DeviceOf(d);
  if (events.enabled()) {
    e.stack_id = CallSite();
    e.phase = CurrentPhase();
  }
  events.VmmCreated(call.handle, e);
}

void VmmMap(const ParsedCall& call, const CUpti_CallbackData* d) {
  Events events = CurrentEvents();
  if (events.VmmMapped(call.handle, call.address, call.size)) return;
  VmmCreate(call, d);  // made before gpuwatch attached: counted from here, this size
  events.VmmMapped(call.handle, call.address, call.size);
}

// Another process's memory opened through CUDA IPC, at the calling site. The
// call does not say its size: the driver does (asked only for a mapping not
// live yet; while paused nothing is asked or captured).
void IpcOpen(const ParsedCall& call, const CUpti_CallbackData* d) {
  Events events = CurrentEvents();
  AllocEvent e;
  e.address = call.address;
  e.kind = MemKind::kIpcImported;
  e.device = DeviceOf(d);
  if (events.enabled()) {
    e.size = g_hooks.mapped_size != nullptr ? g_hooks.mapped_size(call.address) : 0;
    e.stack_id = CallSite();
    e.phase = CurrentPhase();
  }
  events.IpcOpened(e);
}

CopyCall CopyOf(const ParsedCall& parsed, uint32_t correlation, uint32_t stack_id) {
  CopyCall call = parsed.copy;
  call.correlation = correlation;
  call.stack_id = stack_id;
  ClassifyCopy(parsed, &call);
  return call;
}

}  // namespace

void Launch(const char* name) {
  Events events = CurrentEvents();
  if (!events.enabled()) return;
  events.Launched(CurrentPhase(), name);
}

namespace {

// The first CUDA call: start of the initialisation latency. The test is
// inlined into every call's ENTER; the rest runs once per recording.
__attribute__((noinline)) void RecordFirstCall(Events events) {
  if (!events.FirstCall()) return;
  if (g_hooks.on_first_call != nullptr) g_hooks.on_first_call();
}
__attribute__((always_inline)) inline void FirstCall() {
  const Events events = CurrentEvents();
  if (events.first_call_seen()) [[likely]]
    return;
  RecordFirstCall(events);
}

void BlockEnter() {
  if (t_block_start == 0) t_block_start = CurrentEvents().NowNs();
}

void BlockExit(SyncKind kind) {
  if (t_block_start == 0) return;
  Events events = CurrentEvents();
  events.Blocked(kind, events.NowNs() - t_block_start);
  t_block_start = 0;
}

// --- ENTER and EXIT of a tracked call -----------------------------------------

void OnEnter(const CallbackSpec& spec, const CUpti_CallbackData* d) {
  CallInProgress& c = t_call;
  c.spec = &spec;
  c.correlation = d->correlationId;
  c.stack_captured = false;
  c.stack_id = 0;
  c.made_node = false;
  c.node = 0;
  c.symbol = d->symbolName;
  c.vmm_released = false;
  c.ipc_closed = false;
  if (!ParseCall(spec, d, /*succeeded=*/false, &c.call)) {
    c.spec = nullptr;  // nothing to record (an empty batch, a node of another type)
    t_in_call = true;
    PublishEnter(spec);
    return;
  }
  t_in_call = true;
  const ParsedCall& call = c.call;
  switch (call.role) {
    case Role::kCopy:
      if (call.node_only) break;
      if (!call.copy.async) {
        BlockEnter();
        // A blocking copy may never end: its site is on the status page.
        if (CurrentEvents().enabled()) CallSite();
      }
      // Registered before the copy can complete, so that its record always
      // finds it; its stack is captured now.
      if (Events events = CurrentEvents(); g_hooks.copy_activity && events.enabled()) {
        events.CopyCalled(CopyOf(call, c.correlation, CallSite()), true);
      }
      break;
    case Role::kAlloc:  // AllocEnter, FreeEnter (alloc_callbacks.cc); here a
    case Role::kFree:   // graph node's (node_only), which does nothing now
      break;
    case Role::kVmmRelease:
      // Before the driver can give the handle's value to another thread.
      c.vmm_released = CurrentEvents().VmmReleaseBegun(call.handle, &c.vmm_release);
      break;
    case Role::kIpcClose:
      // Before the driver can map something else at the address.
      c.ipc_closed = CurrentEvents().IpcCloseBegun(call.address, &c.ipc_close);
      break;
    case Role::kSync:
      BlockEnter();
      // The host may wait for ever for a kernel queued since the context's
      // last synchronization: then the site is on the status page. A sync
      // with no kernel to wait for returns at once, without a capture.
      if (const Events events = CurrentEvents();
          events.enabled() && events.KernelsQueued(d->contextUid)) {
        CallSite();
      }
      break;
    case Role::kGraphLaunch:
      GraphLaunchEnter(call, c.correlation);
      break;
    default:
      break;
  }
  PublishEnter(spec);
}

template <typename Result>
void OnApiExit(const CUpti_CallbackData* d, Result ok_value, Result oom_value) {
  t_in_call = false;
  StatusCallEnds();
  CallInProgress& c = t_call;
  const auto* ret = static_cast<const Result*>(d->functionReturnValue);
  const bool succeeded = ret != nullptr && *ret == ok_value;
  const bool oom = ret != nullptr && *ret == oom_value;
  // Counted even when ENTER's parse found nothing to record (c.spec null):
  // a failed call is an error whatever its params said.
  if (!succeeded && ret != nullptr) [[unlikely]] {
    CallFailed(d, DomainOf<Result>(), static_cast<int>(*ret));
  }
  if (c.spec == nullptr) return;
  const ParsedCall& entered = c.call;
  if (entered.role == Role::kInstantiate) {
    CurrentSession()->graphs().EndInstantiation(pthread_self());
    return;
  }
  if (c.made_node || entered.node_only) {
    // Recorded into a graph: nothing happened now. A graph's allocation gets
    // its fixed address at the end of the call that made its node.
    if (entered.role == Role::kCopy && !entered.node_only) {
      if (!entered.copy.async) BlockExit(SyncKind::kCopy);
      CurrentEvents().CopyFailed(c.correlation);
    }
    if (entered.role == Role::kGraphLaunch) {  // a child graph node: no launch now
      GraphLaunchExit(entered, c.correlation, /*succeeded=*/false);
    }
    if (c.made_node && entered.role == Role::kAlloc && succeeded) {
      ParsedCall out;
      if (ParseCall(*c.spec, d, true, &out))
        CurrentSession()->graphs().SetAddress(c.node, out.address);
    }
    return;
  }
  switch (entered.role) {
    case Role::kAlloc:  // AllocExit, FreeExit (alloc_callbacks.cc)
    case Role::kFree:
      break;
    case Role::kCopy: {
      if (!entered.copy.async) {
        BlockExit(SyncKind::kCopy);
        if (succeeded) CurrentEvents().Synced(d->contextUid);
      }
      if (!succeeded) {
        if (g_hooks.copy_activity) {
          CurrentEvents().CopyFailed(c.correlation);
        }
        break;
      }
      Events events = CurrentEvents();
      if (!events.enabled()) break;
      events.Copied(
          CopyEvent{entered.copy.bytes, entered.copy.kind, entered.copy.async, CurrentPhase()});
      if (!g_hooks.copy_activity) {
        events.CopyCalled(CopyOf(entered, c.correlation, CallSite()), false);
      }
      break;
    }
    case Role::kLaunch:  // LaunchExit (error_callbacks.cc)
      break;
    case Role::kGraphLaunch:
      GraphLaunchExit(entered, c.correlation, succeeded);
      break;
    case Role::kSync:
      BlockExit(entered.sync);
      if (succeeded) CurrentEvents().Synced(d->contextUid);
      break;
    case Role::kVmmCreate: {
      ParsedCall out;
      if (!ParseCall(*c.spec, d, succeeded, &out)) break;
      if (succeeded && out.handle != 0) {
        VmmCreate(out, d);
      } else if (oom) {
        OutOfMemory(out, d, static_cast<int>(*ret));
      }
      break;
    }
    case Role::kVmmImport: {
      ParsedCall out;
      if (succeeded && ParseCall(*c.spec, d, true, &out) && out.handle != 0) {
        CurrentEvents().VmmImported(out.handle);
      }
      break;
    }
    case Role::kVmmMap:
      if (succeeded) VmmMap(entered, d);
      break;
    case Role::kVmmRetain: {
      ParsedCall out;
      if (succeeded && ParseCall(*c.spec, d, true, &out) && out.handle != 0) {
        CurrentEvents().VmmRetained(out.handle, out.address);
      }
      break;
    }
    case Role::kIpcOpen: {
      ParsedCall out;
      if (succeeded && ParseCall(*c.spec, d, true, &out) && out.address != 0) IpcOpen(out, d);
      break;
    }
    case Role::kIpcClose:
      if (!succeeded && c.ipc_closed) CurrentEvents().IpcCloseUndone(c.ipc_close);
      if (succeeded && !c.ipc_closed) CurrentEvents().UnknownFree();
      break;
    case Role::kVmmRelease:
      if (!succeeded && c.vmm_released) CurrentEvents().VmmReleaseUndone(c.vmm_release);
      break;
    case Role::kVmmUnmap:
      if (succeeded) CurrentEvents().VmmUnmapped(entered.address, entered.size);
      break;
    case Role::kInstantiate:
    case Role::kGraphNode:
      break;
  }
}

// The ENTER of a tracked call, by its role: launches, allocations and frees
// have paths of their own (the most frequent calls), the rest the general one.
inline void Enter(const CallbackSpec& spec, const CUpti_CallbackData* d) {
  switch (spec.role) {
    case Role::kLaunch:
      LaunchEnter(spec, d);
      return;
    case Role::kAlloc:
      AllocEnter(spec, d);
      return;
    case Role::kFree:
      FreeEnter(spec, d);
      return;
    default:
      OnEnter(spec, d);
      return;
  }
}

// The EXIT of the call in progress, the way its ENTER went (a call whose
// params said nothing to record has no spec: the general path counts its
// failure).
template <typename Result>
inline void Exit(const CUpti_CallbackData* d, Result ok_value, Result oom_value) {
  if (const CallbackSpec* spec = t_call.spec; spec != nullptr) {
    switch (spec->role) {
      case Role::kLaunch:
        LaunchExit(d, ok_value);
        return;
      case Role::kAlloc:
        AllocExit(d, ok_value, oom_value);
        return;
      case Role::kFree:
        FreeExit(d, ok_value);
        return;
      default:
        break;
    }
  }
  OnApiExit(d, ok_value, oom_value);
}

// An EXIT whose ENTER was never seen: the runtime call inside which the
// driver injected gpuwatch. Only what its EXIT alone tells is recorded. Out
// of line: its ParsedCall would otherwise make every callback's frame.
template <typename Result>
__attribute__((noinline)) void OnExitWithoutEnter(const CallbackSpec& spec,
                                                  const CUpti_CallbackData* d, Result ok_value,
                                                  Result oom_value) {
  if (t_driver_before_runtime) return;  // its driver calls were recorded already
  const auto* ret = static_cast<const Result*>(d->functionReturnValue);
  if (ret == nullptr) return;
  const bool succeeded = *ret == ok_value;
  ParsedCall call;
  if (!ParseCall(spec, d, succeeded, &call) || call.node_only) return;
  t_call.stack_captured = false;
  switch (call.role) {
    case Role::kAlloc:
      if (succeeded) {
        Alloc(call, d);
      } else if (*ret == oom_value) {
        OutOfMemory(call, d, static_cast<int>(*ret));
      }
      break;
    case Role::kFree:
      if (succeeded && call.address != 0) CurrentEvents().Freed(call.address);
      break;
    case Role::kCopy:
      if (Events events = CurrentEvents(); succeeded && events.enabled()) {
        events.Copied(CopyEvent{call.copy.bytes, call.copy.kind, call.copy.async, CurrentPhase()});
        events.CopyCalled(CopyOf(call, d->correlationId, CallSite()), false);
      }
      break;
    case Role::kLaunch:
      if (succeeded) Launch(d->symbolName);
      break;
    default:
      break;
  }
}

// A runtime call's ENTER, at depth 1: a tracked call begins, unless one is
// in progress already.
inline void RuntimeEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  if (t_in_call) return;
  if (const CallbackSpec* spec = FindSpec(CUPTI_CB_DOMAIN_RUNTIME_API, cbid)) Enter(*spec, d);
}

// The recording's first call noted, then entered as any other: out of line,
// so that every other runtime callback needs no stack frame.
__attribute__((noinline)) void FirstRuntimeEnter(Events events, CUpti_CallbackId cbid,
                                                 const CUpti_CallbackData* d) {
  RecordFirstCall(events);
  RuntimeEnter(cbid, d);
}

// Inlined into Handle: half of a runtime call's callbacks, each one call and
// return less.
__attribute__((always_inline)) inline void OnRuntime(CUpti_CallbackId cbid,
                                                     const CUpti_CallbackData* d) {
  if (d->callbackSite == CUPTI_API_ENTER) {
    t_call.runtime_seen = true;
    if (++t_call.runtime_depth != 1) return;
    if (const Events events = CurrentEvents(); !events.first_call_seen()) [[unlikely]] {
      FirstRuntimeEnter(events, cbid, d);
      return;
    }
    RuntimeEnter(cbid, d);
    return;
  }
  if (t_call.runtime_depth == 0) {
    // A call in flight when gpuwatch attached: EXIT without ENTER. Only a
    // thread's first runtime callback can be one (an EXIT at depth > 0
    // follows an ENTER of this thread, which set t_call.runtime_seen).
    const bool first_runtime_callback = !t_call.runtime_seen;
    t_call.runtime_seen = true;
    const CallbackSpec* spec = FindSpec(CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
    if (spec != nullptr && first_runtime_callback) {
      OnExitWithoutEnter(*spec, d, cudaSuccess, cudaErrorMemoryAllocation);
    }
    return;
  }
  // The EXIT of the call whose ENTER was seen: the same correlation id (no
  // lookup: its spec is the call's).
  if (--t_call.runtime_depth == 0 && t_in_call && t_call.correlation == d->correlationId) {
    Exit(d, cudaSuccess, cudaErrorMemoryAllocation);
  }
}

// Whether a driver callback comes from inside a runtime call of this thread
// (cudaMalloc -> cuMemAlloc_v2): those are the runtime's business. Asked
// first, before the guard: every runtime call that reaches the driver
// delivers two of them.
inline bool NestedInRuntime() { return t_call.runtime_depth > 0; }

void OnDriver(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  const CallbackSpec* spec = FindSpec(CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  if (spec == nullptr) return;
  if (d->callbackSite == CUPTI_API_ENTER) {
    FirstCall();
    if (!t_call.runtime_seen) t_driver_before_runtime = true;
    if (t_in_call) return;
    Enter(*spec, d);
    return;
  }
  if (t_in_call && t_call.correlation == d->correlationId) {
    Exit(d, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY);
  }
}

}  // namespace
}  // namespace switchboard

void SetCallbackHooks(const CallbackHooks& hooks) { switchboard::g_hooks = hooks; }

uint32_t CaptureSiteNow() { return CurrentSession() != nullptr ? switchboard::CaptureSite() : 0; }

namespace {

// gpuwatch's handling of one callback, inlined into both of its callers so
// that the callback path without another CUPTI client pays one load more.
__attribute__((always_inline)) inline void Handle(CUpti_CallbackDomain domain,
                                                  CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && switchboard::NestedInRuntime()) return;
  if (CurrentSession() == nullptr || data == nullptr) return;
  // A callback inside gpuwatch's own work on this thread is gpuwatch's (guard.h).
  if (InsideGpuwatch()) return;
  const ScopedInsideGpuwatch inside;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      switchboard::OnRuntime(cbid, static_cast<const CUpti_CallbackData*>(data));
      return;
    case CUPTI_CB_DOMAIN_DRIVER_API:
      switchboard::OnDriver(cbid, static_cast<const CUpti_CallbackData*>(data));
      return;
    case CUPTI_CB_DOMAIN_RESOURCE:
      switchboard::OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
      return;
    default:
      return;
  }
}

}  // namespace

void CUPTIAPI OnCuptiCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid, const void* data) {
  // Half of a runtime call's callbacks are the driver calls nested in it
  // (cudaMalloc -> cuMemAlloc_v2), which are the runtime's business: they
  // return first, on the thread's depth, when no other client shares them.
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && switchboard::NestedInRuntime() && !mux::Active()) {
    return;
  }
  // Another CUPTI client shares the subscription: it decides who gets what.
  if (mux::Active()) [[unlikely]] {
    mux::Dispatch(domain, cbid, data);
    return;
  }
  Handle(domain, cbid, data);
}

void GpuwatchCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  Handle(domain, cbid, data);
}

}  // namespace gpuwatch
