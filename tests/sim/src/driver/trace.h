// API tracing, resource callbacks and activity records: the single place where the simulator
// talks to the (fake) CUPTI. No lock of the driver is held while a hook runs, so a subscriber
// callback may call back into CUDA.
#ifndef GWSIM_DRIVER_TRACE_H_
#define GWSIM_DRIVER_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "driver/cuda_headers.h"
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

// Traces one driver API call: ENTER callback, body, EXIT callback with the result.
struct NoParams {};

template <typename Params, typename Body>
CUresult TraceDriver(uint32_t cbid, const char* name, const Params& params, Body&& body,
                     const char* symbol = nullptr) {
  if (NoDriver()) return body();  // without a driver there is nothing to trace
  gwsim_api_frame frame{};
  frame.domain = CUPTI_CB_DOMAIN_DRIVER_API;
  frame.cbid = cbid;
  frame.function_name = name;
  if constexpr (!std::is_same_v<Params, NoParams>) frame.params = &params;
  frame.symbol_name = symbol;
  EnterFrame(&frame);
  CUresult result = body();
  frame.return_value = &result;
  ExitFrame(&frame);
  return result;
}

#define GWSIM_DRV(name) CUPTI_DRIVER_TRACE_CBID_##name, #name

void EmitResource(CUpti_CallbackId cbid, CUctx_st* ctx, CUstream_st* stream);

bool ActivityWanted(CUpti_ActivityKind kind);
void EmitActivity(const void* record, size_t size);

// MEMORY2 records.
void EmitMemoryRecord(CUpti_ActivityMemoryOperationType op, const Allocation& a, bool is_async,
                      uint32_t stream_id);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_TRACE_H_
