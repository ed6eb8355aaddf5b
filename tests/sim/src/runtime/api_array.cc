// Exported runtime API: CUDA arrays and copies to and from them, and 3D peer copies.
//
// cudaArray_t and CUarray are the same handle ("may be used interchangeably by casting"), and
// so are cudaMipmappedArray_t and CUmipmappedArray here. Each call nests the driver call that
// does its work: cudaMallocArray / cudaMalloc3DArray -> cuArray3DCreate_v2, cudaFreeArray ->
// cuArrayDestroy, cudaMallocMipmappedArray -> cuMipmappedArrayCreate, cudaArrayGetInfo ->
// cuArray3DGetDescriptor_v2, the 2D array copies -> cuMemcpy2D_v2 (Async, _ptds/_ptsz), the
// linear (deprecated) ones -> one cuMemcpy2D_v2 per run of whole or partial rows, cudaMemcpy3D
// -> cuMemcpy3D_v2, cudaMemcpy3DPeer -> cuMemcpy3DPeer. Looking up an array's element size
// (cudaMemcpy3D, the linear copies) is the runtime's own bookkeeping and is not reported.
#include <algorithm>
#include <tuple>
#include <utility>

#include "common/memcpy3d.h"
#include "runtime/array.h"
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

CUarray Cu(cudaArray_const_t a) { return reinterpret_cast<CUarray>(const_cast<cudaArray*>(a)); }

CUmipmappedArray CuMipmap(cudaMipmappedArray_const_t m) {
  return reinterpret_cast<CUmipmappedArray>(const_cast<cudaMipmappedArray*>(m));
}

// The driver reports an unknown array as an invalid handle; these runtime calls document
// cudaErrorInvalidValue for it.
cudaError_t HandleAsValue(CUresult r) {
  return r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidValue : ToCudaError(r);
}

// cudaChannelFormatDesc -> CUarray_format and channel count: 1, 2 or 4 leading channels of the
// same size (8, 16 or 32 bits; 16 or 32 for floats).
cudaError_t ToFormat(const cudaChannelFormatDesc* desc, CUarray_format* format,
                     unsigned* channels) {
  if (desc == nullptr) return cudaErrorInvalidValue;
  if (desc->f != cudaChannelFormatKindSigned && desc->f != cudaChannelFormatKindUnsigned &&
      desc->f != cudaChannelFormatKindFloat) {
    // Normalized, block-compressed and video formats are not simulated.
    return desc->f > cudaChannelFormatKindNone &&
                   desc->f <= cudaChannelFormatKindUnsignedNormalized1010102
               ? cudaErrorNotSupported
               : cudaErrorInvalidValue;
  }
  const int bits[4] = {desc->x, desc->y, desc->z, desc->w};
  unsigned n = 0;
  while (n < 4 && bits[n] != 0) ++n;
  for (unsigned i = n; i < 4; ++i) {
    if (bits[i] != 0) return cudaErrorInvalidValue;
  }
  if (n == 0 || n == 3) return cudaErrorInvalidValue;
  for (unsigned i = 1; i < n; ++i) {
    if (bits[i] != bits[0]) return cudaErrorInvalidValue;
  }
  *channels = n;
  const int b = bits[0];
  switch (desc->f) {
    case cudaChannelFormatKindSigned:
      *format = b == 8    ? CU_AD_FORMAT_SIGNED_INT8
                : b == 16 ? CU_AD_FORMAT_SIGNED_INT16
                          : CU_AD_FORMAT_SIGNED_INT32;
      return b == 8 || b == 16 || b == 32 ? cudaSuccess : cudaErrorInvalidValue;
    case cudaChannelFormatKindUnsigned:
      *format = b == 8    ? CU_AD_FORMAT_UNSIGNED_INT8
                : b == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                          : CU_AD_FORMAT_UNSIGNED_INT32;
      return b == 8 || b == 16 || b == 32 ? cudaSuccess : cudaErrorInvalidValue;
    case cudaChannelFormatKindFloat:
      *format = b == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
      return b == 16 || b == 32 ? cudaSuccess : cudaErrorInvalidValue;
    default:
      return cudaErrorInvalidValue;
  }
}

cudaChannelFormatDesc FromFormat(CUarray_format format, unsigned channels) {
  int bits = 0;
  cudaChannelFormatKind kind = cudaChannelFormatKindNone;
  switch (format) {
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT32:
      kind = cudaChannelFormatKindSigned;
      bits = format == CU_AD_FORMAT_SIGNED_INT8 ? 8 : format == CU_AD_FORMAT_SIGNED_INT16 ? 16 : 32;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_UNSIGNED_INT32:
      kind = cudaChannelFormatKindUnsigned;
      bits = format == CU_AD_FORMAT_UNSIGNED_INT8    ? 8
             : format == CU_AD_FORMAT_UNSIGNED_INT16 ? 16
                                                     : 32;
      break;
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_FLOAT:
      kind = cudaChannelFormatKindFloat;
      bits = format == CU_AD_FORMAT_HALF ? 16 : 32;
      break;
    default:
      break;
  }
  cudaChannelFormatDesc d{};
  d.f = kind;
  d.x = bits;
  d.y = channels >= 2 ? bits : 0;
  d.z = channels >= 4 ? bits : 0;
  d.w = channels >= 4 ? bits : 0;
  return d;
}

size_t FormatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    default:
      return 4;
  }
}

// An array's element size and first slice (bookkeeping: not reported).
struct Layout {
  size_t element_size = 0;
  size_t row_bytes = 0;
  size_t rows = 1;
};

cudaError_t ArrayLayout(cudaArray_const_t array, Layout* out) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  CUresult r;
  {
    Quiet quiet;
    r = Drv().cuArray3DGetDescriptor_v2(&d, Cu(array));
  }
  if (r != CUDA_SUCCESS) return HandleAsValue(r);
  out->element_size = FormatBytes(d.Format) * d.NumChannels;
  out->row_bytes = d.Width * out->element_size;
  out->rows = d.Height == 0 ? 1 : d.Height;
  return out->row_bytes != 0 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t CreateArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width,
                        size_t height, size_t depth, unsigned flags) {
  if (array == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUDA_ARRAY3D_DESCRIPTOR d{};
  if (cudaError_t e = ToFormat(desc, &d.Format, &d.NumChannels); e != cudaSuccess) return e;
  d.Width = width;
  d.Height = height;
  d.Depth = depth;
  d.Flags = flags;
  CUarray a = nullptr;
  const CUresult r = Drv().cuArray3DCreate_v2(&a, &d);
  if (r == CUDA_SUCCESS) *array = reinterpret_cast<cudaArray_t>(a);
  return ToCudaError(r);
}

// One end of a 2D copy: an array at (x bytes, y rows), or pointer memory with a pitch.
struct End {
  cudaArray_const_t array = nullptr;
  size_t x = 0;
  size_t y = 0;
  const void* ptr = nullptr;
  size_t pitch = 0;
};

End AtArray(cudaArray_const_t a, size_t x, size_t y) { return End{a, x, y, nullptr, 0}; }
End AtPointer(const void* p, size_t pitch) { return End{nullptr, 0, 0, p, pitch}; }

void FillSide(const End& end, CUmemorytype implied, CUmemorytype* type, const void** host,
              CUdeviceptr* device, CUarray* array, size_t* x, size_t* y, size_t* pitch) {
  if (end.array != nullptr) {
    *type = CU_MEMORYTYPE_ARRAY;
    *array = Cu(end.array);
    *x = end.x;
    *y = end.y;
    return;
  }
  *type = implied;
  if (implied == CU_MEMORYTYPE_HOST) {
    *host = end.ptr;
  } else {
    *device = Dev(end.ptr);
  }
  *pitch = end.pitch;
}

struct Async {
  bool async = false;
  cudaStream_t stream = nullptr;
  bool per_thread = false;
};

CUresult Copy2D(const CUDA_MEMCPY2D& c, const Async& how) {
  const DriverApi& d = Drv();
  return SyncOrAsync(how.async, how.per_thread, how.stream, d.cuMemcpy2D_v2, d.cuMemcpy2D_v2_ptds,
                     d.cuMemcpy2DAsync_v2, d.cuMemcpy2DAsync_v2_ptsz, &c);
}

CUDA_MEMCPY2D Descriptor(const End& dst, const End& src, CUmemorytype dst_type,
                         CUmemorytype src_type, size_t width, size_t height) {
  CUDA_MEMCPY2D c{};
  FillSide(src, src_type, &c.srcMemoryType, &c.srcHost, &c.srcDevice, &c.srcArray, &c.srcXInBytes,
           &c.srcY, &c.srcPitch);
  const void* dst_host = nullptr;
  FillSide(dst, dst_type, &c.dstMemoryType, &dst_host, &c.dstDevice, &c.dstArray, &c.dstXInBytes,
           &c.dstY, &c.dstPitch);
  c.dstHost = const_cast<void*>(dst_host);
  c.WidthInBytes = width;
  c.Height = height;
  return c;
}

cudaError_t Memcpy2D(const End& dst, const End& src, size_t width, size_t height,
                     cudaMemcpyKind kind, const Async& how) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUmemorytype src_type;
  CUmemorytype dst_type;
  if (!MemoryTypes(kind, &src_type, &dst_type)) return cudaErrorInvalidMemcpyDirection;
  for (const End* end : {&dst, &src}) {
    if (end->array == nullptr && height > 1 && end->pitch < width) {
      return cudaErrorInvalidPitchValue;
    }
  }
  return ToCudaError(Copy2D(Descriptor(dst, src, dst_type, src_type, width, height), how));
}

// The deprecated linear copies: `count` bytes from (x, y) on, row after row of the array's
// first slice, as one 2D copy per partial first row, run of whole rows and partial last row.
cudaError_t LinearArrayCopy(cudaArray_const_t array, size_t x, size_t y, const void* ptr,
                            size_t count, bool to_array, cudaMemcpyKind kind, const Async& how) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUmemorytype src_type;
  CUmemorytype dst_type;
  if (!MemoryTypes(kind, &src_type, &dst_type)) return cudaErrorInvalidMemcpyDirection;
  Layout l;
  if (cudaError_t e = ArrayLayout(array, &l); e != cudaSuccess) return e;
  // (x, y) must lie in the array, and the bytes from there on hold `count`.
  const size_t room = y >= l.rows ? 0 : (l.rows - y) * l.row_bytes;
  if (x >= l.row_bytes || y >= l.rows || count > room - x) return cudaErrorInvalidValue;
  const auto* p = static_cast<const unsigned char*>(ptr);
  size_t done = 0;
  while (done < count) {
    const size_t left = count - done;
    size_t width = std::min(left, l.row_bytes - x);
    size_t height = 1;
    if (x == 0 && left >= l.row_bytes) {  // a run of whole rows
      width = l.row_bytes;
      height = left / l.row_bytes;
    }
    const End at_array = AtArray(array, x, y);
    const End at_memory = AtPointer(p + done, width);
    const CUDA_MEMCPY2D c =
        to_array ? Descriptor(at_array, at_memory, dst_type, src_type, width, height)
                 : Descriptor(at_memory, at_array, dst_type, src_type, width, height);
    if (CUresult r = Copy2D(c, how); r != CUDA_SUCCESS) return ToCudaError(r);
    done += width * height;
    x = (x + width) % l.row_bytes;
    y += x == 0 ? height : 0;
  }
  return cudaSuccess;
}

cudaError_t LinearArrayToArray(cudaArray_const_t dst, size_t dx, size_t dy, cudaArray_const_t src,
                               size_t sx, size_t sy, size_t count, cudaMemcpyKind kind,
                               const Async& how) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUmemorytype src_type;
  CUmemorytype dst_type;
  if (!MemoryTypes(kind, &src_type, &dst_type)) return cudaErrorInvalidMemcpyDirection;
  Layout dl;
  Layout sl;
  if (cudaError_t e = ArrayLayout(dst, &dl); e != cudaSuccess) return e;
  if (cudaError_t e = ArrayLayout(src, &sl); e != cudaSuccess) return e;
  if (dl.row_bytes == 0 || sl.row_bytes == 0) return cudaErrorInvalidValue;  // (never: width >= 1)
  for (const auto& [l, x, y] : {std::tuple{&dl, dx, dy}, std::tuple{&sl, sx, sy}}) {
    const size_t room = y >= l->rows ? 0 : (l->rows - y) * l->row_bytes;
    if (x >= l->row_bytes || y >= l->rows || count > room - x) return cudaErrorInvalidValue;
  }
  size_t done = 0;
  while (done < count) {
    const size_t left = count - done;
    size_t width = std::min({left, dl.row_bytes - dx, sl.row_bytes - sx});
    size_t height = 1;
    if (dx == 0 && sx == 0 && dl.row_bytes == sl.row_bytes && left >= dl.row_bytes) {
      width = dl.row_bytes;
      height = left / dl.row_bytes;
    }
    const CUDA_MEMCPY2D c =
        Descriptor(AtArray(dst, dx, dy), AtArray(src, sx, sy), dst_type, src_type, width, height);
    if (CUresult r = Copy2D(c, how); r != CUDA_SUCCESS) return ToCudaError(r);
    done += width * height;
    dx = (dx + width) % dl.row_bytes;
    dy += dx == 0 ? height : 0;
    sx = (sx + width) % sl.row_bytes;
    sy += sx == 0 ? height : 0;
  }
  return cudaSuccess;
}

cudaError_t Memcpy3DPeer(const cudaMemcpy3DPeerParms* p, bool async, cudaStream_t stream,
                         bool per_thread) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  if ((p->srcArray != nullptr) == (p->srcPtr.ptr != nullptr) ||
      (p->dstArray != nullptr) == (p->dstPtr.ptr != nullptr)) {
    return cudaErrorInvalidValue;
  }
  CUcontext src_ctx = nullptr;
  CUcontext dst_ctx = nullptr;
  if (cudaError_t e = EnsurePrimary(p->srcDevice, &src_ctx); e != cudaSuccess) return e;
  if (cudaError_t e = EnsurePrimary(p->dstDevice, &dst_ctx); e != cudaSuccess) return e;
  // Express it as a 3D copy between device memory to reuse the conversion, then add contexts.
  cudaMemcpy3DParms q{};
  q.srcArray = p->srcArray;
  q.srcPos = p->srcPos;
  q.srcPtr = p->srcPtr;
  q.dstArray = p->dstArray;
  q.dstPos = p->dstPos;
  q.dstPtr = p->dstPtr;
  q.extent = p->extent;
  q.kind = cudaMemcpyDeviceToDevice;
  CUDA_MEMCPY3D c{};
  if (cudaError_t e = ToDriver3D(&q, &c); e != cudaSuccess) return e;
  CUDA_MEMCPY3D_PEER peer{};
  CopySharedMemcpy3DMembers(c, &peer);  // its host pointers and LODs are zero: device to device
  peer.srcContext = src_ctx;
  peer.dstContext = dst_ctx;
  const DriverApi& d = Drv();
  return ToCudaError(SyncOrAsync(async, per_thread, stream, d.cuMemcpy3DPeer, d.cuMemcpy3DPeer_ptds,
                                 d.cuMemcpy3DPeerAsync, d.cuMemcpy3DPeerAsync_ptsz, &peer));
}

}  // namespace

// The memory type a cudaMemcpyKind implies on each side. An array side is always an array:
// as cudaMemcpy3D documents, a kind that puts it on the host is silently corrected.
bool MemoryTypes(cudaMemcpyKind kind, CUmemorytype* src, CUmemorytype* dst) {
  static_assert(cudaMemcpyHostToHost == 0 && cudaMemcpyHostToDevice == 1 &&
                cudaMemcpyDeviceToHost == 2 && cudaMemcpyDeviceToDevice == 3 &&
                cudaMemcpyDefault == 4);
  // {source, destination}, indexed by the kind.
  static constexpr CUmemorytype kTypes[][2] = {{CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST},
                                               {CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE},
                                               {CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST},
                                               {CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE},
                                               {CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED}};
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return false;
  *src = kTypes[kind][0];
  *dst = kTypes[kind][1];
  return true;
}

namespace {

// One side of ToDriver3D: the array, or the pointer with the memory type the kind implies.
void Side3D(cudaArray_const_t array, const cudaPitchedPtr& ptr, size_t x, CUmemorytype type,
            size_t element_size, CUmemorytype* memory_type, const void** host, CUdeviceptr* device,
            CUarray* cu_array, size_t* x_in_bytes, size_t* pitch, size_t* height) {
  if (array != nullptr) {
    *memory_type = CU_MEMORYTYPE_ARRAY;
    *cu_array = Cu(array);
    *x_in_bytes = x * element_size;
    return;
  }
  *memory_type = type;
  if (type == CU_MEMORYTYPE_HOST) {
    *host = ptr.ptr;
  } else {
    *device = Dev(ptr.ptr);
  }
  *x_in_bytes = x;
  *pitch = ptr.pitch;
  *height = ptr.ysize;
}

}  // namespace

cudaError_t ToDriver3D(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* out) {
  // Exactly one of srcArray / srcPtr and of dstArray / dstPtr.
  if ((p->srcArray != nullptr) == (p->srcPtr.ptr != nullptr) ||
      (p->dstArray != nullptr) == (p->dstPtr.ptr != nullptr)) {
    return cudaErrorInvalidValue;
  }
  CUmemorytype src_type;
  CUmemorytype dst_type;
  if (!MemoryTypes(p->kind, &src_type, &dst_type)) return cudaErrorInvalidMemcpyDirection;
  Layout src_layout;
  Layout dst_layout;
  if (p->srcArray != nullptr) {
    if (cudaError_t e = ArrayLayout(p->srcArray, &src_layout); e != cudaSuccess) return e;
  }
  if (p->dstArray != nullptr) {
    if (cudaError_t e = ArrayLayout(p->dstArray, &dst_layout); e != cudaSuccess) return e;
  }
  if (p->srcArray != nullptr && p->dstArray != nullptr &&
      src_layout.element_size != dst_layout.element_size) {
    return cudaErrorInvalidValue;
  }
  // The extent counts the participating array's elements, or bytes.
  const size_t element = p->srcArray != nullptr   ? src_layout.element_size
                         : p->dstArray != nullptr ? dst_layout.element_size
                                                  : 1;
  CUDA_MEMCPY3D c{};
  const void* dst_host = nullptr;
  Side3D(p->srcArray, p->srcPtr, p->srcPos.x, src_type, src_layout.element_size, &c.srcMemoryType,
         &c.srcHost, &c.srcDevice, &c.srcArray, &c.srcXInBytes, &c.srcPitch, &c.srcHeight);
  Side3D(p->dstArray, p->dstPtr, p->dstPos.x, dst_type, dst_layout.element_size, &c.dstMemoryType,
         &dst_host, &c.dstDevice, &c.dstArray, &c.dstXInBytes, &c.dstPitch, &c.dstHeight);
  c.dstHost = const_cast<void*>(dst_host);
  c.srcY = p->srcPos.y;
  c.srcZ = p->srcPos.z;
  c.dstY = p->dstPos.y;
  c.dstZ = p->dstPos.z;
  c.WidthInBytes = p->extent.width * element;
  c.Height = p->extent.height;
  c.Depth = p->extent.depth;
  *out = c;
  return cudaSuccess;
}

}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Allocation

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMallocArray(cudaArray_t* array,
                                                   const struct cudaChannelFormatDesc* desc,
                                                   size_t width, size_t height,
                                                   unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaMallocArray, v3020),
                      GWSIM_RT_PARAMS(cudaMallocArray, v3020){array, desc, width, height, flags},
                      [&] { return CreateArray(array, desc, width, height, 0, flags); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMalloc3DArray(cudaArray_t* array,
                                                     const struct cudaChannelFormatDesc* desc,
                                                     struct cudaExtent extent, unsigned int flags) {
  return TraceRuntime(
      GWSIM_RT(cudaMalloc3DArray, v3020),
      GWSIM_RT_PARAMS(cudaMalloc3DArray, v3020){array, desc, extent, flags},
      [&] { return CreateArray(array, desc, extent.width, extent.height, extent.depth, flags); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMallocMipmappedArray(
    cudaMipmappedArray_t* mipmappedArray, const struct cudaChannelFormatDesc* desc,
    struct cudaExtent extent, unsigned int numLevels, unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaMallocMipmappedArray, v5000),
                      GWSIM_RT_PARAMS(cudaMallocMipmappedArray, v5000){mipmappedArray, desc, extent,
                                                                       numLevels, flags},
                      [&] {
                        if (mipmappedArray == nullptr) return cudaErrorInvalidValue;
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        CUDA_ARRAY3D_DESCRIPTOR d{};
                        if (cudaError_t e = ToFormat(desc, &d.Format, &d.NumChannels);
                            e != cudaSuccess) {
                          return e;
                        }
                        d.Width = extent.width;
                        d.Height = extent.height;
                        d.Depth = extent.depth;
                        d.Flags = flags;
                        CUmipmappedArray m = nullptr;
                        const CUresult r = Drv().cuMipmappedArrayCreate(&m, &d, numLevels);
                        if (r == CUDA_SUCCESS) {
                          *mipmappedArray = reinterpret_cast<cudaMipmappedArray_t>(m);
                        }
                        return ToCudaError(r);
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetMipmappedArrayLevel(
    cudaArray_t* levelArray, cudaMipmappedArray_const_t mipmappedArray, unsigned int level) {
  return TraceRuntime(
      GWSIM_RT(cudaGetMipmappedArrayLevel, v5000),
      GWSIM_RT_PARAMS(cudaGetMipmappedArrayLevel, v5000){levelArray, mipmappedArray, level}, [&] {
        if (levelArray == nullptr) return cudaErrorInvalidValue;
        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
        CUarray a = nullptr;
        const CUresult r = Drv().cuMipmappedArrayGetLevel(&a, CuMipmap(mipmappedArray), level);
        if (r == CUDA_SUCCESS) *levelArray = reinterpret_cast<cudaArray_t>(a);
        return ToCudaError(r);
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFreeArray(cudaArray_t array) {
  return TraceRuntime(GWSIM_RT(cudaFreeArray, v3020), GWSIM_RT_PARAMS(cudaFreeArray, v3020){array},
                      [&] {
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        if (array == nullptr) return cudaSuccess;  // "no operation is performed"
                        return HandleAsValue(Drv().cuArrayDestroy(Cu(array)));
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray) {
  return TraceRuntime(
      GWSIM_RT(cudaFreeMipmappedArray, v5000),
      GWSIM_RT_PARAMS(cudaFreeMipmappedArray, v5000){mipmappedArray}, [&] {
        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
        if (mipmappedArray == nullptr) return cudaSuccess;
        return HandleAsValue(Drv().cuMipmappedArrayDestroy(CuMipmap(mipmappedArray)));
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaArrayGetInfo(struct cudaChannelFormatDesc* desc,
                                                    struct cudaExtent* extent, unsigned int* flags,
                                                    cudaArray_t array) {
  return TraceRuntime(GWSIM_RT(cudaArrayGetInfo, v4010),
                      GWSIM_RT_PARAMS(cudaArrayGetInfo, v4010){desc, extent, flags, array}, [&] {
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        CUDA_ARRAY3D_DESCRIPTOR d{};
                        const CUresult r = Drv().cuArray3DGetDescriptor_v2(&d, Cu(array));
                        if (r != CUDA_SUCCESS) return HandleAsValue(r);
                        if (desc != nullptr) *desc = FromFormat(d.Format, d.NumChannels);
                        if (extent != nullptr) *extent = cudaExtent{d.Width, d.Height, d.Depth};
                        if (flags != nullptr) *flags = d.Flags;
                        return cudaSuccess;
                      });
}

GWSIM_EXPORT struct cudaChannelFormatDesc CUDARTAPI
cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  return TraceRuntime(GWSIM_RT(cudaCreateChannelDesc, v3020),
                      GWSIM_RT_PARAMS(cudaCreateChannelDesc, v3020){x, y, z, w, f}, [&] {
                        return cudaChannelFormatDesc{x, y, z, w, f};
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGetChannelDesc(struct cudaChannelFormatDesc* desc,
                                                      cudaArray_const_t array) {
  return TraceRuntime(GWSIM_RT(cudaGetChannelDesc, v3020),
                      GWSIM_RT_PARAMS(cudaGetChannelDesc, v3020){desc, array}, [&] {
                        if (desc == nullptr) return cudaErrorInvalidValue;
                        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
                        CUDA_ARRAY3D_DESCRIPTOR d{};
                        const CUresult r = Drv().cuArray3DGetDescriptor_v2(&d, Cu(array));
                        if (r != CUDA_SUCCESS) return HandleAsValue(r);
                        *desc = FromFormat(d.Format, d.NumChannels);
                        return cudaSuccess;
                      });
}

// 2D copies to, from and between arrays (offsets and widths in bytes)

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2DToArray, v3020, cudaMemcpy2DToArray_ptds, v7000,
                          (cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                           size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind),
                          (dst, wOffset, hOffset, src, spitch, width, height, kind), {
                            return Memcpy2D(AtArray(dst, wOffset, hOffset), AtPointer(src, spitch),
                                            width, height, kind, Async{false, nullptr, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2DToArrayAsync, v3020, cudaMemcpy2DToArrayAsync_ptsz, v7000,
                          (cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                           size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                           cudaStream_t stream),
                          (dst, wOffset, hOffset, src, spitch, width, height, kind, stream), {
                            return Memcpy2D(AtArray(dst, wOffset, hOffset), AtPointer(src, spitch),
                                            width, height, kind, Async{true, stream, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2DFromArray, v3020, cudaMemcpy2DFromArray_ptds, v7000,
                          (void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                           size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind),
                          (dst, dpitch, src, wOffset, hOffset, width, height, kind), {
                            return Memcpy2D(AtPointer(dst, dpitch), AtArray(src, wOffset, hOffset),
                                            width, height, kind, Async{false, nullptr, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpy2DFromArrayAsync, v3020, cudaMemcpy2DFromArrayAsync_ptsz, v7000,
                          (void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                           size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                           cudaStream_t stream),
                          (dst, dpitch, src, wOffset, hOffset, width, height, kind, stream), {
                            return Memcpy2D(AtPointer(dst, dpitch), AtArray(src, wOffset, hOffset),
                                            width, height, kind, Async{true, stream, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(
    cudaMemcpy2DArrayToArray, v3020, cudaMemcpy2DArrayToArray_ptds, v7000,
    (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
     size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height, enum cudaMemcpyKind kind),
    (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind), {
      return Memcpy2D(AtArray(dst, wOffsetDst, hOffsetDst), AtArray(src, wOffsetSrc, hOffsetSrc),
                      width, height, kind, Async{false, nullptr, per_thread});
    })

// Linear copies to, from and between arrays (deprecated, still declared by CUDA 13)

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyToArray, v3020, cudaMemcpyToArray_ptds, v7000,
                          (cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                           size_t count, enum cudaMemcpyKind kind),
                          (dst, wOffset, hOffset, src, count, kind), {
                            return LinearArrayCopy(dst, wOffset, hOffset, src, count, true, kind,
                                                   Async{false, nullptr, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyToArrayAsync, v3020, cudaMemcpyToArrayAsync_ptsz, v7000,
                          (cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                           size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
                          (dst, wOffset, hOffset, src, count, kind, stream), {
                            return LinearArrayCopy(dst, wOffset, hOffset, src, count, true, kind,
                                                   Async{true, stream, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyFromArray, v3020, cudaMemcpyFromArray_ptds, v7000,
                          (void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                           size_t count, enum cudaMemcpyKind kind),
                          (dst, src, wOffset, hOffset, count, kind), {
                            return LinearArrayCopy(src, wOffset, hOffset, dst, count, false, kind,
                                                   Async{false, nullptr, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyFromArrayAsync, v3020, cudaMemcpyFromArrayAsync_ptsz, v7000,
                          (void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                           size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
                          (dst, src, wOffset, hOffset, count, kind, stream), {
                            return LinearArrayCopy(src, wOffset, hOffset, dst, count, false, kind,
                                                   Async{true, stream, per_thread});
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaMemcpyArrayToArray, v3020, cudaMemcpyArrayToArray_ptds, v7000,
                          (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                           cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                           size_t count, enum cudaMemcpyKind kind),
                          (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind), {
                            return LinearArrayToArray(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc,
                                                      hOffsetSrc, count, kind,
                                                      Async{false, nullptr, per_thread});
                          })

// 3D peer copies (cudaMemcpy3D itself is in api_copy.cc)

GWSIM_RT_COPY_3D(cudaMemcpy3DPeer, cudaMemcpy3DPeerAsync, v4000, cudaMemcpy3DPeerParms,
                 Memcpy3DPeer)
