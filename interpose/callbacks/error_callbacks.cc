// Kernels launched and calls that failed: what a report needs to name the
// error a run ended on, the call where it surfaced and the kernels before it
// (libgpuwatch/record/cuda_errors.h).
#include "interpose/callbacks/callback_state.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/record/cuda_errors.h"

namespace gpuwatch::switchboard {

void KernelLaunch(const CUpti_CallbackData* d, const void* stream) {
  Events events = CurrentEvents();
  if (!events.enabled()) return;
  const uint32_t name_id = events.Launched(CurrentPhase(), d->symbolName);
  // One stack per kernel name, at its first launch: not one per launch.
  if (events.KernelSiteNeeded(name_id)) [[unlikely]] {
    events.KernelSiteSeen(name_id, CallSite());
  }
  events.KernelQueued(d->contextUid, name_id, Addr(stream));
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
  // A stack only for what is kept new: a failure repeated in a loop costs a
  // lookup, not a capture each time.
  if (events.CallFailureKeepsNew(e)) e.stack_id = CallSite();
  events.CallFailed(e);
}

}  // namespace gpuwatch::switchboard
