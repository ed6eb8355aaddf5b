// Exported runtime API: copies and memsets. The cudaMemcpyKind picks the nested driver call:
// HostToDevice -> cuMemcpyHtoD*, DeviceToHost -> cuMemcpyDtoH*, DeviceToDevice ->
// cuMemcpyDtoD*, HostToHost and Default -> cuMemcpy* (direction inferred from the pointers).
#include <vector>

#include "runtime/array.h"
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

cudaError_t Memcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, bool async,
                   cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  CUresult r;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      r = SyncOrAsync(async, per_thread, stream, d.cuMemcpyHtoD_v2, d.cuMemcpyHtoD_v2_ptds,
                      d.cuMemcpyHtoDAsync_v2, d.cuMemcpyHtoDAsync_v2_ptsz, Dev(dst), src, count);
      break;
    case cudaMemcpyDeviceToHost:
      r = SyncOrAsync(async, per_thread, stream, d.cuMemcpyDtoH_v2, d.cuMemcpyDtoH_v2_ptds,
                      d.cuMemcpyDtoHAsync_v2, d.cuMemcpyDtoHAsync_v2_ptsz, dst, Dev(src), count);
      break;
    case cudaMemcpyDeviceToDevice:
      r = SyncOrAsync(async, per_thread, stream, d.cuMemcpyDtoD_v2, d.cuMemcpyDtoD_v2_ptds,
                      d.cuMemcpyDtoDAsync_v2, d.cuMemcpyDtoDAsync_v2_ptsz, Dev(dst), Dev(src),
                      count);
      break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
      r = SyncOrAsync(async, per_thread, stream, d.cuMemcpy, d.cuMemcpy_ptds, d.cuMemcpyAsync,
                      d.cuMemcpyAsync_ptsz, Dev(dst), Dev(src), count);
      break;
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
  return ToCudaError(r);
}

void SetSide(CUmemorytype type, const void* p, CUmemorytype* out_type, const void** host,
             CUdeviceptr* device) {
  *out_type = type;
  if (type == CU_MEMORYTYPE_HOST) {
    *host = p;
  } else {
    *device = Dev(p);
  }
}

cudaError_t Memcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height, cudaMemcpyKind kind, bool async, cudaStream_t stream,
                     bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUmemorytype src_type;
  CUmemorytype dst_type;
  if (!MemoryTypes(kind, &src_type, &dst_type)) return cudaErrorInvalidMemcpyDirection;
  if ((height > 1 && (dpitch < width || spitch < width))) return cudaErrorInvalidPitchValue;
  CUDA_MEMCPY2D c{};
  SetSide(src_type, src, &c.srcMemoryType, &c.srcHost, &c.srcDevice);
  const void* dst_host = nullptr;
  SetSide(dst_type, dst, &c.dstMemoryType, &dst_host, &c.dstDevice);
  c.dstHost = const_cast<void*>(dst_host);
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  const DriverApi& d = Drv();
  return ToCudaError(SyncOrAsync(async, per_thread, stream, d.cuMemcpy2D_v2, d.cuMemcpy2D_v2_ptds,
                                 d.cuMemcpy2DAsync_v2, d.cuMemcpy2DAsync_v2_ptsz, &c));
}

cudaError_t Memcpy3D(const cudaMemcpy3DParms* p, bool async, cudaStream_t stream, bool per_thread) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUDA_MEMCPY3D c{};
  if (cudaError_t e = ToDriver3D(p, &c); e != cudaSuccess) return e;  // arrays included
  const DriverApi& d = Drv();
  return ToCudaError(SyncOrAsync(async, per_thread, stream, d.cuMemcpy3D_v2, d.cuMemcpy3D_v2_ptds,
                                 d.cuMemcpy3DAsync_v2, d.cuMemcpy3DAsync_v2_ptsz, &c));
}

cudaError_t MemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count,
                       bool async, cudaStream_t stream) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUcontext dst_ctx = nullptr;
  CUcontext src_ctx = nullptr;
  if (cudaError_t e = EnsurePrimary(dst_device, &dst_ctx); e != cudaSuccess) return e;
  if (cudaError_t e = EnsurePrimary(src_device, &src_ctx); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  const CUresult r = !async
                         ? d.cuMemcpyPeer(Dev(dst), dst_ctx, Dev(src), src_ctx, count)
                         : d.cuMemcpyPeerAsync(Dev(dst), dst_ctx, Dev(src), src_ctx, count, stream);
  return ToCudaError(r);
}

// The address `offset` bytes into the __device__ variable `symbol` for a copy of `count` bytes
// of `kind`: `host_kind` (to or from the host), DeviceToDevice or Default.
cudaError_t SymbolAddress(const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                          cudaMemcpyKind host_kind, CUdeviceptr* out) {
  CUdeviceptr base = 0;
  size_t size = 0;
  if (cudaError_t e = VariableAddress(symbol, &base, &size); e != cudaSuccess) return e;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  if (kind != host_kind && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  *out = base + offset;
  return cudaSuccess;
}

cudaError_t ToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                     cudaMemcpyKind kind, bool async, cudaStream_t stream, bool per_thread) {
  CUdeviceptr at = 0;
  if (cudaError_t e = SymbolAddress(symbol, count, offset, kind, cudaMemcpyHostToDevice, &at);
      e != cudaSuccess) {
    return e;
  }
  return Memcpy(reinterpret_cast<void*>(at), src, count, kind, async, stream, per_thread);
}

cudaError_t FromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                       cudaMemcpyKind kind, bool async, cudaStream_t stream, bool per_thread) {
  CUdeviceptr at = 0;
  if (cudaError_t e = SymbolAddress(symbol, count, offset, kind, cudaMemcpyDeviceToHost, &at);
      e != cudaSuccess) {
    return e;
  }
  return Memcpy(dst, reinterpret_cast<const void*>(at), count, kind, async, stream, per_thread);
}

cudaError_t MemcpyBatch(void* const* dsts, const void* const* srcs, const size_t* sizes,
                        size_t count, cudaMemcpyAttributes* attrs, size_t* attrs_idxs,
                        size_t num_attrs, cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  if (dsts == nullptr || srcs == nullptr || sizes == nullptr) return cudaErrorInvalidValue;
  std::vector<CUdeviceptr> d(count);
  std::vector<CUdeviceptr> s(count);
  std::vector<size_t> n(sizes, sizes + count);
  for (size_t i = 0; i < count; ++i) {
    d[i] = Dev(dsts[i]);
    s[i] = Dev(srcs[i]);
  }
  const DriverApi& drv = Drv();
  // cudaMemcpyAttributes and CUmemcpyAttributes share their layout; the simulator ignores them.
  auto* cu_attrs = reinterpret_cast<CUmemcpyAttributes*>(attrs);
  const CUresult r = (per_thread ? drv.cuMemcpyBatchAsync_v2_ptsz : drv.cuMemcpyBatchAsync_v2)(
      d.data(), s.data(), n.data(), count, cu_attrs, attrs_idxs, num_attrs, stream);
  return ToCudaError(r);
}

cudaError_t Memset(void* ptr, int value, size_t count, bool async, cudaStream_t stream,
                   bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  const auto byte = static_cast<unsigned char>(value);
  return ToCudaError(SyncOrAsync(async, per_thread, stream, d.cuMemsetD8_v2, d.cuMemsetD8_v2_ptds,
                                 d.cuMemsetD8Async, d.cuMemsetD8Async_ptsz, Dev(ptr), byte, count));
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy, v3020, cudaMemcpy_ptds, v7000,
                          (void* dst, const void* src, size_t count, enum cudaMemcpyKind kind),
                          (dst, src, count, kind),
                          { return Memcpy(dst, src, count, kind, false, nullptr, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyAsync, v3020, cudaMemcpyAsync_ptsz, v7000,
                          (void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                           cudaStream_t stream),
                          (dst, src, count, kind, stream),
                          { return Memcpy(dst, src, count, kind, true, stream, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2D, v3020, cudaMemcpy2D_ptds, v7000,
                          (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind),
                          (dst, dpitch, src, spitch, width, height, kind), {
                            return Memcpy2D(dst, dpitch, src, spitch, width, height, kind, false,
                                            nullptr, per_thread);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2DAsync, v3020, cudaMemcpy2DAsync_ptsz, v7000,
                          (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind, cudaStream_t stream),
                          (dst, dpitch, src, spitch, width, height, kind, stream), {
                            return Memcpy2D(dst, dpitch, src, spitch, width, height, kind, true,
                                            stream, per_thread);
                          })

GWSIM_RT_COPY_3D(cudaMemcpy3D, cudaMemcpy3DAsync, v3020, cudaMemcpy3DParms, Memcpy3D)

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeer(void* dst, int dstDevice, const void* src,
                                                  int srcDevice, size_t count) {
  return TraceRuntime(
      GWSIM_RT(cudaMemcpyPeer, v4000),
      GWSIM_RT_PARAMS(cudaMemcpyPeer, v4000){dst, dstDevice, src, srcDevice, count},
      [&] { return MemcpyPeer(dst, dstDevice, src, srcDevice, count, false, nullptr); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src,
                                                       int srcDevice, size_t count,
                                                       cudaStream_t stream) {
  return TraceRuntime(
      GWSIM_RT(cudaMemcpyPeerAsync, v4000),
      GWSIM_RT_PARAMS(cudaMemcpyPeerAsync, v4000){dst, dstDevice, src, srcDevice, count, stream},
      [&] { return MemcpyPeer(dst, dstDevice, src, srcDevice, count, true, stream); });
}

GWSIM_RT_PER_THREAD_TWINS(
    cudaMemcpyToSymbol, v3020, cudaMemcpyToSymbol_ptds, v7000,
    (const void* symbol, const void* src, size_t count, size_t offset, enum cudaMemcpyKind kind),
    (symbol, src, count, offset, kind),
    { return ToSymbol(symbol, src, count, offset, kind, false, nullptr, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(
    cudaMemcpyFromSymbol, v3020, cudaMemcpyFromSymbol_ptds, v7000,
    (void* dst, const void* symbol, size_t count, size_t offset, enum cudaMemcpyKind kind),
    (dst, symbol, count, offset, kind),
    { return FromSymbol(dst, symbol, count, offset, kind, false, nullptr, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyToSymbolAsync, v3020, cudaMemcpyToSymbolAsync_ptsz, v7000,
                          (const void* symbol, const void* src, size_t count, size_t offset,
                           enum cudaMemcpyKind kind, cudaStream_t stream),
                          (symbol, src, count, offset, kind, stream), {
                            return ToSymbol(symbol, src, count, offset, kind, true, stream,
                                            per_thread);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyFromSymbolAsync, v3020, cudaMemcpyFromSymbolAsync_ptsz, v7000,
                          (void* dst, const void* symbol, size_t count, size_t offset,
                           enum cudaMemcpyKind kind, cudaStream_t stream),
                          (dst, symbol, count, offset, kind, stream), {
                            return FromSymbol(dst, symbol, count, offset, kind, true, stream,
                                              per_thread);
                          })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  return TraceRuntime(GWSIM_RT(cudaGetSymbolAddress, v3020),
                      GWSIM_RT_PARAMS(cudaGetSymbolAddress, v3020){devPtr, symbol}, [&] {
                        if (devPtr == nullptr) return cudaErrorInvalidValue;
                        CUdeviceptr base = 0;
                        size_t size = 0;
                        const cudaError_t e = VariableAddress(symbol, &base, &size);
                        if (e == cudaSuccess) *devPtr = reinterpret_cast<void*>(base);
                        return e;
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetSymbolSize(size_t* size, const void* symbol) {
  return TraceRuntime(GWSIM_RT(cudaGetSymbolSize, v3020),
                      GWSIM_RT_PARAMS(cudaGetSymbolSize, v3020){size, symbol}, [&] {
                        if (size == nullptr) return cudaErrorInvalidValue;
                        CUdeviceptr base = 0;
                        return VariableAddress(symbol, &base, size);
                      });
}

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyBatchAsync, v13000, cudaMemcpyBatchAsync_ptsz, v13000,
                          (void* const* dsts, const void* const* srcs, const size_t* sizes,
                           size_t count, struct cudaMemcpyAttributes* attrs, size_t* attrsIdxs,
                           size_t numAttrs, cudaStream_t stream),
                          (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream), {
                            return MemcpyBatch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs,
                                               stream, per_thread);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemset, v3020, cudaMemset_ptds, v7000,
                          (void* devPtr, int value, size_t count), (devPtr, value, count),
                          { return Memset(devPtr, value, count, false, nullptr, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaMemsetAsync, v3020, cudaMemsetAsync_ptsz, v7000,
                          (void* devPtr, int value, size_t count, cudaStream_t stream),
                          (devPtr, value, count, stream),
                          { return Memset(devPtr, value, count, true, stream, per_thread); })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width,
                                                size_t height) {
  return TraceRuntime(GWSIM_RT(cudaMemset2D, v3020),
                      GWSIM_RT_PARAMS(cudaMemset2D, v3020){devPtr, pitch, value, width, height},
                      [&] {
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        return ToCudaError(Drv().cuMemsetD2D8_v2(
                            Dev(devPtr), pitch, static_cast<unsigned char>(value), width, height));
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemset2DAsync(void* devPtr, size_t pitch, int value,
                                                     size_t width, size_t height,
                                                     cudaStream_t stream) {
  return TraceRuntime(
      GWSIM_RT(cudaMemset2DAsync, v3020),
      GWSIM_RT_PARAMS(cudaMemset2DAsync, v3020){devPtr, pitch, value, width, height, stream}, [&] {
        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
        return ToCudaError(Drv().cuMemsetD2D8Async(
            Dev(devPtr), pitch, static_cast<unsigned char>(value), width, height, stream));
      });
}
