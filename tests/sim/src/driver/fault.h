// A kernel that faults (GWSIM_FAULT_KERNEL): its launch succeeds, the error surfaces at the next
// synchronizing call on its context and is sticky afterwards, as on a GPU.
#ifndef GWSIM_DRIVER_FAULT_H_
#define GWSIM_DRIVER_FAULT_H_

#include <atomic>

#include "driver/cuda_headers.h"

namespace gwsim::drv {

// Set once a matching kernel was launched: until then no call pays more than this load.
inline std::atomic<bool> g_fault_launched{false};

// Called by Launch for a kernel that runs (not a captured one): a kernel whose name contains
// GWSIM_FAULT_KERNEL leaves a pending fault on `ctx`.
void NoteLaunchFault(CUctx_st* ctx, const char* kernel_name);

CUresult FaultedCallResult(const char* call_name);

// What a driver call returns before its body runs: CUDA_SUCCESS (run the body), or the current
// context's error: its sticky error for any call that needs the context, or a pending fault
// surfacing at a synchronizing call (synchronize, query, synchronous copy, free).
inline CUresult FaultedCall(const char* call_name) {
  if (!g_fault_launched.load(std::memory_order_relaxed)) return CUDA_SUCCESS;
  return FaultedCallResult(call_name);
}

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_FAULT_H_
