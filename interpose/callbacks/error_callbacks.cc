// Kernels launched and calls that failed: what a report needs to name the
// error a run ended on, the call where it surfaced and the kernels before it
// (libgpuwatch/record/cuda_errors.h). A launch has an ENTER and EXIT of its
// own, without the general path's parse and role switches (the launch is the
// most frequent call; docs/BENCHMARKS.md, "Issue 33, stop 45").
#include "interpose/callbacks/callback_state.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/record/cuda_errors.h"

namespace gpuwatch::switchboard {

void LaunchEnter(const CallbackSpec& spec, const CUpti_CallbackData* d) {
  CallInProgress& c = t_call;
  c.spec = &spec;
  c.correlation = d->correlationId;
  c.stack_captured = false;
  c.made_node = false;  // a launch into a capturing stream makes a kernel node
  c.symbol = d->symbolName;
  // Only what a node made inside the launch reads (OnGraphNodeCreated);
  // EXIT reads the stream in place (LaunchStream): no reader is called.
  ParsedCall& call = c.call;
  call.role = Role::kLaunch;
  call.node_only = false;
  t_in_call = true;
  PublishEnter(spec);
}

template <typename Result>
void LaunchExit(const CUpti_CallbackData* d, Result ok_value) {
  t_in_call = false;
  const uint64_t end_ticks = StatusCallEnds();  // 0: no page
  const auto* ret = static_cast<const Result*>(d->functionReturnValue);
  if (ret == nullptr || *ret != ok_value) [[unlikely]] {
    if (ret != nullptr) CallFailed(d, DomainOf<Result>(), static_cast<int>(*ret));
    return;
  }
  // Captured into a graph: launched at each launch of its instances.
  if (t_call.made_node) return;
  KernelLaunch(d, LaunchStream(*t_call.spec, d), end_ticks != 0 ? end_ticks : Ticks());
}
template void LaunchExit(const CUpti_CallbackData* d, cudaError_t ok_value);
template void LaunchExit(const CUpti_CallbackData* d, CUresult ok_value);

namespace {

// A launch the common case (Events::KernelLaunchedAgain) does not cover:
// the first, a kernel's first (its site is captured then), one on another
// context than the first, a name found past its first probe. Out of line,
// reached by a tail call: KernelLaunch's own path keeps no register.
__attribute__((noinline)) void KernelLaunchInFull(Events events, const CUpti_CallbackData* d,
                                                  const void* stream, uint64_t ticks) {
  const uint32_t name_id = events.Launched(CurrentPhase(), d->symbolName);
  // One stack per kernel name, at its first launch: not one per launch.
  if (events.KernelSiteNeeded(name_id)) [[unlikely]] {
    events.KernelSiteSeen(name_id, CallSite());
  }
  events.KernelQueued(d->contextUid, name_id, Addr(stream), ticks);
}

}  // namespace

void KernelLaunch(const CUpti_CallbackData* d, const void* stream, uint64_t ticks) {
  Events events = CurrentEvents();
  if (!events.enabled()) return;
  if (events.KernelLaunchedAgain(CurrentPhase(), d->symbolName, d->contextUid, Addr(stream), ticks))
      [[likely]] {
    return;
  }
  KernelLaunchInFull(events, d, stream, ticks);
}

// Counted by call and code with the stack of its first, and the context's
// first sticky error with the launches before it. Only a call whose return
// value is not success comes here; expected failures (out of memory, not
// ready, ...: IsExpectedCudaError) are not counted.
void CallFailed(const CUpti_CallbackData* d, CUpti_CallbackDomain domain, int code) {
  if (IsExpectedCudaError(code)) return;
  Events events = CurrentEvents();
  CudaErrorEvent e;
  e.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver;
  e.api = d->functionName;
  e.code = code;
  e.context_uid = d->contextUid;
  e.device = DeviceOfContext(d->context, d->contextUid);
  e.now_ns = events.NowNs();
  // A stack only for what is kept new, captured after the table's lock is
  // released: a failure repeated in a loop costs one lookup under the lock,
  // not a capture each time.
  if (events.CallFailed(e)) events.CallFailureStack(e, CallSite());
}

}  // namespace gpuwatch::switchboard
