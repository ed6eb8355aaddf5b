// Exported driver API: streams, events and kernel launches.
#include "driver/cuda_headers.h"
#include "driver/graph.h"
#include "driver/hang.h"
#include "driver/state.h"
#include "driver/trace.h"
#include "driver/work.h"

namespace gwsim::drv {
namespace {

// cuEventQuery / cuEventSynchronize (`wait`): work completes on the calling thread, so a valid
// event has completed unless recorded behind a kernel that never ends (hang.h).
CUresult EventComplete(CUevent hEvent, bool wait) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (!ValidEvent(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if (auto r = CaptureEventUse(hEvent)) return *r;
  if (EventHangs(hEvent) && !wait) return CUDA_ERROR_NOT_READY;
  WaitIfHung(EventHangs(hEvent));
  return CUDA_SUCCESS;
}

const char* SymbolOf(CUfunction f) {
  return f != nullptr && ValidFunction(f) ? f->name.c_str() : nullptr;
}

// cuStreamSynchronize / cuStreamQuery (`wait` false).
CUresult Synchronize(CUstream stream, bool per_thread, bool wait) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  // A capturing stream cannot be waited for; any other has completed all its work, unless a
  // kernel on it never ends (hang.h).
  if (auto r = CaptureStreamSync(s)) return *r;
  if (StreamHangs(s) && !wait) return CUDA_ERROR_NOT_READY;
  WaitIfHung(StreamHangs(s));
  return CUDA_SUCCESS;
}

CUresult GetStreamId(CUstream stream, unsigned long long* id, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *id = s->id;
  return CUDA_SUCCESS;
}

CUresult WaitEvent(CUstream stream, CUevent event, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (!ValidEvent(event)) return CUDA_ERROR_INVALID_HANDLE;
  if (auto r = CaptureWaitEvent(s, event)) return *r;  // fork/join of a capture
  return CUDA_SUCCESS;
}

CUresult LaunchGrid(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shared_mem, CUstream stream, bool per_thread) {
  LaunchRequest r;
  r.function = f;
  r.grid[0] = gx;
  r.grid[1] = gy;
  r.grid[2] = gz;
  r.block[0] = bx;
  r.block[1] = by;
  r.block[2] = bz;
  r.shared_mem = shared_mem;
  r.stream = stream;
  r.per_thread = per_thread;
  return Launch(r);
}

CUresult LaunchConfig(const CUlaunchConfig* config, CUfunction f, bool per_thread) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LaunchGrid(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                    config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                    per_thread);
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Streams

GWSIM_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuStreamCreate), cuStreamCreate_params{phStream, Flags},
                     [&] { return CreateStream(Flags, 0, phStream); });
}

GWSIM_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags,
                                                         int priority) {
  return TraceDriver(GWSIM_DRV(cuStreamCreateWithPriority),
                     cuStreamCreateWithPriority_params{phStream, flags, priority},
                     [&] { return CreateStream(flags, priority, phStream); });
}

// As a Hopper GPU's: 0 (least) to -5 (greatest); a priority outside is clamped at creation.
GWSIM_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority,
                                                          int* greatestPriority) {
  return TraceDriver(GWSIM_DRV(cuCtxGetStreamPriorityRange),
                     cuCtxGetStreamPriorityRange_params{leastPriority, greatestPriority}, [&] {
                       CUctx_st* ctx = nullptr;
                       if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
                       if (leastPriority != nullptr) *leastPriority = kLeastStreamPriority;
                       if (greatestPriority != nullptr) {
                         *greatestPriority = kGreatestStreamPriority;
                       }
                       return CUDA_SUCCESS;
                     });
}

GWSIM_DRV_PER_THREAD_TWINS(cuStreamGetPriority, cuStreamGetPriority_ptsz,
                           (CUstream hStream, int* priority), (hStream, priority), {
                             CUstream_st* s = nullptr;
                             if (CUresult r = ResolveStream(hStream, per_thread, &s);
                                 r != CUDA_SUCCESS) {
                               return r;
                             }
                             if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
                             *priority = s->priority;
                             return CUDA_SUCCESS;
                           })

GWSIM_DRV_TRACED(cuStreamDestroy_v2, false, (CUstream hStream), (hStream),
                 { return DestroyStream(hStream); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamSynchronize, cuStreamSynchronize_ptsz, (CUstream hStream),
                           (hStream), { return Synchronize(hStream, per_thread, true); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamQuery, cuStreamQuery_ptsz, (CUstream hStream), (hStream),
                           { return Synchronize(hStream, per_thread, false); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamWaitEvent, cuStreamWaitEvent_ptsz,
                           (CUstream hStream, CUevent hEvent, unsigned int Flags),
                           (hStream, hEvent, Flags),
                           { return WaitEvent(hStream, hEvent, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamGetId, cuStreamGetId_ptsz,
                           (CUstream hStream, unsigned long long* streamId), (hStream, streamId),
                           { return GetStreamId(hStream, streamId, per_thread); })

GWSIM_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  return TraceDriver(GWSIM_DRV(cuStreamGetCtx), cuStreamGetCtx_params{hStream, pctx}, [&] {
    CUstream_st* s = nullptr;
    if (CUresult r = ResolveStream(hStream, false, &s); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pctx = s->ctx;
    return CUDA_SUCCESS;
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  return TraceDriver(GWSIM_DRV(cuStreamGetFlags), cuStreamGetFlags_params{hStream, flags}, [&] {
    CUstream_st* s = nullptr;
    if (CUresult r = ResolveStream(hStream, false, &s); r != CUDA_SUCCESS) return r;
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
  });
}

// Events

GWSIM_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  return TraceDriver(GWSIM_DRV(cuEventCreate), cuEventCreate_params{phEvent, Flags},
                     [&] { return EventCreate(phEvent, Flags); });
}

GWSIM_DRV_PER_THREAD_TWINS(cuEventRecord, cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream),
                           (hEvent, hStream), { return EventRecord(hEvent, hStream, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz,
                           (CUevent hEvent, CUstream hStream, unsigned int flags),
                           (hEvent, hStream, flags),
                           { return EventRecord(hEvent, hStream, per_thread); })

// Work completes as it is submitted: querying an event or waiting for it differ only behind a
// kernel that never ends.
GWSIM_DRV_TRACED(cuEventQuery, false, (CUevent hEvent), (hEvent),
                 { return EventComplete(hEvent, false); })
GWSIM_DRV_TRACED(cuEventSynchronize, false, (CUevent hEvent), (hEvent),
                 { return EventComplete(hEvent, true); })

GWSIM_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart,
                                                    CUevent hEnd) {
  return TraceDriver(GWSIM_DRV(cuEventElapsedTime_v2),
                     cuEventElapsedTime_v2_params{pMilliseconds, hStart, hEnd},
                     [&] { return EventElapsed(pMilliseconds, hStart, hEnd); });
}

GWSIM_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  return TraceDriver(GWSIM_DRV(cuEventDestroy_v2), cuEventDestroy_v2_params{hEvent},
                     [&] { return EventDestroy(hEvent); });
}

// Kernels

GWSIM_DRV_PER_THREAD_TWINS(
    cuLaunchKernel, cuLaunchKernel_ptsz,
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
     unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra),
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
     kernelParams, extra),
    {
      return LaunchGrid(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                        sharedMemBytes, hStream, per_thread);
    },
    SymbolOf(f))

GWSIM_DRV_PER_THREAD_TWINS(
    cuLaunchKernelEx, cuLaunchKernelEx_ptsz,
    (const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra),
    (config, f, kernelParams, extra), { return LaunchConfig(config, f, per_thread); }, SymbolOf(f))

GWSIM_EXPORT CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  return TraceDriver(GWSIM_DRV(cuFuncGetName), cuFuncGetName_params{name, hfunc}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *name = SymbolOf(hfunc);
    return *name != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

// A CUkernel is the same object as its CUfunction in the simulator.
GWSIM_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  return TraceDriver(GWSIM_DRV(cuKernelGetFunction), cuKernelGetFunction_params{pFunc, kernel},
                     [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       auto* f = reinterpret_cast<CUfunction>(kernel);
                       if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       if (SymbolOf(f) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
                       *pFunc = f;
                       return CUDA_SUCCESS;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  return TraceDriver(GWSIM_DRV(cuKernelGetName), cuKernelGetName_params{name, hfunc}, [&] {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *name = SymbolOf(reinterpret_cast<CUfunction>(hfunc));
    return *name != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}
