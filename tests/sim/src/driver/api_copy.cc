// Exported driver API: copies and memsets.
#include "driver/cuda_headers.h"
#include "driver/state.h"
#include "driver/trace.h"
#include "driver/work.h"

namespace gwsim::drv {
namespace {

CUresult CopyLinear(CUdeviceptr dst, CUdeviceptr src, size_t bytes, Side dst_side, Side src_side,
                    CUstream stream, bool per_thread, bool async) {
  CopyRequest r = Linear(dst, src, bytes);
  r.dst_side = dst_side;
  r.src_side = src_side;
  r.stream = stream;
  r.per_thread = per_thread;
  r.async = async;
  return Copy(r);
}

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

CUresult CopyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                  size_t bytes, CUstream stream, bool per_thread, bool async) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  for (CUcontext c : {dst_ctx, src_ctx}) {
    if (c == nullptr || !ValidContext(c) || !c->active.load()) return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CopyLinear(dst, src, bytes, Side::kDevice, Side::kDevice, stream, per_thread, async);
}

CUresult CopyBatch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                   size_t num_attrs, CUstream stream, bool per_thread) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr || num_attrs == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = CopyLinear(dsts[i], srcs[i], sizes[i], Side::kAny, Side::kAny, stream,
                                per_thread, true);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Unified copies: the direction comes from what the simulator knows of each pointer.

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy, cuMemcpy_ptds,
                           (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
                           (dst, src, ByteCount), {
                             return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, nullptr,
                                               per_thread, false);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyAsync, cuMemcpyAsync_ptsz,
                           (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
                           (dst, src, ByteCount, hStream), {
                             return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, hStream,
                                               per_thread, true);
                           })

// Directed copies: the device side must be device memory.

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds,
                           (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount),
                           (dstDevice, srcHost, ByteCount), {
                             return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                               Side::kAny, nullptr, per_thread, false);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds,
                           (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount),
                           (dstHost, srcDevice, ByteCount), {
                             return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                               Side::kDevice, nullptr, per_thread, false);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds,
                           (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
                           (dstDevice, srcDevice, ByteCount), {
                             return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                               Side::kDevice, nullptr, per_thread, false);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz,
                           (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                            CUstream hStream),
                           (dstDevice, srcHost, ByteCount, hStream), {
                             return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                               Side::kAny, hStream, per_thread, true);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz,
                           (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                            CUstream hStream),
                           (dstHost, srcDevice, ByteCount, hStream), {
                             return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                               Side::kDevice, hStream, per_thread, true);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz,
                           (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                            CUstream hStream),
                           (dstDevice, srcDevice, ByteCount, hStream), {
                             return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                               Side::kDevice, hStream, per_thread, true);
                           })

// Peer copies

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyPeer, cuMemcpyPeer_ptds,
                           (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                            CUcontext srcContext, size_t ByteCount),
                           (dstDevice, dstContext, srcDevice, srcContext, ByteCount), {
                             return CopyPeer(dstDevice, dstContext, srcDevice, srcContext,
                                             ByteCount, nullptr, per_thread, false);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
                           (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                            CUcontext srcContext, size_t ByteCount, CUstream hStream),
                           (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), {
                             return CopyPeer(dstDevice, dstContext, srcDevice, srcContext,
                                             ByteCount, hStream, per_thread, true);
                           })

// 2D and 3D copies

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D* pCopy), (pCopy),
                           { return CopyDescriptor2D(pCopy, nullptr, per_thread, false); })

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2DUnaligned_v2), cuMemcpy2DUnaligned_v2_params{pCopy},
                     [&] { return CopyDescriptor2D(pCopy, nullptr, false, false); });
}

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz,
                           (const CUDA_MEMCPY2D* pCopy, CUstream hStream), (pCopy, hStream),
                           { return CopyDescriptor2D(pCopy, hStream, per_thread, true); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D* pCopy), (pCopy),
                           { return CopyDescriptor3D(pCopy, nullptr, per_thread, false); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz,
                           (const CUDA_MEMCPY3D* pCopy, CUstream hStream), (pCopy, hStream),
                           { return CopyDescriptor3D(pCopy, hStream, per_thread, true); })

// Batched copies (attributes are accepted and ignored).

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz,
                           (CUdeviceptr * dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                            CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                            CUstream hStream),
                           (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream), {
                             return CopyBatch(dsts, srcs, sizes, count, numAttrs, hStream,
                                              per_thread);
                           })

// Memset

GWSIM_DRV_PER_THREAD_TWINS(cuMemsetD8_v2, cuMemsetD8_v2_ptds,
                           (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N),
                           { return Memset(dstDevice, uc, 1, N, 1, 0, nullptr, per_thread); })

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD16_v2), cuMemsetD16_v2_params{dstDevice, us, N},
                     [&] { return Memset(dstDevice, us, 2, N, 1, 0, nullptr, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD32_v2), cuMemsetD32_v2_params{dstDevice, ui, N},
                     [&] { return Memset(dstDevice, ui, 4, N, 1, 0, nullptr, false); });
}

GWSIM_DRV_PER_THREAD_TWINS(cuMemsetD8Async, cuMemsetD8Async_ptsz,
                           (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream),
                           (dstDevice, uc, N, hStream),
                           { return Memset(dstDevice, uc, 1, N, 1, 0, hStream, per_thread); })

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                               CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemsetD16Async),
                     cuMemsetD16Async_params{dstDevice, us, N, hStream},
                     [&] { return Memset(dstDevice, us, 2, N, 1, 0, hStream, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                               CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemsetD32Async),
                     cuMemsetD32Async_params{dstDevice, ui, N, hStream},
                     [&] { return Memset(dstDevice, ui, 4, N, 1, 0, hStream, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch,
                                              unsigned char uc, size_t Width, size_t Height) {
  return TraceDriver(
      GWSIM_DRV(cuMemsetD2D8_v2), cuMemsetD2D8_v2_params{dstDevice, dstPitch, uc, Width, Height},
      [&] { return Memset(dstDevice, uc, 1, Width, Height, dstPitch, nullptr, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch,
                                                unsigned char uc, size_t Width, size_t Height,
                                                CUstream hStream) {
  return TraceDriver(
      GWSIM_DRV(cuMemsetD2D8Async),
      cuMemsetD2D8Async_params{dstDevice, dstPitch, uc, Width, Height, hStream},
      [&] { return Memset(dstDevice, uc, 1, Width, Height, dstPitch, hStream, false); });
}

// cuStreamWriteValue32 (PyTorch resolves it): a stream-ordered 32-bit store to device memory,
// as a memset of one element; the address must be 4-byte aligned, the flags 0 or
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER.
GWSIM_DRV_PER_THREAD_TWINS(
    cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz,
    (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),
    (stream, addr, value, flags), {
      if (addr % 4 != 0 || (flags & ~unsigned{CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER}) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      return Memset(addr, value, 4, 1, 1, 0, stream, per_thread);
    })
