#include "interpose/calls.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <unordered_map>

#include "interpose/cupti_loader.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAlloc:
      return "alloc";
    case Role::kFree:
      return "free";
    case Role::kCopy:
      return "copy";
    case Role::kLaunch:
      return "launch";
    case Role::kGraphLaunch:
      return "graph_launch";
    case Role::kSync:
      return "sync";
    case Role::kVmmCreate:
      return "vmm_create";
    case Role::kVmmRelease:
      return "vmm_release";
    case Role::kVmmUnmap:
      return "vmm_unmap";
    case Role::kInstantiate:
      return "instantiate";
    case Role::kGraphNode:
      return "graph_node";
  }
  return "?";
}

namespace {

// ---------------------------------------------------------------------------
// Reading params structs. Every reader is a template over the params type so
// that the `_ptsz`/`_ptds` variants, whose structs have the same members
// under another name, are read through their own type.

template <typename P>
const P& Params(const CUpti_CallbackData* d) {
  return *static_cast<const P*>(d->functionParams);
}

uint64_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
uint64_t Addr(CUdeviceptr p) { return p; }

CopyKind FromRuntimeKind(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return CopyKind::kHostToDevice;
    case cudaMemcpyDeviceToHost:
      return CopyKind::kDeviceToHost;
    case cudaMemcpyDeviceToDevice:
      return CopyKind::kDeviceToDevice;
    case cudaMemcpyHostToHost:
      return CopyKind::kHostToHost;
    default:
      return CopyKind::kUnknown;  // cudaMemcpyDefault: resolved later (record or own tables)
  }
}

// A symbol copy whose kind is cudaMemcpyDefault goes the symbol's usual way.
CopyKind OrDefault(cudaMemcpyKind kind, CopyKind fallback) {
  return kind == cudaMemcpyDefault ? fallback : FromRuntimeKind(kind);
}

// The direction of a driver copy between two CUmemorytypes (unified memory:
// resolved later).
CopyKind FromMemoryTypes(CUmemorytype src, CUmemorytype dst) {
  const auto device_side = [](CUmemorytype t) {
    return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_ARRAY;
  };
  if (src == CU_MEMORYTYPE_UNIFIED || dst == CU_MEMORYTYPE_UNIFIED) return CopyKind::kUnknown;
  if (src == CU_MEMORYTYPE_HOST && dst == CU_MEMORYTYPE_HOST) return CopyKind::kHostToHost;
  if (src == CU_MEMORYTYPE_HOST && device_side(dst)) return CopyKind::kHostToDevice;
  if (device_side(src) && dst == CU_MEMORYTYPE_HOST) return CopyKind::kDeviceToHost;
  if (device_side(src) && device_side(dst)) return CopyKind::kDeviceToDevice;
  return CopyKind::kUnknown;
}

bool SetCopy(ParsedCall* c, uint64_t bytes, CopyKind kind, bool async, uint64_t src = 0,
             uint64_t dst = 0) {
  c->role = Role::kCopy;
  c->copy = CopyCall{};
  c->copy.bytes = bytes;
  c->copy.kind = kind;
  c->copy.async = async;
  c->src = src;
  c->dst = dst;
  return true;
}

// The source and destination a params struct names, whatever the API calls
// them (dst/src, dstHost/srcDevice, ...); 0 when it names none.
template <typename P>
uint64_t SrcOf(const P& p) {
  if constexpr (requires { p.srcHost; }) {
    return Addr(p.srcHost);
  } else if constexpr (requires { p.srcDevice; }) {
    return Addr(p.srcDevice);
  } else if constexpr (requires { p.src; }) {
    return Addr(p.src);
  } else {
    return 0;
  }
}

template <typename P>
uint64_t DstOf(const P& p) {
  if constexpr (requires { p.dstHost; }) {
    return Addr(p.dstHost);
  } else if constexpr (requires { p.dstDevice; }) {
    return Addr(p.dstDevice);
  } else if constexpr (requires { p.dst; }) {
    return Addr(p.dst);
  } else {
    return 0;
  }
}

// One side of a driver copy descriptor (CUDA_MEMCPY2D/3D/3D_PEER), by its memory type.
uint64_t DescriptorSide(CUmemorytype type, const void* host, CUdeviceptr device, CUarray array) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      return Addr(host);
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      return device;
    case CU_MEMORYTYPE_ARRAY:
      return Addr(array);
    default:
      return 0;
  }
}

template <typename Desc>
uint64_t DescriptorSrc(const Desc& m) {
  return DescriptorSide(m.srcMemoryType, m.srcHost, m.srcDevice, m.srcArray);
}

template <typename Desc>
uint64_t DescriptorDst(const Desc& m) {
  return DescriptorSide(m.dstMemoryType, m.dstHost, m.dstDevice, m.dstArray);
}

// cudaMemcpy3DParms: an array when given, else the pitched pointer.
uint64_t Parms3DSrc(const cudaMemcpy3DParms& p) {
  return p.srcArray != nullptr ? Addr(p.srcArray) : Addr(p.srcPtr.ptr);
}
uint64_t Parms3DDst(const cudaMemcpy3DParms& p) {
  return p.dstArray != nullptr ? Addr(p.dstArray) : Addr(p.dstPtr.ptr);
}

bool SetAlloc(ParsedCall* c, uint64_t address, uint64_t size, MemKind kind,
              const void* stream = nullptr) {
  c->role = Role::kAlloc;
  c->address = address;
  c->size = size;
  c->kind = kind;
  c->stream = stream;
  return true;
}

bool SetFree(ParsedCall* c, uint64_t address) {
  c->role = Role::kFree;
  c->address = address;
  return true;
}

uint64_t Volume(uint64_t width, uint64_t height, uint64_t depth) {
  return width * std::max<uint64_t>(height, 1) * std::max<uint64_t>(depth, 1);
}

// --- Allocations -------------------------------------------------------------

template <typename P>
bool ReadMalloc(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {  // cudaMalloc, Managed
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.devPtr) : 0, p.size, MemKind::kDevice);
}

template <typename P>
bool ReadMallocManaged(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.devPtr) : 0, p.size, MemKind::kManaged);
}

template <typename P>
bool ReadMallocPitch(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.devPtr) : 0, (ok ? *p.pitch : p.width) * p.height,
                  MemKind::kDevice);
}

template <typename P>
bool ReadMalloc3D(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  const uint64_t row = ok ? p.pitchedDevPtr->pitch : p.extent.width;
  return SetAlloc(c, ok ? Addr(p.pitchedDevPtr->ptr) : 0, row * p.extent.height * p.extent.depth,
                  MemKind::kDevice);
}

template <typename P>
bool ReadMallocAsync(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.devPtr) : 0, p.size, MemKind::kPool, p.hStream);
}

template <typename P>
bool ReadMallocFromPoolAsync(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.ptr) : 0, p.size, MemKind::kPool, p.stream);
}

template <typename P>
bool ReadMallocHost(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.ptr) : 0, p.size, MemKind::kPinnedHost);
}

template <typename P>
bool ReadHostAlloc(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.pHost) : 0, p.size, MemKind::kPinnedHost);
}

template <typename P>
bool ReadHostRegister(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(p.ptr) : 0, p.size, MemKind::kRegisteredHost);
}

uint32_t ChannelBytes(const cudaChannelFormatDesc* desc) {
  if (desc == nullptr) return 1;
  const int bits = desc->x + desc->y + desc->z + desc->w;
  return bits >= 8 ? static_cast<uint32_t>(bits / 8) : 1;
}

bool SetArray(ParsedCall* c, uint64_t handle, uint64_t elements, uint32_t element_bytes) {
  c->array_element_bytes = element_bytes;
  return SetAlloc(c, handle, elements * element_bytes, MemKind::kArray);
}

template <typename P>
bool ReadMallocArray(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetArray(c, ok ? Addr(*p.array) : 0, Volume(p.width, p.height, 1), ChannelBytes(p.desc));
}

template <typename P>
bool ReadMalloc3DArray(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetArray(c, ok ? Addr(*p.array) : 0,
                  Volume(p.extent.width, p.extent.height, p.extent.depth), ChannelBytes(p.desc));
}

// Every level of a mipmap: each halves width, height and depth (a layered
// array keeps its layers), down to 1.
uint64_t MipmapElements(uint64_t width, uint64_t height, uint64_t depth, unsigned levels,
                        bool layered) {
  uint64_t total = 0;
  for (unsigned l = 0; l < std::max(levels, 1u); ++l) {
    total += Volume(std::max<uint64_t>(width >> l, 1), height == 0 ? 0 : std::max(height >> l, 1ul),
                    depth == 0 ? 0 : (layered ? depth : std::max(depth >> l, 1ul)));
  }
  return total;
}

template <typename P>
bool ReadMallocMipmappedArray(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  const bool layered = (p.flags & cudaArrayLayered) != 0;
  return SetArray(
      c, ok ? Addr(*p.mipmappedArray) : 0,
      MipmapElements(p.extent.width, p.extent.height, p.extent.depth, p.numLevels, layered),
      ChannelBytes(p.desc));
}

uint32_t FormatBytes(CUarray_format format, unsigned channels) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return channels;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2 * channels;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4 * channels;
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
      return 2;
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT_101010_2:
      return 4;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
      return 8;
    default:
      return std::max(channels, 1u);  // compressed and video formats: about a byte an element
  }
}

template <typename P>
bool ReadArrayCreate(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  if (p.pAllocateArray == nullptr) return false;
  const CUDA_ARRAY_DESCRIPTOR& a = *p.pAllocateArray;
  return SetArray(c, ok ? Addr(*p.pHandle) : 0, Volume(a.Width, a.Height, 1),
                  FormatBytes(a.Format, a.NumChannels));
}

template <typename P>
bool ReadArray3DCreate(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  if (p.pAllocateArray == nullptr) return false;
  const CUDA_ARRAY3D_DESCRIPTOR& a = *p.pAllocateArray;
  return SetArray(c, ok ? Addr(*p.pHandle) : 0, Volume(a.Width, a.Height, a.Depth),
                  FormatBytes(a.Format, a.NumChannels));
}

template <typename P>
bool ReadMipmappedArrayCreate(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  if (p.pMipmappedArrayDesc == nullptr) return false;
  const CUDA_ARRAY3D_DESCRIPTOR& a = *p.pMipmappedArrayDesc;
  const bool layered = (a.Flags & CUDA_ARRAY3D_LAYERED) != 0;
  return SetArray(c, ok ? Addr(*p.pHandle) : 0,
                  MipmapElements(a.Width, a.Height, a.Depth, p.numMipmapLevels, layered),
                  FormatBytes(a.Format, a.NumChannels));
}

template <typename P>
bool ReadMemAlloc(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {  // cuMemAlloc_v2
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? *p.dptr : 0, p.bytesize, MemKind::kDevice);
}

template <typename P>
bool ReadMemAllocPitch(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? *p.dptr : 0, (ok ? *p.pPitch : p.WidthInBytes) * p.Height,
                  MemKind::kDevice);
}

template <typename P>
bool ReadMemAllocManaged(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? *p.dptr : 0, p.bytesize, MemKind::kManaged);
}

template <typename P>
bool ReadMemAllocAsync(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? *p.dptr : 0, p.bytesize, MemKind::kPool, p.hStream);
}

template <typename P>
bool ReadMemAllocHost(const CUpti_CallbackData* d, bool ok,
                      ParsedCall* c) {  // AllocHost, HostAlloc
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(*p.pp) : 0, p.bytesize, MemKind::kPinnedHost);
}

template <typename P>
bool ReadMemHostRegister(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetAlloc(c, ok ? Addr(p.p) : 0, p.bytesize, MemKind::kRegisteredHost);
}

// VMM: a physical handle (cuMemCreate) is not memory the program can reach
// until it is mapped; the mapping is what counts. A failed cuMemCreate is the
// VMM out-of-memory.
template <typename P>
bool ReadMemCreate(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kVmmCreate;
  c->size = p.size;
  c->handle = ok && p.handle != nullptr ? *p.handle : 0;
  c->kind = MemKind::kVmm;
  c->device = -1;
  if (p.prop != nullptr) {
    switch (p.prop->location.type) {
      case CU_MEM_LOCATION_TYPE_DEVICE:
        c->device = p.prop->location.id;
        break;
      case CU_MEM_LOCATION_TYPE_HOST:
      case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        c->kind = MemKind::kPinnedHost;  // host memory mapped for the device
        break;
      default:
        break;
    }
  }
  return true;
}

template <typename P>
bool ReadMemRelease(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  c->role = Role::kVmmRelease;
  c->handle = Params<P>(d).handle;
  return true;
}

template <typename P>
bool ReadMemMap(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->handle = p.handle;
  return SetAlloc(c, ok ? p.ptr : 0, p.size, MemKind::kVmm);
}

template <typename P>
bool ReadMemUnmap(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kVmmUnmap;
  c->address = p.ptr;
  c->size = p.size;
  return true;
}

// --- Frees -------------------------------------------------------------------

template <typename P>
bool ReadFreeDevPtr(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // cudaFree(Async)
  return SetFree(c, Addr(Params<P>(d).devPtr));
}

template <typename P>
bool ReadFreePtr(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // FreeHost, HostUnregister
  return SetFree(c, Addr(Params<P>(d).ptr));
}

template <typename P>
bool ReadFreeArray(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetFree(c, Addr(Params<P>(d).array));
}

template <typename P>
bool ReadFreeMipmappedArray(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetFree(c, Addr(Params<P>(d).mipmappedArray));
}

template <typename P>
bool ReadMemFree(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // cuMemFree(Async)
  return SetFree(c, Params<P>(d).dptr);
}

template <typename P>
bool ReadMemFreeHost(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // FreeHost, Unregister
  return SetFree(c, Addr(Params<P>(d).p));
}

template <typename P>
bool ReadArrayDestroy(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetFree(c, Addr(Params<P>(d).hArray));
}

template <typename P>
bool ReadMipmappedArrayDestroy(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetFree(c, Addr(Params<P>(d).hMipmappedArray));
}

// --- Copies ------------------------------------------------------------------

template <typename P, bool kAsync>
bool ReadMemcpy(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // count + kind
  const auto& p = Params<P>(d);
  return SetCopy(c, p.count, FromRuntimeKind(p.kind), kAsync, SrcOf(p), DstOf(p));
}

template <typename P, bool kAsync>
bool ReadMemcpy2D(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // width x height + kind
  const auto& p = Params<P>(d);
  return SetCopy(c, p.width * p.height, FromRuntimeKind(p.kind), kAsync, SrcOf(p), DstOf(p));
}

template <typename P, bool kAsync>
bool ReadMemcpyPeer(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetCopy(c, Params<P>(d).count, CopyKind::kPeer, kAsync);
}

template <typename P, bool kAsync>
bool ReadMemcpyToSymbol(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetCopy(c, p.count, OrDefault(p.kind, CopyKind::kHostToDevice), kAsync, SrcOf(p));
}

template <typename P, bool kAsync>
bool ReadMemcpyFromSymbol(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetCopy(c, p.count, OrDefault(p.kind, CopyKind::kDeviceToHost), kAsync, 0, DstOf(p));
}

// cudaMemcpy3D: with a CUDA array on either side the extent's width counts
// elements of that array, else bytes.
uint64_t Bytes3D(const cudaMemcpy3DParms& p) {
  uint32_t element = 1;
  if (p.srcArray != nullptr) element = ArrayElementBytes(Addr(p.srcArray));
  if (p.dstArray != nullptr) element = ArrayElementBytes(Addr(p.dstArray));
  return Volume(p.extent.width * element, p.extent.height, p.extent.depth);
}

template <typename P, bool kAsync>
bool ReadMemcpy3D(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const cudaMemcpy3DParms* p = Params<P>(d).p;
  if (p == nullptr) return false;
  return SetCopy(c, Bytes3D(*p), FromRuntimeKind(p->kind), kAsync, Parms3DSrc(*p), Parms3DDst(*p));
}

template <typename P, bool kAsync>
bool ReadMemcpy3DPeer(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const cudaMemcpy3DPeerParms* p = Params<P>(d).p;
  if (p == nullptr) return false;
  uint32_t element = 1;
  if (p->srcArray != nullptr) element = ArrayElementBytes(Addr(p->srcArray));
  if (p->dstArray != nullptr) element = ArrayElementBytes(Addr(p->dstArray));
  return SetCopy(c, Volume(p->extent.width * element, p->extent.height, p->extent.depth),
                 CopyKind::kPeer, kAsync);
}

template <typename P>
bool ReadMemcpyBatch(const CUpti_CallbackData* d, bool, ParsedCall* c) {  // runtime and driver
  const auto& p = Params<P>(d);
  uint64_t bytes = 0;
  for (size_t i = 0; p.sizes != nullptr && i < p.count; ++i) bytes += p.sizes[i];
  SetCopy(c, bytes, CopyKind::kUnknown, true);
  c->copy.records = static_cast<uint32_t>(p.count);
  return p.count > 0;
}

template <typename Op>
uint64_t Batch3DBytes(const Op& op, bool src_array, uint64_t src_handle, bool dst_array,
                      uint64_t dst_handle) {
  uint32_t element = 1;
  if (src_array) element = ArrayElementBytes(src_handle);
  if (dst_array) element = ArrayElementBytes(dst_handle);
  return Volume(op.extent.width * element, op.extent.height, op.extent.depth);
}

template <typename P>
bool ReadMemcpy3DBatchRuntime(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  uint64_t bytes = 0;
  for (size_t i = 0; p.opList != nullptr && i < p.numOps; ++i) {
    const cudaMemcpy3DBatchOp& op = p.opList[i];
    bytes +=
        Batch3DBytes(op, op.src.type == cudaMemcpyOperandTypeArray, Addr(op.src.op.array.array),
                     op.dst.type == cudaMemcpyOperandTypeArray, Addr(op.dst.op.array.array));
  }
  SetCopy(c, bytes, CopyKind::kUnknown, true);
  c->copy.records = static_cast<uint32_t>(p.numOps);
  return p.numOps > 0;
}

template <typename P>
bool ReadMemcpy3DBatchDriver(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  uint64_t bytes = 0;
  for (size_t i = 0; p.opList != nullptr && i < p.numOps; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = p.opList[i];
    bytes +=
        Batch3DBytes(op, op.src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY, Addr(op.src.op.array.array),
                     op.dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY, Addr(op.dst.op.array.array));
  }
  SetCopy(c, bytes, CopyKind::kUnknown, true);
  c->copy.records = static_cast<uint32_t>(p.numOps);
  return p.numOps > 0;
}

// Driver copies with a fixed direction: ByteCount.
template <typename P, CopyKind kKind, bool kAsync>
bool ReadDriverCopy(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return SetCopy(c, p.ByteCount, kKind, kAsync, SrcOf(p), DstOf(p));
}

// CUDA_MEMCPY2D, CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER: WidthInBytes even for arrays.
template <typename P, bool kAsync>
bool ReadDriverCopy2D(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const CUDA_MEMCPY2D* p = Params<P>(d).pCopy;
  if (p == nullptr) return false;
  return SetCopy(c, Volume(p->WidthInBytes, p->Height, 1),
                 FromMemoryTypes(p->srcMemoryType, p->dstMemoryType), kAsync, DescriptorSrc(*p),
                 DescriptorDst(*p));
}

template <typename P, bool kAsync>
bool ReadDriverCopy3D(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const CUDA_MEMCPY3D* p = Params<P>(d).pCopy;
  if (p == nullptr) return false;
  return SetCopy(c, Volume(p->WidthInBytes, p->Height, p->Depth),
                 FromMemoryTypes(p->srcMemoryType, p->dstMemoryType), kAsync, DescriptorSrc(*p),
                 DescriptorDst(*p));
}

template <typename P, bool kAsync>
bool ReadDriverCopy3DPeer(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const CUDA_MEMCPY3D_PEER* p = Params<P>(d).pCopy;
  if (p == nullptr) return false;
  return SetCopy(c, Volume(p->WidthInBytes, p->Height, p->Depth), CopyKind::kPeer, kAsync);
}

// --- Graph nodes: recorded now, done at every launch -----------------------------

bool NodeOnly(ParsedCall* c, bool parsed) {
  c->node_only = true;
  return parsed;
}

template <typename P>
bool ReadGraphMemcpyNode(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const cudaMemcpy3DParms* p = Params<P>(d).pCopyParams;
  if (p == nullptr) return false;
  return NodeOnly(
      c, SetCopy(c, Bytes3D(*p), FromRuntimeKind(p->kind), true, Parms3DSrc(*p), Parms3DDst(*p)));
}

template <typename P>
bool ReadGraphMemcpyNode1D(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return NodeOnly(c, SetCopy(c, p.count, FromRuntimeKind(p.kind), true, SrcOf(p), DstOf(p)));
}

template <typename P>
bool ReadGraphMemcpyNodeToSymbol(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return NodeOnly(c,
                  SetCopy(c, p.count, OrDefault(p.kind, CopyKind::kHostToDevice), true, SrcOf(p)));
}

template <typename P>
bool ReadGraphMemcpyNodeFromSymbol(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  return NodeOnly(
      c, SetCopy(c, p.count, OrDefault(p.kind, CopyKind::kDeviceToHost), true, 0, DstOf(p)));
}

template <typename P>
bool ReadDriverGraphMemcpyNode(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const CUDA_MEMCPY3D* p = Params<P>(d).copyParams;
  if (p == nullptr) return false;
  return NodeOnly(c, SetCopy(c, Volume(p->WidthInBytes, p->Height, p->Depth),
                             FromMemoryTypes(p->srcMemoryType, p->dstMemoryType), true,
                             DescriptorSrc(*p), DescriptorDst(*p)));
}

template <typename Params>
bool SetGraphAlloc(ParsedCall* c, const Params* p, bool ok) {
  if (p == nullptr) return false;
  SetAlloc(c, ok ? Addr(p->dptr) : 0, p->bytesize, MemKind::kGraph);
  c->device = static_cast<int>(p->poolProps.location.type) == CU_MEM_LOCATION_TYPE_DEVICE
                  ? p->poolProps.location.id
                  : -1;
  return NodeOnly(c, true);
}

template <typename P>
bool ReadGraphMemAllocNode(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  return SetGraphAlloc(c, Params<P>(d).nodeParams, ok);
}

template <typename P>
bool ReadGraphMemFreeNode(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return NodeOnly(c, SetFree(c, Addr(Params<P>(d).dptr)));
}

// cudaGraphAddNode / cuGraphAddNode: the node types gpuwatch follows.
template <typename P>
bool ReadGraphAddNodeRuntime(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const cudaGraphNodeParams* p = Params<P>(d).nodeParams;
  if (p == nullptr) return false;
  switch (p->type) {
    case cudaGraphNodeTypeMemcpy: {
      const cudaMemcpy3DParms& m = p->memcpy.copyParams;
      return NodeOnly(
          c, SetCopy(c, Bytes3D(m), FromRuntimeKind(m.kind), true, Parms3DSrc(m), Parms3DDst(m)));
    }
    case cudaGraphNodeTypeMemAlloc:
      return SetGraphAlloc(c, &p->alloc, ok);
    case cudaGraphNodeTypeMemFree:
      return NodeOnly(c, SetFree(c, Addr(p->free.dptr)));
    default:
      return false;
  }
}

template <typename P>
bool ReadGraphAddNodeDriver(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const CUgraphNodeParams* p = Params<P>(d).nodeParams;
  if (p == nullptr) return false;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      const CUDA_MEMCPY3D& m = p->memcpy.copyParams;
      return NodeOnly(c, SetCopy(c, Volume(m.WidthInBytes, m.Height, m.Depth),
                                 FromMemoryTypes(m.srcMemoryType, m.dstMemoryType), true,
                                 DescriptorSrc(m), DescriptorDst(m)));
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      return SetGraphAlloc(c, &p->alloc, ok);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return NodeOnly(c, SetFree(c, p->free.dptr));
    default:
      return false;
  }
}

template <typename P>
bool ReadGraphLaunchRuntime(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  c->role = Role::kGraphLaunch;
  c->graph_exec = Params<P>(d).graphExec;
  return true;
}

template <typename P>
bool ReadGraphLaunchDriver(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  c->role = Role::kGraphLaunch;
  const auto& p = Params<P>(d);
  if constexpr (requires { p.hGraphExec; }) {
    c->graph_exec = p.hGraphExec;
  } else {
    c->graph_exec = p.hGraph;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The registry. One line per callback id; variants are listed beside their
// base API so that a missing one is easy to see (calls_test.cc checks the
// list against every id in CUPTI's headers).

constexpr CallbackSpec Rt(CUpti_CallbackId cbid, const char* name, Role role, ParseFn parse,
                          SyncKind sync = SyncKind::kDevice) {
  return {name, parse, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, role, sync};
}
constexpr CallbackSpec Drv(CUpti_CallbackId cbid, const char* name, Role role, ParseFn parse,
                           SyncKind sync = SyncKind::kDevice) {
  return {name, parse, CUPTI_CB_DOMAIN_DRIVER_API, cbid, role, sync};
}

// RT(name, role, reader): the reader is instantiated on the call's own params struct.
// NOLINTBEGIN(bugprone-macro-parentheses): a reader is a template's name, not an expression.
#define RT(name, role, ...) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, &__VA_ARGS__<name##_params>)
#define RTA(name, role, reader, async) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, &reader<name##_params, (async)>)
#define RT0(name, role, ...) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, nullptr, ##__VA_ARGS__)
#define DRV(name, role, ...) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, &__VA_ARGS__<name##_params>)
#define DRVA(name, role, reader, async) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, &reader<name##_params, (async)>)
#define DRVK(name, kind, async)                           \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::kCopy, \
      &ReadDriverCopy<name##_params, CopyKind::kind, (async)>)
#define DRV0(name, role, ...) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, nullptr, ##__VA_ARGS__)
// NOLINTEND(bugprone-macro-parentheses)

constexpr bool kSync = false;
constexpr bool kAsync = true;

// clang-format off
constexpr CallbackSpec kRegistry[] = {
    // Runtime: allocations.
    RT(cudaMalloc_v3020, kAlloc, ReadMalloc),
    RT(cudaMallocPitch_v3020, kAlloc, ReadMallocPitch),
    RT(cudaMalloc3D_v3020, kAlloc, ReadMalloc3D),
    RT(cudaMallocManaged_v6000, kAlloc, ReadMallocManaged),
    RT(cudaMallocAsync_v11020, kAlloc, ReadMallocAsync),
    RT(cudaMallocAsync_ptsz_v11020, kAlloc, ReadMallocAsync),
    RT(cudaMallocFromPoolAsync_v11020, kAlloc, ReadMallocFromPoolAsync),
    RT(cudaMallocFromPoolAsync_ptsz_v11020, kAlloc, ReadMallocFromPoolAsync),
    RT(cudaMallocHost_v3020, kAlloc, ReadMallocHost),
    RT(cudaHostAlloc_v3020, kAlloc, ReadHostAlloc),
    RT(cudaHostRegister_v4000, kAlloc, ReadHostRegister),
    RT(cudaMallocArray_v3020, kAlloc, ReadMallocArray),
    RT(cudaMalloc3DArray_v3020, kAlloc, ReadMalloc3DArray),
    RT(cudaMallocMipmappedArray_v5000, kAlloc, ReadMallocMipmappedArray),
    // Runtime: frees.
    RT(cudaFree_v3020, kFree, ReadFreeDevPtr),
    RT(cudaFreeAsync_v11020, kFree, ReadFreeDevPtr),
    RT(cudaFreeAsync_ptsz_v11020, kFree, ReadFreeDevPtr),
    RT(cudaFreeHost_v3020, kFree, ReadFreePtr),
    RT(cudaHostUnregister_v4000, kFree, ReadFreePtr),
    RT(cudaFreeArray_v3020, kFree, ReadFreeArray),
    RT(cudaFreeMipmappedArray_v5000, kFree, ReadFreeMipmappedArray),
    // Runtime: copies.
    RTA(cudaMemcpy_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpy_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpy2D_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2D_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy3D_v3020, kCopy, ReadMemcpy3D, kSync),
    RTA(cudaMemcpy3D_ptds_v7000, kCopy, ReadMemcpy3D, kSync),
    RTA(cudaMemcpy3DAsync_v3020, kCopy, ReadMemcpy3D, kAsync),
    RTA(cudaMemcpy3DAsync_ptsz_v7000, kCopy, ReadMemcpy3D, kAsync),
    RTA(cudaMemcpyPeer_v4000, kCopy, ReadMemcpyPeer, kSync),
    RTA(cudaMemcpyPeerAsync_v4000, kCopy, ReadMemcpyPeer, kAsync),
    RTA(cudaMemcpy3DPeer_v4000, kCopy, ReadMemcpy3DPeer, kSync),
    RTA(cudaMemcpy3DPeer_ptds_v7000, kCopy, ReadMemcpy3DPeer, kSync),
    RTA(cudaMemcpy3DPeerAsync_v4000, kCopy, ReadMemcpy3DPeer, kAsync),
    RTA(cudaMemcpy3DPeerAsync_ptsz_v7000, kCopy, ReadMemcpy3DPeer, kAsync),
    RTA(cudaMemcpyToSymbol_v3020, kCopy, ReadMemcpyToSymbol, kSync),
    RTA(cudaMemcpyToSymbol_ptds_v7000, kCopy, ReadMemcpyToSymbol, kSync),
    RTA(cudaMemcpyToSymbolAsync_v3020, kCopy, ReadMemcpyToSymbol, kAsync),
    RTA(cudaMemcpyToSymbolAsync_ptsz_v7000, kCopy, ReadMemcpyToSymbol, kAsync),
    RTA(cudaMemcpyFromSymbol_v3020, kCopy, ReadMemcpyFromSymbol, kSync),
    RTA(cudaMemcpyFromSymbol_ptds_v7000, kCopy, ReadMemcpyFromSymbol, kSync),
    RTA(cudaMemcpyFromSymbolAsync_v3020, kCopy, ReadMemcpyFromSymbol, kAsync),
    RTA(cudaMemcpyFromSymbolAsync_ptsz_v7000, kCopy, ReadMemcpyFromSymbol, kAsync),
    RTA(cudaMemcpyToArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyToArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyToArrayAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyToArrayAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyFromArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyFromArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyFromArrayAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyFromArrayAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyArrayToArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyArrayToArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpy2DToArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DToArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DToArrayAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DToArrayAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DFromArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DFromArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DFromArrayAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DFromArrayAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DArrayToArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DArrayToArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RT(cudaMemcpyBatchAsync_v13000, kCopy, ReadMemcpyBatch),
    RT(cudaMemcpyBatchAsync_ptsz_v13000, kCopy, ReadMemcpyBatch),
    RT(cudaMemcpy3DBatchAsync_v13000, kCopy, ReadMemcpy3DBatchRuntime),
    RT(cudaMemcpy3DBatchAsync_ptsz_v13000, kCopy, ReadMemcpy3DBatchRuntime),
    // Runtime: graph nodes that allocate, free or copy at each launch.
    RT(cudaGraphAddMemcpyNode_v10000, kCopy, ReadGraphMemcpyNode),
    RT(cudaGraphAddMemcpyNode1D_v11010, kCopy, ReadGraphMemcpyNode1D),
    RT(cudaGraphAddMemcpyNodeToSymbol_v11010, kCopy, ReadGraphMemcpyNodeToSymbol),
    RT(cudaGraphAddMemcpyNodeFromSymbol_v11010, kCopy, ReadGraphMemcpyNodeFromSymbol),
    RT(cudaGraphAddMemAllocNode_v11040, kAlloc, ReadGraphMemAllocNode),
    RT(cudaGraphAddMemFreeNode_v11040, kFree, ReadGraphMemFreeNode),
    RT(cudaGraphAddNode_v12030, kGraphNode, ReadGraphAddNodeRuntime),
    RT0(cudaGraphInstantiate_v10000, kInstantiate),
    RT0(cudaGraphInstantiate_v12000, kInstantiate),
    RT0(cudaGraphInstantiateWithFlags_v11040, kInstantiate),
    RT0(cudaGraphInstantiateWithParams_v12000, kInstantiate),
    RT0(cudaGraphInstantiateWithParams_ptsz_v12000, kInstantiate),
    // Runtime: launches.
    RT0(cudaLaunchKernel_v7000, kLaunch),
    RT0(cudaLaunchKernel_ptsz_v7000, kLaunch),
    RT0(cudaLaunchKernelExC_v11060, kLaunch),
    RT0(cudaLaunchKernelExC_ptsz_v11060, kLaunch),
    RT0(__cudaLaunchKernel_v13000, kLaunch),
    RT0(__cudaLaunchKernel_ptsz_v13000, kLaunch),
    RT0(cudaLaunchCooperativeKernel_v9000, kLaunch),
    RT0(cudaLaunchCooperativeKernel_ptsz_v9000, kLaunch),
    RT(cudaGraphLaunch_v10000, kGraphLaunch, ReadGraphLaunchRuntime),
    RT(cudaGraphLaunch_ptsz_v10000, kGraphLaunch, ReadGraphLaunchRuntime),
    // Runtime: where the host waits.
    RT0(cudaDeviceSynchronize_v3020, kSync, SyncKind::kDevice),
    RT0(cudaThreadSynchronize_v3020, kSync, SyncKind::kDevice),
    RT0(cudaStreamSynchronize_v3020, kSync, SyncKind::kStream),
    RT0(cudaStreamSynchronize_ptsz_v7000, kSync, SyncKind::kStream),
    RT0(cudaEventSynchronize_v3020, kSync, SyncKind::kEvent),

    // Driver: allocations.
    DRV(cuMemAlloc_v2, kAlloc, ReadMemAlloc),
    DRV(cuMemAllocPitch_v2, kAlloc, ReadMemAllocPitch),
    DRV(cuMemAllocManaged, kAlloc, ReadMemAllocManaged),
    DRV(cuMemAllocAsync, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocAsync_ptsz, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocFromPoolAsync, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocFromPoolAsync_ptsz, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocHost_v2, kAlloc, ReadMemAllocHost),
    DRV(cuMemHostAlloc, kAlloc, ReadMemAllocHost),
    DRV(cuMemHostRegister_v2, kAlloc, ReadMemHostRegister),
    DRV(cuArrayCreate_v2, kAlloc, ReadArrayCreate),
    DRV(cuArray3DCreate_v2, kAlloc, ReadArray3DCreate),
    DRV(cuMipmappedArrayCreate, kAlloc, ReadMipmappedArrayCreate),
    DRV(cuMemCreate, kVmmCreate, ReadMemCreate),
    DRV(cuMemRelease, kVmmRelease, ReadMemRelease),
    DRV(cuMemMap, kAlloc, ReadMemMap),
    DRV(cuMemUnmap, kVmmUnmap, ReadMemUnmap),
    // Driver: frees.
    DRV(cuMemFree_v2, kFree, ReadMemFree),
    DRV(cuMemFreeAsync, kFree, ReadMemFree),
    DRV(cuMemFreeAsync_ptsz, kFree, ReadMemFree),
    DRV(cuMemFreeHost, kFree, ReadMemFreeHost),
    DRV(cuMemHostUnregister, kFree, ReadMemFreeHost),
    DRV(cuArrayDestroy, kFree, ReadArrayDestroy),
    DRV(cuMipmappedArrayDestroy, kFree, ReadMipmappedArrayDestroy),
    // Driver: copies.
    DRVK(cuMemcpyHtoD_v2, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoD_v2_ptds, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoDAsync_v2, kHostToDevice, kAsync),
    DRVK(cuMemcpyHtoDAsync_v2_ptsz, kHostToDevice, kAsync),
    DRVK(cuMemcpyDtoH_v2, kDeviceToHost, kSync),
    DRVK(cuMemcpyDtoH_v2_ptds, kDeviceToHost, kSync),
    DRVK(cuMemcpyDtoHAsync_v2, kDeviceToHost, kAsync),
    DRVK(cuMemcpyDtoHAsync_v2_ptsz, kDeviceToHost, kAsync),
    DRVK(cuMemcpyDtoD_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoD_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoDAsync_v2, kDeviceToDevice, kAsync),
    DRVK(cuMemcpyDtoDAsync_v2_ptsz, kDeviceToDevice, kAsync),
    DRVK(cuMemcpyHtoA_v2, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoA_v2_ptds, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoAAsync_v2, kHostToDevice, kAsync),
    DRVK(cuMemcpyHtoAAsync_v2_ptsz, kHostToDevice, kAsync),
    DRVK(cuMemcpyAtoH_v2, kDeviceToHost, kSync),
    DRVK(cuMemcpyAtoH_v2_ptds, kDeviceToHost, kSync),
    DRVK(cuMemcpyAtoHAsync_v2, kDeviceToHost, kAsync),
    DRVK(cuMemcpyAtoHAsync_v2_ptsz, kDeviceToHost, kAsync),
    DRVK(cuMemcpyAtoD_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoD_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoA_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoA_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoA_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoA_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpy, kUnknown, kSync),
    DRVK(cuMemcpy_ptds, kUnknown, kSync),
    DRVK(cuMemcpyAsync, kUnknown, kAsync),
    DRVK(cuMemcpyAsync_ptsz, kUnknown, kAsync),
    DRVK(cuMemcpyPeer, kPeer, kSync),
    DRVK(cuMemcpyPeer_ptds, kPeer, kSync),
    DRVK(cuMemcpyPeerAsync, kPeer, kAsync),
    DRVK(cuMemcpyPeerAsync_ptsz, kPeer, kAsync),
    DRVA(cuMemcpy2D_v2, kCopy, ReadDriverCopy2D, kSync),
    DRVA(cuMemcpy2D_v2_ptds, kCopy, ReadDriverCopy2D, kSync),
    DRVA(cuMemcpy2DUnaligned_v2, kCopy, ReadDriverCopy2D, kSync),
    DRVA(cuMemcpy2DUnaligned_v2_ptds, kCopy, ReadDriverCopy2D, kSync),
    DRVA(cuMemcpy2DAsync_v2, kCopy, ReadDriverCopy2D, kAsync),
    DRVA(cuMemcpy2DAsync_v2_ptsz, kCopy, ReadDriverCopy2D, kAsync),
    DRVA(cuMemcpy3D_v2, kCopy, ReadDriverCopy3D, kSync),
    DRVA(cuMemcpy3D_v2_ptds, kCopy, ReadDriverCopy3D, kSync),
    DRVA(cuMemcpy3DAsync_v2, kCopy, ReadDriverCopy3D, kAsync),
    DRVA(cuMemcpy3DAsync_v2_ptsz, kCopy, ReadDriverCopy3D, kAsync),
    DRVA(cuMemcpy3DPeer, kCopy, ReadDriverCopy3DPeer, kSync),
    DRVA(cuMemcpy3DPeer_ptds, kCopy, ReadDriverCopy3DPeer, kSync),
    DRVA(cuMemcpy3DPeerAsync, kCopy, ReadDriverCopy3DPeer, kAsync),
    DRVA(cuMemcpy3DPeerAsync_ptsz, kCopy, ReadDriverCopy3DPeer, kAsync),
    DRV(cuMemcpyBatchAsync, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_ptsz, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_v2, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_v2_ptsz, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpy3DBatchAsync, kCopy, ReadMemcpy3DBatchDriver),
    DRV(cuMemcpy3DBatchAsync_ptsz, kCopy, ReadMemcpy3DBatchDriver),
    DRV(cuMemcpy3DBatchAsync_v2, kCopy, ReadMemcpy3DBatchDriver),
    DRV(cuMemcpy3DBatchAsync_v2_ptsz, kCopy, ReadMemcpy3DBatchDriver),
    // Driver: graph nodes.
    DRV(cuGraphAddMemcpyNode, kCopy, ReadDriverGraphMemcpyNode),
    DRV(cuGraphAddMemAllocNode, kAlloc, ReadGraphMemAllocNode),
    DRV(cuGraphAddMemFreeNode, kFree, ReadGraphMemFreeNode),
    DRV(cuGraphAddNode, kGraphNode, ReadGraphAddNodeDriver),
    DRV(cuGraphAddNode_v2, kGraphNode, ReadGraphAddNodeDriver),
    DRV0(cuGraphInstantiate_v2, kInstantiate),
    DRV0(cuGraphInstantiateWithFlags, kInstantiate),
    DRV0(cuGraphInstantiateWithParams, kInstantiate),
    DRV0(cuGraphInstantiateWithParams_ptsz, kInstantiate),
    // Driver: launches.
    DRV0(cuLaunchKernel, kLaunch),
    DRV0(cuLaunchKernel_ptsz, kLaunch),
    DRV0(cuLaunchKernelEx, kLaunch),
    DRV0(cuLaunchKernelEx_ptsz, kLaunch),
    DRV0(cuLaunchCooperativeKernel, kLaunch),
    DRV0(cuLaunchCooperativeKernel_ptsz, kLaunch),
    DRV(cuGraphLaunch, kGraphLaunch, ReadGraphLaunchDriver),
    DRV(cuGraphLaunch_ptsz, kGraphLaunch, ReadGraphLaunchDriver),
    // Driver: where the host waits.
    DRV0(cuCtxSynchronize, kSync, SyncKind::kDevice),
    DRV0(cuCtxSynchronize_v2, kSync, SyncKind::kDevice),
    DRV0(cuStreamSynchronize, kSync, SyncKind::kStream),
    DRV0(cuStreamSynchronize_ptsz, kSync, SyncKind::kStream),
    DRV0(cuEventSynchronize, kSync, SyncKind::kEvent),
};
// clang-format on

#undef RT
#undef RTA
#undef RT0
#undef DRV
#undef DRVA
#undef DRVK
#undef DRV0

constexpr CUpti_CallbackId kResourceCallbacks[] = {
    CUPTI_CBID_RESOURCE_CONTEXT_CREATED,        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,      CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,      CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
};

// Registry entries by callback id, per domain: filled once, read lock-free.
struct Index {
  std::array<const CallbackSpec*, CUPTI_RUNTIME_TRACE_CBID_SIZE> runtime{};
  std::array<const CallbackSpec*, CUPTI_DRIVER_TRACE_CBID_SIZE> driver{};
  Index() {
    for (const CallbackSpec& s : kRegistry) {
      if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API && s.cbid < runtime.size()) runtime[s.cbid] = &s;
      if (s.domain == CUPTI_CB_DOMAIN_DRIVER_API && s.cbid < driver.size()) driver[s.cbid] = &s;
    }
  }
};

const Index& TheIndex() {
  static const Index* index = new Index();  // never destroyed: callbacks may come during exit
  return *index;
}

struct ArrayShapes {
  Mutex mu;
  std::unordered_map<uint64_t, uint32_t> element_bytes;  // guarded by mu
};

ArrayShapes& Arrays() {
  static auto* arrays = new ArrayShapes();  // never destroyed, like every table of gpuwatch
  return *arrays;
}

}  // namespace

std::span<const CallbackSpec> CallbackRegistry() { return kRegistry; }

std::span<const CUpti_CallbackId> ResourceCallbacks() { return kResourceCallbacks; }

const CallbackSpec* FindSpec(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const Index& index = TheIndex();
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    return cbid < index.runtime.size() ? index.runtime[cbid] : nullptr;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    return cbid < index.driver.size() ? index.driver[cbid] : nullptr;
  }
  return nullptr;
}

bool ParseCall(const CallbackSpec& spec, const CUpti_CallbackData* data, bool succeeded,
               ParsedCall* out) {
  *out = ParsedCall{};
  out->role = spec.role;
  out->sync = spec.sync;
  if (spec.parse == nullptr) return true;
  if (data->functionParams == nullptr) return false;
  return spec.parse(data, succeeded, out);
}

void RememberArray(uint64_t handle, uint32_t element_bytes) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  a.element_bytes[handle] = element_bytes;
}

void ForgetArray(uint64_t handle) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  a.element_bytes.erase(handle);
}

uint32_t ArrayElementBytes(uint64_t handle) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  const auto it = a.element_bytes.find(handle);
  return it != a.element_bytes.end() ? it->second : 1;
}

bool EnableCallbacks(const CuptiApi& api, CUpti_SubscriberHandle subscriber, std::string* error) {
  const auto enable = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    const CUptiResult r = api.EnableCallback(1, subscriber, domain, cbid);
    if (r == CUPTI_SUCCESS) return true;
    const char* text = nullptr;
    api.GetResultString(r, &text);
    *error = "cuptiEnableCallback(domain " + std::to_string(domain) + ", id " +
             std::to_string(cbid) + ") failed: " + (text != nullptr ? text : "?");
    return false;
  };
  for (const CallbackSpec& s : kRegistry) {
    if (!enable(s.domain, s.cbid)) return false;
  }
  for (const CUpti_CallbackId cbid : kResourceCallbacks) {
    if (!enable(CUPTI_CB_DOMAIN_RESOURCE, cbid)) return false;
  }
  return true;
}

}  // namespace gpuwatch
