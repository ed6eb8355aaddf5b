// Exported driver API: CUDA arrays, mipmapped arrays, copies to and from arrays, and the 2D/3D
// copy entry points not in api_copy.cc (cuMemcpy2DUnaligned_v2_ptds, cuMemcpy3DPeer*).
#include "common/memcpy3d.h"
#include "driver/array.h"
#include "driver/cuda_headers.h"
#include "driver/state.h"
#include "driver/trace.h"
#include "driver/work.h"

namespace gwsim::drv {
namespace {

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// A byte range of a 1D CUDA array: the copies cuMemcpy{HtoA,AtoH,AtoD,DtoA,AtoA} take are
// documented for 1D arrays, with offsets and sizes in bytes; the simulator wants whole elements.
CUresult ArrayRange(CUarray array, size_t offset, size_t count, uintptr_t* out,
                    size_t* element_size) {
  ArrayView v;
  if (CUresult r = ViewArray(array, &v); r != CUDA_SUCCESS) return r;
  if (!v.one_dimensional || offset % v.element_size != 0 || count % v.element_size != 0 ||
      offset > v.row_bytes || count > v.row_bytes - offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = v.storage + offset;
  *element_size = v.element_size;
  return CUDA_SUCCESS;
}

struct ArraySide {
  CUarray array = nullptr;  // null: `address` is a pointer
  size_t offset = 0;
  uintptr_t address = 0;
  Side side = Side::kAny;
};

ArraySide OfArray(CUarray array, size_t offset) { return ArraySide{array, offset, 0, Side::kAny}; }
ArraySide OfPointer(uintptr_t p, Side side) { return ArraySide{nullptr, 0, p, side}; }
ArraySide OfHost(const void* p) { return OfPointer(Addr(p), Side::kAny); }
ArraySide OfDevice(CUdeviceptr p) { return OfPointer(p, Side::kDevice); }

CUresult CopyWithArray(ArraySide dst, ArraySide src, size_t bytes, CUstream stream, bool per_thread,
                       bool async) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  size_t dst_element = 0;
  size_t src_element = 0;
  for (auto [side, element] : {std::pair{&dst, &dst_element}, std::pair{&src, &src_element}}) {
    if (side->array == nullptr) continue;
    if (CUresult r = ArrayRange(side->array, side->offset, bytes, &side->address, element);
        r != CUDA_SUCCESS) {
      return r;
    }
    side->side = Side::kDevice;
  }
  // "the elements must be the same size"
  if (dst_element != 0 && src_element != 0 && dst_element != src_element) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CopyRequest r = Linear(dst.address, src.address, bytes);
  r.dst_side = dst.side;
  r.src_side = src.side;
  r.stream = stream;
  r.per_thread = per_thread;
  r.async = async;
  return Copy(r);
}

// CopyWithArray on the legacy stream (with per_thread, the calling thread's), or asynchronously
// on `stream`.
CUresult CopySync(ArraySide dst, ArraySide src, size_t bytes, bool per_thread) {
  return CopyWithArray(dst, src, bytes, nullptr, per_thread, false);
}

CUresult CopyAsync(ArraySide dst, ArraySide src, size_t bytes, CUstream stream, bool per_thread) {
  return CopyWithArray(dst, src, bytes, stream, per_thread, true);
}

// cuMemcpy3DPeer: the contexts of the pointer sides must be live; the copy is then a 3D copy.
CUresult CopyPeer3D(const CUDA_MEMCPY3D_PEER* p, CUstream stream, bool per_thread, bool async) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::pair<CUmemorytype, CUcontext> sides[] = {{p->srcMemoryType, p->srcContext},
                                                      {p->dstMemoryType, p->dstContext}};
  for (const auto& [type, ctx] : sides) {
    if (type == CU_MEMORYTYPE_ARRAY) continue;  // the context is ignored for arrays
    if (ctx == nullptr || !ValidContext(ctx) || !ctx->active.load()) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
  }
  CUDA_MEMCPY3D c{};  // the contexts were checked above; reserved0 and reserved1 stay NULL
  CopySharedMemcpy3DMembers(*p, &c);
  return CopyDescriptor3D(&c, stream, per_thread, async);
}

CUresult Create2D(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (desc == nullptr) {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = desc->Width;
  d.Height = desc->Height;
  d.Format = desc->Format;
  d.NumChannels = desc->NumChannels;
  return ArrayCreate(handle, &d);
}

CUresult Descriptor2D(CUDA_ARRAY_DESCRIPTOR* out, CUarray array) {
  if (out == nullptr) {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUDA_ARRAY3D_DESCRIPTOR d{};
  if (CUresult r = ArrayDescriptor(array, &d); r != CUDA_SUCCESS) return r;
  if (d.Depth != 0) return CUDA_ERROR_INVALID_VALUE;  // "a 1D or 2D CUDA array descriptor"
  out->Width = d.Width;
  out->Height = d.Height;
  out->Format = d.Format;
  out->NumChannels = d.NumChannels;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Arrays

GWSIM_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle,
                                               const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  return TraceDriver(GWSIM_DRV(cuArrayCreate_v2), cuArrayCreate_v2_params{pHandle, pAllocateArray},
                     [&] { return Create2D(pHandle, pAllocateArray); });
}

GWSIM_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle,
                                                 const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  return TraceDriver(GWSIM_DRV(cuArray3DCreate_v2),
                     cuArray3DCreate_v2_params{pHandle, pAllocateArray},
                     [&] { return ArrayCreate(pHandle, pAllocateArray); });
}

GWSIM_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  return TraceDriver(GWSIM_DRV(cuArrayDestroy), cuArrayDestroy_params{hArray},
                     [&] { return ArrayDestroy(hArray); });
}

GWSIM_EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor,
                                                      CUarray hArray) {
  return TraceDriver(GWSIM_DRV(cuArrayGetDescriptor_v2),
                     cuArrayGetDescriptor_v2_params{pArrayDescriptor, hArray},
                     [&] { return Descriptor2D(pArrayDescriptor, hArray); });
}

GWSIM_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor,
                                                        CUarray hArray) {
  return TraceDriver(GWSIM_DRV(cuArray3DGetDescriptor_v2),
                     cuArray3DGetDescriptor_v2_params{pArrayDescriptor, hArray},
                     [&] { return ArrayDescriptor(hArray, pArrayDescriptor); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(
    CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
    unsigned int numMipmapLevels) {
  return TraceDriver(
      GWSIM_DRV(cuMipmappedArrayCreate),
      cuMipmappedArrayCreate_params{pHandle, pMipmappedArrayDesc, numMipmapLevels},
      [&] { return MipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray* pLevelArray,
                                                       CUmipmappedArray hMipmappedArray,
                                                       unsigned int level) {
  return TraceDriver(GWSIM_DRV(cuMipmappedArrayGetLevel),
                     cuMipmappedArrayGetLevel_params{pLevelArray, hMipmappedArray, level},
                     [&] { return MipmappedArrayLevel(pLevelArray, hMipmappedArray, level); });
}

GWSIM_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return TraceDriver(GWSIM_DRV(cuMipmappedArrayDestroy),
                     cuMipmappedArrayDestroy_params{hMipmappedArray},
                     [&] { return MipmappedArrayDestroy(hMipmappedArray); });
}

// Copies between 1D arrays and memory (offsets and sizes in bytes)

GWSIM_DRV_PER_THREAD_TWINS(
    cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds,
    (CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount),
    (dstArray, dstOffset, srcHost, ByteCount),
    { return CopySync(OfArray(dstArray, dstOffset), OfHost(srcHost), ByteCount, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds,
                           (void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount),
                           (dstHost, srcArray, srcOffset, ByteCount), {
                             return CopySync(OfHost(dstHost), OfArray(srcArray, srcOffset),
                                             ByteCount, per_thread);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz,
                           (CUarray dstArray, size_t dstOffset, const void* srcHost,
                            size_t ByteCount, CUstream hStream),
                           (dstArray, dstOffset, srcHost, ByteCount, hStream), {
                             return CopyAsync(OfArray(dstArray, dstOffset), OfHost(srcHost),
                                              ByteCount, hStream, per_thread);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz,
                           (void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                            CUstream hStream),
                           (dstHost, srcArray, srcOffset, ByteCount, hStream), {
                             return CopyAsync(OfHost(dstHost), OfArray(srcArray, srcOffset),
                                              ByteCount, hStream, per_thread);
                           })

GWSIM_DRV_PER_THREAD_TWINS(
    cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds,
    (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),
    (dstDevice, srcArray, srcOffset, ByteCount),
    { return CopySync(OfDevice(dstDevice), OfArray(srcArray, srcOffset), ByteCount, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(
    cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds,
    (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),
    (dstArray, dstOffset, srcDevice, ByteCount),
    { return CopySync(OfArray(dstArray, dstOffset), OfDevice(srcDevice), ByteCount, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds,
                           (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                            size_t ByteCount),
                           (dstArray, dstOffset, srcArray, srcOffset, ByteCount), {
                             return CopySync(OfArray(dstArray, dstOffset),
                                             OfArray(srcArray, srcOffset), ByteCount, per_thread);
                           })

// 2D and 3D copies not in api_copy.cc

GWSIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  return TraceDriver(GWSIM_DRV(cuMemcpy2DUnaligned_v2_ptds),
                     cuMemcpy2DUnaligned_v2_ptds_params{pCopy},
                     [&] { return CopyDescriptor2D(pCopy, nullptr, true, false); });
}

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* pCopy),
                           (pCopy), { return CopyPeer3D(pCopy, nullptr, per_thread, false); })

GWSIM_DRV_PER_THREAD_TWINS(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz,
                           (const CUDA_MEMCPY3D_PEER* pCopy, CUstream hStream), (pCopy, hStream),
                           { return CopyPeer3D(pCopy, hStream, per_thread, true); })
