// Reading a CUDA call's generated `*_params` struct (calls.cc's registry,
// one reader per kind of call): the shared helpers, allocations and frees.
// Copies, graph nodes and graph launches are in copy_readers.h. Included by
// calls.cc alone; every reader is pure, tested through ParseCall.
#ifndef GPUWATCH_INTERPOSE_CALLS_CALL_READERS_H_
#define GPUWATCH_INTERPOSE_CALLS_CALL_READERS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "interpose/calls/calls.h"

namespace gpuwatch::call_readers {

// ---------------------------------------------------------------------------
// Reading params structs. Every reader is a template over the params type so
// that the `_ptsz`/`_ptds` variants, whose structs have the same members
// under another name, are read through their own type.

template <typename P>
const P& Params(const CUpti_CallbackData* d) {
  return *static_cast<const P*>(d->functionParams);
}

inline uint64_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline uint64_t Addr(CUdeviceptr p) { return p; }

// A kernel launch: its stream (the launch ring of libgpuwatch/record/cuda_errors.h).
template <typename P>
bool ReadLaunch(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  if constexpr (requires { p.stream; }) {
    c->stream = p.stream;
  } else if constexpr (requires { p.hStream; }) {
    c->stream = p.hStream;
  } else if constexpr (requires { p.config->stream; }) {
    if (p.config != nullptr) c->stream = p.config->stream;
  } else if constexpr (requires { p.config->hStream; }) {
    if (p.config != nullptr) c->stream = p.config->hStream;
  }
  return true;
}

// Where ReadLaunch finds the stream (CallbackSpec::stream_at).
template <typename P>
constexpr StreamAt LaunchStreamAt() {
  constexpr auto kAt = [](size_t offset, size_t in_config = StreamAt::kNone) {
    return StreamAt{static_cast<uint8_t>(offset), static_cast<uint8_t>(in_config)};
  };
  if constexpr (requires(const P& p) { p.stream; }) {
    static_assert(offsetof(P, stream) < StreamAt::kNone);
    return kAt(offsetof(P, stream));
  } else if constexpr (requires(const P& p) { p.hStream; }) {
    static_assert(offsetof(P, hStream) < StreamAt::kNone);
    return kAt(offsetof(P, hStream));
  } else if constexpr (requires(const P& p) { p.config->stream; }) {
    using Config = std::remove_cvref_t<decltype(*std::declval<P>().config)>;
    static_assert(offsetof(P, config) < StreamAt::kNone &&
                  offsetof(Config, stream) < StreamAt::kNone);
    return kAt(offsetof(P, config), offsetof(Config, stream));
  } else if constexpr (requires(const P& p) { p.config->hStream; }) {
    using Config = std::remove_cvref_t<decltype(*std::declval<P>().config)>;
    static_assert(offsetof(P, config) < StreamAt::kNone &&
                  offsetof(Config, hStream) < StreamAt::kNone);
    return kAt(offsetof(P, config), offsetof(Config, hStream));
  } else {
    return StreamAt{};
  }
}

inline CopyKind FromRuntimeKind(cudaMemcpyKind kind) {
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
inline CopyKind OrDefault(cudaMemcpyKind kind, CopyKind fallback) {
  return kind == cudaMemcpyDefault ? fallback : FromRuntimeKind(kind);
}

// The direction of a driver copy between two CUmemorytypes (unified memory:
// resolved later).
inline CopyKind FromMemoryTypes(CUmemorytype src, CUmemorytype dst) {
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

inline bool SetCopy(ParsedCall* c, uint64_t bytes, CopyKind kind, bool async, uint64_t src = 0,
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
inline uint64_t DescriptorSide(CUmemorytype type, const void* host, CUdeviceptr device,
                               CUarray array) {
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
inline uint64_t Parms3DSrc(const cudaMemcpy3DParms& p) {
  return p.srcArray != nullptr ? Addr(p.srcArray) : Addr(p.srcPtr.ptr);
}
inline uint64_t Parms3DDst(const cudaMemcpy3DParms& p) {
  return p.dstArray != nullptr ? Addr(p.dstArray) : Addr(p.dstPtr.ptr);
}

inline bool SetAlloc(ParsedCall* c, uint64_t address, uint64_t size, MemKind kind,
                     const void* stream = nullptr) {
  c->role = Role::kAlloc;
  c->address = address;
  c->size = size;
  c->kind = kind;
  c->stream = stream;
  return true;
}

inline bool SetFree(ParsedCall* c, uint64_t address) {
  c->role = Role::kFree;
  c->address = address;
  return true;
}

inline uint64_t Volume(uint64_t width, uint64_t height, uint64_t depth) {
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

inline uint32_t ChannelBytes(const cudaChannelFormatDesc* desc) {
  if (desc == nullptr) return 1;
  const int bits = desc->x + desc->y + desc->z + desc->w;
  return bits >= 8 ? static_cast<uint32_t>(bits / 8) : 1;
}

inline bool SetArray(ParsedCall* c, uint64_t handle, uint64_t elements, uint32_t element_bytes) {
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
inline uint64_t MipmapElements(uint64_t width, uint64_t height, uint64_t depth, unsigned levels,
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

inline uint32_t FormatBytes(CUarray_format format, unsigned channels) {
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

// VMM: the memory is the physical handle's (cuMemCreate), as the driver
// counts it; a mapping (cuMemMap) adds none. A failed cuMemCreate is the VMM
// out-of-memory.
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
bool ReadMemMap(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kVmmMap;
  c->kind = MemKind::kVmm;
  c->handle = p.handle;
  c->address = p.ptr;
  c->size = p.size;
  return true;
}

// Another process's memory (an exported handle): counted apart, never this
// process's allocation.
template <typename P>
bool ReadMemImport(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kVmmImport;
  c->kind = MemKind::kVmmImported;
  c->handle = ok && p.handle != nullptr ? *p.handle : 0;
  return true;
}

// The handle mapped at an address, one reference more (to be released).
template <typename P>
bool ReadMemRetain(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kVmmRetain;
  c->handle = ok && p.handle != nullptr ? *p.handle : 0;
  c->address = Addr(p.addr);
  return true;
}

// CUDA IPC: another process's cudaMalloc memory mapped here, counted apart
// and never this process's allocation. The open says the address (at a
// successful EXIT), not the size; the close names the mapping.
template <typename P>
bool ReadIpcOpen(const CUpti_CallbackData* d, bool ok, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kIpcOpen;
  c->kind = MemKind::kIpcImported;
  if constexpr (requires { p.pdptr; }) {
    c->address = ok && p.pdptr != nullptr ? *p.pdptr : 0;  // cuIpcOpenMemHandle(_v2)
  } else {
    c->address = ok && p.devPtr != nullptr ? Addr(*p.devPtr) : 0;  // cudaIpcOpenMemHandle
  }
  return true;
}

template <typename P>
bool ReadIpcClose(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  c->role = Role::kIpcClose;
  if constexpr (requires { p.dptr; }) {
    c->address = Addr(p.dptr);  // cuIpcCloseMemHandle
  } else {
    c->address = Addr(p.devPtr);  // cudaIpcCloseMemHandle
  }
  return true;
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

// What a freeing call releases, by whichever name its params struct gives it.
template <typename P>
uint64_t ReleasedAddress(const P& p) {
  if constexpr (requires { p.devPtr; }) {
    return Addr(p.devPtr);  // cudaFree, cudaFreeAsync
  } else if constexpr (requires { p.dptr; }) {
    return Addr(p.dptr);  // cuMemFree, cuMemFreeAsync
  } else if constexpr (requires { p.ptr; }) {
    return Addr(p.ptr);  // cudaFreeHost, cudaHostUnregister
  } else if constexpr (requires { p.p; }) {
    return Addr(p.p);  // cuMemFreeHost, cuMemHostUnregister
  } else if constexpr (requires { p.array; }) {
    return Addr(p.array);  // cudaFreeArray
  } else if constexpr (requires { p.mipmappedArray; }) {
    return Addr(p.mipmappedArray);  // cudaFreeMipmappedArray
  } else if constexpr (requires { p.hArray; }) {
    return Addr(p.hArray);  // cuArrayDestroy
  } else {
    return Addr(p.hMipmappedArray);  // cuMipmappedArrayDestroy
  }
}

template <typename P>
bool ReadFree(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  return SetFree(c, ReleasedAddress(Params<P>(d)));
}

}  // namespace gpuwatch::call_readers

#endif  // GPUWATCH_INTERPOSE_CALLS_CALL_READERS_H_
