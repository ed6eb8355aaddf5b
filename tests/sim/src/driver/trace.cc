#include "driver/trace.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace gwsim::drv {

namespace {

std::atomic<const gwsim_cupti_hooks*> g_hooks{nullptr};

constexpr uint32_t kDispatching = 1u;  // gwsim_api_frame::flags: its callbacks are running

// A driver call made by a runtime call (not by a subscriber from inside a callback).
bool NestedInRuntime(const gwsim_api_frame* frame) {
  const gwsim_api_frame* parent = frame->parent;
  return frame->domain == CUPTI_CB_DOMAIN_DRIVER_API && parent != nullptr &&
         parent->domain == CUPTI_CB_DOMAIN_RUNTIME_API && (parent->flags & kDispatching) == 0;
}

// Whether CUPTI sees the call (callbacks, API records): not the runtime's bookkeeping, and under
// GWSIM_NESTED_DRIVER_CALLBACKS=0 not the runtime's driver work, which a real runtime may well
// hide (it reaches the driver through private entry points).
bool Visible(const gwsim_api_frame* frame) {
  return T().quiet == 0 && (D().config.nested_driver_callbacks || !NestedInRuntime(frame));
}

void Dispatch(gwsim_api_frame* frame, CUpti_ApiCallbackSite site) {
  const gwsim_cupti_hooks* hooks = Hooks();
  if (hooks == nullptr || !Visible(frame)) return;
  CUctx_st* ctx = CurrentContext();
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = frame->function_name;
  data.functionParams = frame->params;
  data.functionReturnValue = site == CUPTI_API_EXIT ? frame->return_value : nullptr;
  data.symbolName = frame->symbol_name;
  data.context = ctx;
  data.contextUid = ctx != nullptr ? ctx->uid.load(std::memory_order_relaxed) : 0;
  data.correlationData = &frame->correlation_data;
  data.correlationId = frame->correlation_id;
  frame->flags |= kDispatching;
  hooks->api(static_cast<CUpti_CallbackDomain>(frame->domain), frame->cbid, &data);
  frame->flags &= ~kDispatching;
}

// A RUNTIME or DRIVER record of the call, when that kind is enabled: its cbid, the simulated
// clock at ENTER and EXIT, the calling thread, a correlation id and its result.
void EmitApiRecord(const gwsim_api_frame* frame) {
  const bool runtime = frame->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const CUpti_ActivityKind kind =
      runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  if (!ActivityWanted(kind)) return;
  CUpti_ActivityAPI r{};
  r.kind = kind;
  r.cbid = frame->cbid;
  r.start = frame->start_ns;
  r.end = Now();
  r.processId = static_cast<uint32_t>(getpid());
  r.threadId = static_cast<uint32_t>(gettid());
  // A driver API record has a correlation id of its own, also where the callbacks of a driver
  // call a runtime call makes share the runtime call's (GWSIM_CORRELATION=shared).
  r.correlationId = NestedInRuntime(frame) && D().config.correlation == kCorrelationShared
                        ? D().next_correlation_id.fetch_add(1, std::memory_order_relaxed)
                        : frame->correlation_id;
  // cudaError_t and CUresult are both 32-bit enums.
  if (frame->return_value != nullptr) std::memcpy(&r.returnValue, frame->return_value, 4);
  EmitActivity(&r, sizeof(r));
}

}  // namespace

const gwsim_cupti_hooks* Hooks() { return g_hooks.load(std::memory_order_acquire); }

void SetHooks(const gwsim_cupti_hooks* hooks) { g_hooks.store(hooks, std::memory_order_release); }

void EnterFrame(gwsim_api_frame* frame) {
  ThreadState& t = T();
  gwsim_api_frame* parent = t.top_frame;
  frame->parent = parent;
  frame->flags = 0;
  frame->correlation_data = 0;
  t.top_frame = frame;
  frame->start_ns = Now();
  // GWSIM_CORRELATION=shared: a driver call made by a runtime call shares its correlation id
  // ("the correlation ID in the driver and runtime API activity record"); `own`: it gets one of
  // its own, as a driver API activity record has. Calls a subscriber makes from inside a
  // callback always get their own.
  if (NestedInRuntime(frame) && D().config.correlation == kCorrelationShared) {
    frame->correlation_id = parent->correlation_id;
  } else {
    frame->correlation_id = D().next_correlation_id.fetch_add(1, std::memory_order_relaxed);
  }
  Dispatch(frame, CUPTI_API_ENTER);
}

void ExitFrame(gwsim_api_frame* frame) {
  Dispatch(frame, CUPTI_API_EXIT);
  if (Visible(frame)) EmitApiRecord(frame);
  T().top_frame = frame->parent;
}

uint32_t CurrentCorrelationId() {
  const gwsim_api_frame* top = T().top_frame;
  return top != nullptr ? top->correlation_id : 0;
}

uint32_t CurrentRuntimeCorrelationId() {
  for (const gwsim_api_frame* f = T().top_frame; f != nullptr; f = f->parent) {
    if (f->domain == CUPTI_CB_DOMAIN_RUNTIME_API) return f->correlation_id;
  }
  return 0;
}

uint32_t RecordCorrelationId() {
  if (D().config.correlation == kCorrelationUnjoinable) {
    // Ids from the top of the range, which API calls never reach.
    static std::atomic<uint32_t> next{0xF0000000u};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  return CurrentCorrelationId();
}

uint32_t RecordRuntimeCorrelationId() {
  // `shared`: the record's correlationId already is the runtime call's, and NVIDIA's CUPTI
  // leaves runtimeCorrelationId 0 (every MEMCPY record on the driver, CUDA 13.0).
  return D().config.correlation == kCorrelationOwn ? CurrentRuntimeCorrelationId() : 0;
}

namespace {

// Delivers one resource callback to CUPTI, when it is attached.
void DeliverResource(CUpti_CallbackId cbid, CUctx_st* ctx, CUstream_st* stream, void* descriptor) {
  const gwsim_cupti_hooks* hooks = Hooks();
  if (hooks == nullptr) return;
  CUpti_ResourceData data{};
  data.context = ctx;
  data.resourceHandle.stream = stream;
  data.resourceDescriptor = descriptor;
  hooks->resource(cbid, &data);
}

}  // namespace

void EmitResource(CUpti_CallbackId cbid, CUctx_st* ctx, CUstream_st* stream) {
  DeliverResource(cbid, ctx, stream, nullptr);
}

void EmitModuleResource(CUpti_CallbackId cbid, CUctx_st* ctx,
                        const CUpti_ModuleResourceData* module) {
  DeliverResource(cbid, ctx, nullptr, const_cast<CUpti_ModuleResourceData*>(module));
}

void EmitGraphResource(CUpti_CallbackId cbid, CUctx_st* ctx, const CUpti_GraphData* graph) {
  DeliverResource(cbid, ctx, nullptr, const_cast<CUpti_GraphData*>(graph));
}

bool ActivityWanted(CUpti_ActivityKind kind) {
  const gwsim_cupti_hooks* hooks = Hooks();
  return hooks != nullptr && hooks->activity_enabled(kind) != 0;
}

void EmitActivity(const void* record, size_t size) {
  const gwsim_cupti_hooks* hooks = Hooks();
  if (hooks != nullptr) hooks->activity(static_cast<const CUpti_Activity*>(record), size);
}

void EmitMemoryRecord(CUpti_ActivityMemoryOperationType op, const Allocation& a, bool is_async,
                      uint32_t stream_id) {
  if (!ActivityWanted(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = op;
  r.memoryKind = static_cast<CUpti_ActivityMemoryKind>(a.memory_kind);
  r.correlationId = RecordCorrelationId();
  r.address = a.base;
  r.bytes = a.size;
  r.timestamp = Now();
  r.PC = 0;
  r.processId = static_cast<uint32_t>(getpid());
  r.deviceId = static_cast<uint32_t>(a.device);
  r.contextId =
      a.ctx != nullptr ? a.ctx->uid.load(std::memory_order_relaxed) : CUPTI_INVALID_CONTEXT_ID;
  r.streamId = is_async ? stream_id : CUPTI_INVALID_STREAM_ID;
  r.name = a.name;
  r.isAsync = is_async ? 1 : 0;
  if (a.pool != nullptr) {
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.memoryPoolConfig.address = reinterpret_cast<uintptr_t>(a.pool);
    r.memoryPoolConfig.releaseThreshold = a.pool->release_threshold;
  }
  r.source = nullptr;
  EmitActivity(&r, sizeof(r));
}

}  // namespace gwsim::drv

// The private exports of gwsim_abi.h.

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): tiny C shims below

GWSIM_EXPORT void gwsim_api_enter(gwsim_api_frame* frame) { EnterFrame(frame); }

GWSIM_EXPORT void gwsim_api_exit(gwsim_api_frame* frame) { ExitFrame(frame); }

GWSIM_EXPORT int gwsim_set_quiet(int quiet) {
  const int previous = T().quiet;
  T().quiet = quiet;
  return previous;
}

GWSIM_EXPORT int gwsim_register_cupti(const gwsim_cupti_hooks* hooks) {
  if (hooks != nullptr && hooks->abi_version != GWSIM_ABI_VERSION) return -1;
  SetHooks(hooks);
  return 0;
}
