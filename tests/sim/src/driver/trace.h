// API tracing, resource callbacks and activity records: the single place where the simulator
// talks to the (fake) CUPTI. No lock of the driver is held while a hook runs, so a subscriber
// callback may call back into CUDA.
#ifndef GWSIM_DRIVER_TRACE_H_
#define GWSIM_DRIVER_TRACE_H_

#include <cstddef>
#include <cstdint>
#include "common/api_frame.h"
#include "driver/cuda_headers.h"
#include "driver/fault.h"
#include "driver/state.h"

namespace gwsim::drv {

const gwsim_cupti_hooks* Hooks();
void SetHooks(const gwsim_cupti_hooks* hooks);

void EnterFrame(gwsim_api_frame* frame);
void ExitFrame(gwsim_api_frame* frame);

// The correlation id of the innermost traced call on this thread (0 when none), and that of the
// innermost runtime call (0 when the driver was called directly).
uint32_t CurrentCorrelationId();
uint32_t CurrentRuntimeCorrelationId();
// The ids an activity record produced now carries (correlationId, runtimeCorrelationId):
// GWSIM_CORRELATION=shared: the innermost call's (a nested driver call shares the runtime call's
// id) and 0; `own`: the two above; `unjoinable`: ids no API call has, and 0.
uint32_t RecordCorrelationId();
uint32_t RecordRuntimeCorrelationId();

// Whether the calling thread runs host functions (host_fn.cc): CUDA may not be called there.
bool InHostFunction();

// Traces one driver API call: ENTER callback, body, EXIT callback with the result. On the
// host-function thread the body does not run: the call returns CUDA_ERROR_NOT_PERMITTED; nor on
// a context whose kernel faulted (fault.h): the call returns the context's error.
struct NoParams {};

template <typename Params, typename Body>
CUresult TraceDriver(uint32_t cbid, const char* name, const Params& params, Body&& body,
                     const char* symbol = nullptr) {
  if (NoDriver()) return body();  // without a driver there is nothing to trace
  gwsim_api_frame frame =
      ApiFrame<NoParams>(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, params, symbol);
  EnterFrame(&frame);
  CUresult result = InHostFunction() ? CUDA_ERROR_NOT_PERMITTED : FaultedCall(name);
  if (result == CUDA_SUCCESS) result = body();
  frame.return_value = &result;
  ExitFrame(&frame);
  return result;
}

#define GWSIM_DRV(name) CUPTI_DRIVER_TRACE_CBID_##name, #name

// Defines the entry point `name` and its per-thread-default-stream twin `twin` (name_ptsz or
// name_ptds), which take the same parameters: each is traced under its own cbid with its own
// params struct (filled from `args`), and runs `body` with `per_thread` false or true. A
// trailing argument is TraceDriver's `symbol` (a launch's kernel name).
#define GWSIM_DRV_PER_THREAD_TWINS(name, twin, params, args, body, ...) \
  GWSIM_DRV_TRACED(name, false, params, args, body, __VA_ARGS__)        \
  GWSIM_DRV_TRACED(twin, true, params, args, body, __VA_ARGS__)
#define GWSIM_DRV_TRACED(name, per_thread_value, params, args, body, ...)                       \
  GWSIM_EXPORT CUresult CUDAAPI name params {                                                   \
    [[maybe_unused]] constexpr bool per_thread = per_thread_value;                              \
    return TraceDriver(GWSIM_DRV(name),                                                         \
                       name##_params{GWSIM_UNPAREN args}, [&] body __VA_OPT__(, ) __VA_ARGS__); \
  }

void EmitResource(CUpti_CallbackId cbid, CUctx_st* ctx, CUstream_st* stream);
// MODULE_LOADED / MODULE_UNLOAD_STARTING: resourceDescriptor points at `module`.
void EmitModuleResource(CUpti_CallbackId cbid, CUctx_st* ctx,
                        const CUpti_ModuleResourceData* module);
// The graph resource callbacks (GRAPH_*, GRAPHNODE_*, GRAPHEXEC_*): resourceDescriptor points
// at `graph`.
void EmitGraphResource(CUpti_CallbackId cbid, CUctx_st* ctx, const CUpti_GraphData* graph);

bool ActivityWanted(CUpti_ActivityKind kind);
void EmitActivity(const void* record, size_t size);

// MEMORY2 records.
void EmitMemoryRecord(CUpti_ActivityMemoryOperationType op, const Allocation& a, bool is_async,
                      uint32_t stream_id);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_TRACE_H_
