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

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpy), cuMemcpy_params{dst, src, ByteCount}, [&] {
    return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, nullptr, false, false);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpy_ptds), cuMemcpy_ptds_params{dst, src, ByteCount}, [&] {
    return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, nullptr, true, false);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                            CUstream hStream) {
  return TraceDriver(
      GWSIM_DRV(cuMemcpyAsync), cuMemcpyAsync_params{dst, src, ByteCount, hStream}, [&] {
        return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, hStream, false, true);
      });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                                 CUstream hStream) {
  return TraceDriver(
      GWSIM_DRV(cuMemcpyAsync_ptsz), cuMemcpyAsync_ptsz_params{dst, src, ByteCount, hStream},
      [&] { return CopyLinear(dst, src, ByteCount, Side::kAny, Side::kAny, hStream, true, true); });
}

// Directed copies: the device side must be device memory.

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost,
                                              size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyHtoD_v2),
                     cuMemcpyHtoD_v2_params{dstDevice, srcHost, ByteCount}, [&] {
                       return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                         Side::kAny, nullptr, false, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                                   size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyHtoD_v2_ptds),
                     cuMemcpyHtoD_v2_ptds_params{dstDevice, srcHost, ByteCount}, [&] {
                       return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                         Side::kAny, nullptr, true, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice,
                                              size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoH_v2),
                     cuMemcpyDtoH_v2_params{dstHost, srcDevice, ByteCount}, [&] {
                       return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                         Side::kDevice, nullptr, false, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice,
                                                   size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoH_v2_ptds),
                     cuMemcpyDtoH_v2_ptds_params{dstHost, srcDevice, ByteCount}, [&] {
                       return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                         Side::kDevice, nullptr, true, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                              size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoD_v2),
                     cuMemcpyDtoD_v2_params{dstDevice, srcDevice, ByteCount}, [&] {
                       return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                         Side::kDevice, nullptr, false, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                   size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoD_v2_ptds),
                     cuMemcpyDtoD_v2_ptds_params{dstDevice, srcDevice, ByteCount}, [&] {
                       return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                         Side::kDevice, nullptr, true, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost,
                                                   size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyHtoDAsync_v2),
                     cuMemcpyHtoDAsync_v2_params{dstDevice, srcHost, ByteCount, hStream}, [&] {
                       return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                         Side::kAny, hStream, false, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost,
                                                        size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyHtoDAsync_v2_ptsz),
                     cuMemcpyHtoDAsync_v2_ptsz_params{dstDevice, srcHost, ByteCount, hStream}, [&] {
                       return CopyLinear(dstDevice, Addr(srcHost), ByteCount, Side::kDevice,
                                         Side::kAny, hStream, true, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice,
                                                   size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoHAsync_v2),
                     cuMemcpyDtoHAsync_v2_params{dstHost, srcDevice, ByteCount, hStream}, [&] {
                       return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                         Side::kDevice, hStream, false, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice,
                                                        size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoHAsync_v2_ptsz),
                     cuMemcpyDtoHAsync_v2_ptsz_params{dstHost, srcDevice, ByteCount, hStream}, [&] {
                       return CopyLinear(Addr(dstHost), srcDevice, ByteCount, Side::kAny,
                                         Side::kDevice, hStream, true, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                   size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoDAsync_v2),
                     cuMemcpyDtoDAsync_v2_params{dstDevice, srcDevice, ByteCount, hStream}, [&] {
                       return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                         Side::kDevice, hStream, false, true);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice,
                                                        CUdeviceptr srcDevice, size_t ByteCount,
                                                        CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyDtoDAsync_v2_ptsz),
                     cuMemcpyDtoDAsync_v2_ptsz_params{dstDevice, srcDevice, ByteCount, hStream},
                     [&] {
                       return CopyLinear(dstDevice, srcDevice, ByteCount, Side::kDevice,
                                         Side::kDevice, hStream, true, true);
                     });
}

// Peer copies

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                                           CUdeviceptr srcDevice, CUcontext srcContext,
                                           size_t ByteCount) {
  return TraceDriver(GWSIM_DRV(cuMemcpyPeer),
                     cuMemcpyPeer_params{dstDevice, dstContext, srcDevice, srcContext, ByteCount},
                     [&] {
                       return CopyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                                       nullptr, false, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
                                                CUdeviceptr srcDevice, CUcontext srcContext,
                                                size_t ByteCount) {
  return TraceDriver(
      GWSIM_DRV(cuMemcpyPeer_ptds),
      cuMemcpyPeer_ptds_params{dstDevice, dstContext, srcDevice, srcContext, ByteCount}, [&] {
        return CopyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, nullptr, true,
                        false);
      });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                                CUdeviceptr srcDevice, CUcontext srcContext,
                                                size_t ByteCount, CUstream hStream) {
  return TraceDriver(
      GWSIM_DRV(cuMemcpyPeerAsync),
      cuMemcpyPeerAsync_params{dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream},
      [&] {
        return CopyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, false,
                        true);
      });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
                                                     CUdeviceptr srcDevice, CUcontext srcContext,
                                                     size_t ByteCount, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyPeerAsync_ptsz),
                     cuMemcpyPeerAsync_ptsz_params{dstDevice, dstContext, srcDevice, srcContext,
                                                   ByteCount, hStream},
                     [&] {
                       return CopyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                                       hStream, true, true);
                     });
}

// 2D and 3D copies

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2D_v2), cuMemcpy2D_v2_params{pCopy},
                     [&] { return CopyDescriptor2D(pCopy, nullptr, false, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2D_v2_ptds), cuMemcpy2D_v2_ptds_params{pCopy},
                     [&] { return CopyDescriptor2D(pCopy, nullptr, true, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2DUnaligned_v2), cuMemcpy2DUnaligned_v2_params{pCopy},
                     [&] { return CopyDescriptor2D(pCopy, nullptr, false, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2DAsync_v2), cuMemcpy2DAsync_v2_params{pCopy, hStream},
                     [&] { return CopyDescriptor2D(pCopy, hStream, false, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* pCopy,
                                                      CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2DAsync_v2_ptsz),
                     cuMemcpy2DAsync_v2_ptsz_params{pCopy, hStream},
                     [&] { return CopyDescriptor2D(pCopy, hStream, true, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy3D_v2), cuMemcpy3D_v2_params{pCopy},
                     [&] { return CopyDescriptor3D(pCopy, nullptr, false, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy3D_v2_ptds), cuMemcpy3D_v2_ptds_params{pCopy},
                     [&] { return CopyDescriptor3D(pCopy, nullptr, true, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* pCopy, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpy3DAsync_v2), cuMemcpy3DAsync_v2_params{pCopy, hStream},
                     [&] { return CopyDescriptor3D(pCopy, hStream, false, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* pCopy,
                                                      CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpy3DAsync_v2_ptsz),
                     cuMemcpy3DAsync_v2_ptsz_params{pCopy, hStream},
                     [&] { return CopyDescriptor3D(pCopy, hStream, true, true); });
}

// Batched copies (attributes are accepted and ignored).

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                    size_t* sizes, size_t count,
                                                    CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                    size_t numAttrs, CUstream hStream) {
  return TraceDriver(
      GWSIM_DRV(cuMemcpyBatchAsync_v2),
      cuMemcpyBatchAsync_v2_params{dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream},
      [&] { return CopyBatch(dsts, srcs, sizes, count, numAttrs, hStream, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                         size_t* sizes, size_t count,
                                                         CUmemcpyAttributes* attrs,
                                                         size_t* attrsIdxs, size_t numAttrs,
                                                         CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemcpyBatchAsync_v2_ptsz),
                     cuMemcpyBatchAsync_v2_ptsz_params{dsts, srcs, sizes, count, attrs, attrsIdxs,
                                                       numAttrs, hStream},
                     [&] { return CopyBatch(dsts, srcs, sizes, count, numAttrs, hStream, true); });
}

// Memset

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD8_v2), cuMemsetD8_v2_params{dstDevice, uc, N},
                     [&] { return Memset(dstDevice, uc, 1, N, 1, 0, nullptr, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc,
                                                 size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD8_v2_ptds), cuMemsetD8_v2_ptds_params{dstDevice, uc, N},
                     [&] { return Memset(dstDevice, uc, 1, N, 1, 0, nullptr, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD16_v2), cuMemsetD16_v2_params{dstDevice, us, N},
                     [&] { return Memset(dstDevice, us, 2, N, 1, 0, nullptr, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return TraceDriver(GWSIM_DRV(cuMemsetD32_v2), cuMemsetD32_v2_params{dstDevice, ui, N},
                     [&] { return Memset(dstDevice, ui, 4, N, 1, 0, nullptr, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                              CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemsetD8Async), cuMemsetD8Async_params{dstDevice, uc, N, hStream},
                     [&] { return Memset(dstDevice, uc, 1, N, 1, 0, hStream, false); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc,
                                                   size_t N, CUstream hStream) {
  return TraceDriver(GWSIM_DRV(cuMemsetD8Async_ptsz),
                     cuMemsetD8Async_ptsz_params{dstDevice, uc, N, hStream},
                     [&] { return Memset(dstDevice, uc, 1, N, 1, 0, hStream, true); });
}

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
