// Allocations and frees: their own ENTER and EXIT, apart from the general
// path (OnEnter, OnApiExit), as a launch has (error_callbacks.cc). A
// cudaMalloc and its cudaFree are most of what a training loop's allocator
// calls: ENTER resets only what the call's EXIT and a graph node made inside
// it read, and reads the params once, into the call in progress; an
// allocation's EXIT reads them again in place for the address, without a
// second ParsedCall (docs/BENCHMARKS.md, "Issue 33, stop 46").
#include "interpose/callbacks/callback_state.h"
#include "interpose/nvtx/nvtx.h"

namespace gpuwatch::switchboard {

namespace {

// What an allocation's and a free's ENTER share: the call in progress, its
// params read into it (as ParseCall would, without copying a whole empty
// ParsedCall first: every reader of Role::kAlloc and Role::kFree sets the
// role, and the address, size, kind and stream where it says them; the
// fields it may leave are reset here). False when the params say nothing to
// record: the call in progress then has no spec, as OnEnter leaves it.
__attribute__((always_inline)) inline bool BeginCall(const CallbackSpec& spec,
                                                     const CUpti_CallbackData* d) {
  CallInProgress& c = t_call;
  c.spec = &spec;
  c.correlation = d->correlationId;
  c.stack_captured = false;
  c.made_node = false;  // a call into a capturing stream makes a graph node
  c.node = 0;
  c.freed = false;
  ParsedCall& call = c.call;
  call.role = spec.role;
  call.address = 0;
  call.device = -1;
  call.array_element_bytes = 0;
  call.node_only = false;
  if (d->functionParams == nullptr || !spec.parse(d, /*succeeded=*/false, &call)) {
    c.spec = nullptr;  // an array without its descriptor, a node without parameters
    return false;
  }
  return true;
}

// The call's time (churn) from the page's counter reads, or the clock's
// where there is no page.
uint64_t CallTicks(uint64_t end_ticks) {
  return (end_ticks != 0 ? end_ticks : Ticks()) - t_call.enter_ticks;
}

// Alloc's work, inlined into an allocation's EXIT: a call and a frame less
// on its path, and a frame less for the walk of its capture to check.
__attribute__((always_inline)) inline void RecordAlloc(const ParsedCall& call,
                                                       const CUpti_CallbackData* d,
                                                       uint64_t call_ticks) {
  Events events = CurrentEvents();
  if (call.address == 0 || !events.enabled()) return;  // paused: no stack either
  AllocEvent e;
  e.address = call.address;
  e.size = call.size;
  e.kind = call.kind;
  e.device = call.device >= 0 ? call.device : DeviceOf(d);
  e.stream = Addr(call.stream);
  e.stack_id = CallSite();
  e.phase = CurrentPhase();
  e.call_ticks = call_ticks;
  events.Allocated(e);
  if (call.kind == MemKind::kArray) RememberArray(call.address, call.array_element_bytes);
}

}  // namespace

void Alloc(const ParsedCall& call, const CUpti_CallbackData* d, uint64_t call_ticks) {
  RecordAlloc(call, d, call_ticks);
}

void OutOfMemory(const ParsedCall& call, const CUpti_CallbackData* d, int error) {
  if (g_hooks.on_oom == nullptr) return;
  OomEvent e;
  e.size = call.size;
  e.kind = call.kind;
  e.api = d->functionName != nullptr ? d->functionName : "";
  e.error = error;
  e.stack_id = CallSite();
  e.device = call.device >= 0 ? call.device : DeviceOf(d);
  g_hooks.on_oom(e);
}

void AllocEnter(const CallbackSpec& spec, const CUpti_CallbackData* d) {
  const bool parsed = BeginCall(spec, d);
  t_in_call = true;
  const uint64_t now = PublishEnterWithoutSite(spec);
  if (parsed) t_call.enter_ticks = now != 0 ? now : Ticks();
}

void FreeEnter(const CallbackSpec& spec, const CUpti_CallbackData* d) {
  const bool parsed = BeginCall(spec, d);
  t_in_call = true;
  CallInProgress& c = t_call;
  // Before the driver can hand the address to another thread. A graph's
  // free node frees nothing now.
  if (parsed && !c.call.node_only && c.call.address != 0) {
    c.freed = CurrentEvents().FreeBegun(c.call.address, &c.removed);
  }
  const uint64_t now = PublishEnterWithoutSite(spec);
  if (parsed) c.enter_ticks = now != 0 ? now : Ticks();
}

template <typename Result>
void AllocExit(const CUpti_CallbackData* d, Result ok_value, Result oom_value) {
  t_in_call = false;
  const uint64_t end_ticks = StatusCallEnds();  // 0: no page
  CallInProgress& c = t_call;
  const auto* ret = static_cast<const Result*>(d->functionReturnValue);
  if (ret == nullptr || *ret != ok_value) [[unlikely]] {
    if (ret == nullptr) return;
    CallFailed(d, DomainOf<Result>(), static_cast<int>(*ret));
    // What ENTER read is what the failed call asked for (no output is read
    // from a failed call).
    if (*ret == oom_value && !c.made_node && !c.call.node_only) {
      OutOfMemory(c.call, d, static_cast<int>(*ret));
    }
    return;
  }
  // The address, read in place: the reader sets what it set at ENTER, now
  // with the call's outputs (the address, cudaMallocPitch's pitch).
  if (c.made_node || c.call.node_only) {
    // Recorded into a graph: nothing allocated now. A graph's allocation
    // gets its fixed address at the end of the call that made its node.
    if (c.made_node && d->functionParams != nullptr && c.spec->parse(d, true, &c.call)) {
      CurrentSession()->graphs().SetAddress(c.node, c.call.address);
    }
    return;
  }
  if (d->functionParams == nullptr || !c.spec->parse(d, /*succeeded=*/true, &c.call)) return;
  RecordAlloc(c.call, d, CallTicks(end_ticks));
}
template void AllocExit(const CUpti_CallbackData* d, cudaError_t ok_value, cudaError_t oom_value);
template void AllocExit(const CUpti_CallbackData* d, CUresult ok_value, CUresult oom_value);

template <typename Result>
void FreeExit(const CUpti_CallbackData* d, Result ok_value) {
  t_in_call = false;
  const uint64_t end_ticks = StatusCallEnds();  // 0: no page
  CallInProgress& c = t_call;
  const auto* ret = static_cast<const Result*>(d->functionReturnValue);
  if (ret == nullptr || *ret != ok_value) [[unlikely]] {
    if (ret != nullptr) CallFailed(d, DomainOf<Result>(), static_cast<int>(*ret));
    if (c.freed) CurrentEvents().FreeUndone(c.removed);  // still allocated
    return;
  }
  if (c.made_node || c.call.node_only) {
    // Captured into a graph: freed at each launch of its instances, not now.
    if (c.freed) CurrentEvents().FreeUndone(c.removed);
    return;
  }
  if (c.freed) {
    CurrentEvents().FreeDone(c.removed, CallTicks(end_ticks));
    if (c.removed.kind == MemKind::kArray) ForgetArray(c.removed.address);
  } else if (c.call.address != 0) {
    CurrentEvents().UnknownFree();
  }
}
template void FreeExit(const CUpti_CallbackData* d, cudaError_t ok_value);
template void FreeExit(const CUpti_CallbackData* d, CUresult ok_value);

}  // namespace gpuwatch::switchboard
