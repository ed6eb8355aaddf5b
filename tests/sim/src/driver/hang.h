// A kernel that never finishes (GWSIM_HANG_KERNEL): the launch succeeds, and whatever must
// wait for the kernel blocks for ever, as a driver does when a kernel spins. Kept apart from the
// launch path: work.cc and api_exec.cc call these few hooks.
//
// A kernel whose function name contains GWSIM_HANG_KERNEL hangs its stream from its launch on:
// - a synchronous copy on that stream, or on its context's legacy stream while a blocking
//   stream of the context hangs, blocks before it moves a byte;
// - cuStreamSynchronize of such a stream, cuCtxSynchronize of the context and
//   cuEventSynchronize of an event recorded on a hung stream block;
// - cuStreamQuery and cuEventQuery of them return CUDA_ERROR_NOT_READY.
// A blocked thread waits in pause(): the process can be killed or stopped; nothing wakes it.
#ifndef GWSIM_DRIVER_HANG_H_
#define GWSIM_DRIVER_HANG_H_

#include "driver/cuda_headers.h"
#include "driver/state.h"

namespace gwsim::drv {

// At a launch that went ahead on `stream`: hangs the stream when the function's name matches.
void HangIfNamed(const CUfunc_st* function, CUstream_st* stream);

// Whether work queued on `stream` now would never complete (its own hung kernel, or the legacy
// stream behind a hung blocking stream of its context).
bool StreamHangs(const CUstream_st* stream);
bool ContextHangs(const CUctx_st* ctx);

// At an event's record: the event never completes when its stream hangs.
void RecordEventHang(const CUevent_st* event, const CUstream_st* stream);
bool EventHangs(const CUevent_st* event);

// Blocks the calling thread for ever when `hangs`.
void WaitIfHung(bool hangs);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_HANG_H_
