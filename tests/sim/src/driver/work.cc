#include "driver/work.h"

#include <cstring>

#include "driver/array.h"
#include "driver/fault.h"
#include "driver/function.h"
#include "driver/graph.h"
#include "driver/hang.h"
#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {

namespace {

// Bytes from the first to one past the last byte a strided copy touches on one side.
bool Span(const CopyShape& s, size_t pitch, size_t slice, size_t* out) {
  if (s.height > 1 && pitch < s.width) return false;
  if (s.depth > 1 && slice < pitch * (s.height - 1) + s.width) return false;
  *out = (s.depth - 1) * slice + (s.height - 1) * pitch + s.width;
  return true;
}

uint8_t CopyKind(const PointerClass& src, const PointerClass& dst) {
  const bool s = src.device_side();
  const bool d = dst.device_side();
  const bool src_array = src.kind == CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
  const bool dst_array = dst.kind == CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
  if (src_array && dst_array) return CUPTI_ACTIVITY_MEMCPY_KIND_ATOA;
  if (src_array) return d ? CUPTI_ACTIVITY_MEMCPY_KIND_ATOD : CUPTI_ACTIVITY_MEMCPY_KIND_ATOH;
  if (dst_array) return s ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOA : CUPTI_ACTIVITY_MEMCPY_KIND_HTOA;
  if (!s && d) return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  if (s && !d) return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  if (!s && !d) return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
  const bool same = src.alloc->device == dst.alloc->device;
  return same ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD : CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
}

uint32_t ContextId(const CUctx_st* ctx) {
  return ctx != nullptr ? ctx->uid.load(std::memory_order_relaxed) : CUPTI_INVALID_CONTEXT_ID;
}

void RecordCopy(const PointerClass& src, const PointerClass& dst, uint64_t bytes,
                const CUstream_st* stream, bool async) {
  const uint8_t copy_kind = CopyKind(src, dst);
  const bool peer = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  const uint64_t duration = CopyDurationNs(src.kind, dst.kind, bytes);
  const uint64_t start = Advance(duration);
  const uint8_t flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  const uint32_t correlation = RecordCorrelationId();
  const GraphNodeScope graph = CurrentGraphNode();  // zeros outside a graph launch
  // The fields MEMCPY and MEMCPY2 records share.
  auto fill = [&](auto& r, CUpti_ActivityKind kind) {
    r.kind = kind;
    r.copyKind = copy_kind;
    r.srcKind = src.kind;
    r.dstKind = dst.kind;
    r.flags = flags;
    r.bytes = bytes;
    r.start = start;
    r.end = start + duration;
    r.deviceId = static_cast<uint32_t>(stream->ctx->device);
    r.contextId = ContextId(stream->ctx);
    r.streamId = stream->id;
    r.correlationId = correlation;
    r.graphNodeId = graph.node_id;
    r.graphId = graph.graph_id;
  };
  if (peer && ActivityWanted(CUPTI_ACTIVITY_KIND_MEMCPY2)) {
    CUpti_ActivityMemcpyPtoP4 r{};
    fill(r, CUPTI_ACTIVITY_KIND_MEMCPY2);
    r.srcDeviceId = static_cast<uint32_t>(src.alloc->device);
    r.srcContextId = ContextId(src.alloc->ctx);
    r.dstDeviceId = static_cast<uint32_t>(dst.alloc->device);
    r.dstContextId = ContextId(dst.alloc->ctx);
    EmitActivity(&r, sizeof(r));
    return;
  }
  if (!ActivityWanted(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
  CUpti_ActivityMemcpy6 r{};
  fill(r, CUPTI_ACTIVITY_KIND_MEMCPY);
  r.runtimeCorrelationId = RecordRuntimeCorrelationId();
  r.copyCount = 1;
  EmitActivity(&r, sizeof(r));
}

}  // namespace

uint64_t CopyDurationNs(uint8_t src_kind, uint8_t dst_kind, uint64_t bytes) {
  const SimConfig& c = D().config;
  auto device_side = [](uint8_t k) {  // CUDA arrays live in device memory too
    return k == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || k == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED ||
           k == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC || k == CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
  };
  const bool s = device_side(src_kind);
  const bool d = device_side(dst_kind);
  double gbps = c.bw_pageable_gbps;
  if (s && d) {
    gbps = c.bw_device_gbps;
  } else if (s || d) {
    const uint8_t host = s ? dst_kind : src_kind;
    gbps = host == CUPTI_ACTIVITY_MEMORY_KIND_PINNED ? c.bw_pinned_gbps : c.bw_pageable_gbps;
  } else if (src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED &&
             dst_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED) {
    gbps = c.bw_pinned_gbps;
  }
  // 1 GB/s is 1 byte/ns; the fraction of a ns is dropped.
  return c.copy_latency_ns + static_cast<uint64_t>(static_cast<double>(bytes) / gbps);
}

CUresult Copy(const CopyRequest& request) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  const CopyShape& s = request.shape;
  const uint64_t bytes = static_cast<uint64_t>(s.width) * s.height * s.depth;
  CUstream_st* stream = nullptr;
  if (CUresult r = ResolveStream(request.stream, request.per_thread, &stream); r != CUDA_SUCCESS) {
    return r;
  }
  if (auto r = CaptureCopy(request, stream)) return *r;  // a node of a graph being captured
  if (!request.async) WaitIfHung(StreamHangs(stream));   // behind a kernel that never ends
  if (bytes == 0) return CUDA_SUCCESS;
  if (request.dst == 0 || request.src == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t src_span = 0;
  size_t dst_span = 0;
  if (!Span(s, s.src_pitch, s.src_slice, &src_span) ||
      !Span(s, s.dst_pitch, s.dst_slice, &dst_span)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const MemoryTable& table = D().memory;
  if (request.dst_side == Side::kDevice && !table.CoversDevice(request.dst, dst_span)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (request.src_side == Side::kDevice && !table.CoversDevice(request.src, src_span)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  PointerClass src = Classify(request.src);
  PointerClass dst = Classify(request.dst);
  // The storage of a CUDA array is device memory of kind ARRAY.
  for (PointerClass* c : {&src, &dst}) {
    if (c->alloc && c->alloc->origin == Origin::kArray) c->kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
  }
  for (size_t z = 0; z < s.depth; ++z) {
    for (size_t y = 0; y < s.height; ++y) {
      std::memmove(reinterpret_cast<void*>(request.dst + z * s.dst_slice + y * s.dst_pitch),
                   reinterpret_cast<const void*>(request.src + z * s.src_slice + y * s.src_pitch),
                   s.width);
    }
  }
  RecordCopy(src, dst, bytes, stream, request.async);
  return CUDA_SUCCESS;
}

CUresult Memset(uintptr_t dst, uint32_t value, unsigned element_size, size_t width_elements,
                size_t height, size_t pitch, CUstream stream, bool per_thread) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* resolved = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &resolved); r != CUDA_SUCCESS) return r;
  if (auto r = CaptureMemset(dst, value, element_size, width_elements, height, pitch, resolved)) {
    return *r;
  }
  const size_t row = width_elements * element_size;
  if (row == 0 || height == 0) return CUDA_SUCCESS;
  if (height > 1 && pitch < row) return CUDA_ERROR_INVALID_VALUE;
  if (dst % element_size != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!D().memory.CoversDevice(dst, (height - 1) * pitch + row)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t y = 0; y < height; ++y) {
    auto* p = reinterpret_cast<unsigned char*>(dst + y * pitch);
    if (element_size == 1) {
      std::memset(p, static_cast<int>(value & 0xff), row);
      continue;
    }
    for (size_t i = 0; i < width_elements; ++i) {
      std::memcpy(p + i * element_size, &value, element_size);  // little-endian low bytes
    }
  }
  return CUDA_SUCCESS;
}

namespace {

// One side of a CUDA_MEMCPY2D/3D descriptor: the address of the copy's first byte there, the
// row pitch and slice size to step by, and the kind of memory the copy requires there.
struct DescriptorSide {
  uintptr_t start = 0;
  size_t pitch = 0;
  size_t slice = 0;
  Side side = Side::kAny;
  size_t element_size = 0;  // nonzero for a CUDA array
};

// (x, y, z) is the side's position; pitch and height are what the descriptor gives for pointers
// (ignored for a CUDA array, whose own layout applies). The box copied must lie inside an
// array, and its x and width must be whole elements.
CUresult ResolveSide(CUmemorytype type, const void* host, CUdeviceptr device, CUarray array,
                     size_t x, size_t y, size_t z, size_t pitch, size_t height,
                     const CopyShape& box, DescriptorSide* out) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: {
      const uintptr_t base =
          type == CU_MEMORYTYPE_HOST ? reinterpret_cast<uintptr_t>(host) : uintptr_t{device};
      out->side = type == CU_MEMORYTYPE_DEVICE ? Side::kDevice : Side::kAny;
      out->pitch = pitch;
      out->slice = pitch * height;
      out->start = base == 0 ? 0 : base + z * out->slice + y * pitch + x;
      return CUDA_SUCCESS;
    }
    case CU_MEMORYTYPE_ARRAY: {
      ArrayView v;
      if (CUresult r = ViewArray(array, &v); r != CUDA_SUCCESS) return r;
      if (x % v.element_size != 0 || box.width % v.element_size != 0 || x > v.row_bytes ||
          box.width > v.row_bytes - x || y > v.height || box.height > v.height - y || z > v.depth ||
          box.depth > v.depth - z) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      out->side = Side::kDevice;
      out->pitch = v.row_bytes;
      out->slice = v.row_bytes * v.height;
      out->start = v.storage + z * out->slice + y * out->pitch + x;
      out->element_size = v.element_size;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CopySides(CopyRequest* r, const DescriptorSide& src, const DescriptorSide& dst) {
  // Array to array: the elements must have the same size.
  if (src.element_size != 0 && dst.element_size != 0 && src.element_size != dst.element_size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  r->src = src.start;
  r->dst = dst.start;
  r->src_side = src.side;
  r->dst_side = dst.side;
  r->shape.src_pitch = src.pitch;
  r->shape.dst_pitch = dst.pitch;
  r->shape.src_slice = src.slice;
  r->shape.dst_slice = dst.slice;
  return Copy(*r);
}

// The request of a descriptor copy of width x height x depth; the rest comes from its sides.
CopyRequest DescriptorRequest(size_t width, size_t height, size_t depth, CUstream stream,
                              bool per_thread, bool async) {
  CopyRequest r;
  r.shape.width = width;
  r.shape.height = height;
  r.shape.depth = depth;
  r.stream = stream;
  r.per_thread = per_thread;
  r.async = async;
  return r;
}

}  // namespace

CUresult CopyDescriptor2D(const CUDA_MEMCPY2D* copy, CUstream stream, bool per_thread, bool async) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CopyRequest r = DescriptorRequest(copy->WidthInBytes, copy->Height, 1, stream, per_thread, async);
  DescriptorSide src;
  DescriptorSide dst;
  CUresult e = ResolveSide(copy->srcMemoryType, copy->srcHost, copy->srcDevice, copy->srcArray,
                           copy->srcXInBytes, copy->srcY, 0, copy->srcPitch, 0, r.shape, &src);
  if (e == CUDA_SUCCESS) {
    e = ResolveSide(copy->dstMemoryType, copy->dstHost, copy->dstDevice, copy->dstArray,
                    copy->dstXInBytes, copy->dstY, 0, copy->dstPitch, 0, r.shape, &dst);
  }
  if (e != CUDA_SUCCESS) return e;
  src.slice = 0;
  dst.slice = 0;
  return CopySides(&r, src, dst);
}

CUresult CopyDescriptor3D(const CUDA_MEMCPY3D* copy, CUstream stream, bool per_thread, bool async) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // "The srcLOD and dstLOD members ... must be set to 0"; the reserved pointers must be NULL.
  if (copy->srcLOD != 0 || copy->dstLOD != 0 || copy->reserved0 != nullptr ||
      copy->reserved1 != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CopyRequest r =
      DescriptorRequest(copy->WidthInBytes, copy->Height, copy->Depth, stream, per_thread, async);
  DescriptorSide src;
  DescriptorSide dst;
  CUresult e = ResolveSide(copy->srcMemoryType, copy->srcHost, copy->srcDevice, copy->srcArray,
                           copy->srcXInBytes, copy->srcY, copy->srcZ, copy->srcPitch,
                           copy->srcHeight, r.shape, &src);
  if (e == CUDA_SUCCESS) {
    e = ResolveSide(copy->dstMemoryType, copy->dstHost, copy->dstDevice, copy->dstArray,
                    copy->dstXInBytes, copy->dstY, copy->dstZ, copy->dstPitch, copy->dstHeight,
                    r.shape, &dst);
  }
  if (e != CUDA_SUCCESS) return e;
  return CopySides(&r, src, dst);
}

CUresult Launch(const LaunchRequest& request) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (request.function == nullptr || !ValidFunction(request.function)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // More dynamic shared memory than the function allows (48 KiB unless raised by
  // cuFuncSetAttribute) cannot be launched.
  if (request.shared_mem > static_cast<unsigned>(MaxDynamicShared(request.function))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (request.grid[i] == 0 || request.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    threads *= request.block[i];
  }
  if (threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* stream = nullptr;
  if (CUresult r = ResolveStream(request.stream, request.per_thread, &stream); r != CUDA_SUCCESS) {
    return r;
  }
  if (auto r = CaptureLaunch(request, stream)) return *r;
  HangIfNamed(request.function, stream);  // GWSIM_HANG_KERNEL
  NoteLaunchFault(stream->ctx, request.function->name.c_str());
  const uint64_t duration = D().config.kernel_ns;
  const uint64_t start = Advance(duration);
  CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (!ActivityWanted(kind)) {
    kind = CUPTI_ACTIVITY_KIND_KERNEL;
    if (!ActivityWanted(kind)) return CUDA_SUCCESS;
  }
  CUpti_ActivityKernel10 k{};
  k.kind = kind;
  k.registersPerThread = 32;
  k.start = start;
  k.end = start + duration;
  k.completed = k.end;
  k.deviceId = static_cast<uint32_t>(stream->ctx->device);
  k.contextId = ContextId(stream->ctx);
  k.streamId = stream->id;
  k.gridX = static_cast<int32_t>(request.grid[0]);
  k.gridY = static_cast<int32_t>(request.grid[1]);
  k.gridZ = static_cast<int32_t>(request.grid[2]);
  k.blockX = static_cast<int32_t>(request.block[0]);
  k.blockY = static_cast<int32_t>(request.block[1]);
  k.blockZ = static_cast<int32_t>(request.block[2]);
  k.dynamicSharedMemory = static_cast<int32_t>(request.shared_mem);
  k.correlationId = RecordCorrelationId();
  k.gridId = D().next_grid_id.fetch_add(1);
  k.name = request.function->name.c_str();
  k.queued = CUPTI_TIMESTAMP_UNKNOWN;
  k.submitted = CUPTI_TIMESTAMP_UNKNOWN;
  k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
  const GraphNodeScope graph = CurrentGraphNode();
  k.graphNodeId = graph.node_id;
  k.graphId = graph.graph_id;
  EmitActivity(&k, sizeof(k));
  return CUDA_SUCCESS;
}

CUresult EventCreate(CUevent* event, unsigned flags) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st();
  e->ctx = ctx;
  e->flags = flags;
  Driver& d = D();
  std::lock_guard lock(d.mu);
  d.events.insert(e);
  *event = e;
  return CUDA_SUCCESS;
}

CUresult EventRecord(CUevent event, CUstream stream, bool per_thread) {
  CUstream_st* resolved = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &resolved); r != CUDA_SUCCESS) return r;
  if (!ValidEvent(event)) return CUDA_ERROR_INVALID_HANDLE;
  if (auto r = CaptureEventRecord(event, resolved)) return *r;
  RecordEventHang(event, resolved);  // never fires behind a kernel that never ends
  // All earlier work has already completed in the simulator, so "now" is when the event fires.
  event->time_ns.store(Now(), std::memory_order_relaxed);
  event->recorded.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult EventElapsed(float* ms, CUevent start, CUevent end) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidEvent(start) || !ValidEvent(end)) return CUDA_ERROR_INVALID_HANDLE;
  for (CUevent e : {start, end}) {
    if (auto r = CaptureEventUse(e)) return *r;
  }
  if (((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) != 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!start->recorded.load(std::memory_order_acquire) ||
      !end->recorded.load(std::memory_order_acquire)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const double ns =
      static_cast<double>(end->time_ns.load()) - static_cast<double>(start->time_ns.load());
  *ms = static_cast<float>(ns / 1e6);
  return CUDA_SUCCESS;
}

CUresult EventDestroy(CUevent event) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.mu);
  if (d.events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  d.retired.push_back(event);  // kept: see Driver::retired
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
