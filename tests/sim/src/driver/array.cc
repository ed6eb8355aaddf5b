#include "driver/array.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "common/leaked.h"
#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

constexpr size_t kMmapThreshold = 1u << 20;

// The flags cuArray3DCreate knows, and those the simulator models (sparse and deferred-mapping
// arrays have no backing, depth/colour/video arrays belong to graphics interop).
constexpr unsigned kKnownFlags =
    CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
    CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE | CUDA_ARRAY3D_COLOR_ATTACHMENT |
    CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_VIDEO_ENCODE_DECODE;
constexpr unsigned kSimulatedFlags = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST |
                                     CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_TEXTURE_GATHER;

// Size limits of a compute capability 9.0 device, in elements.
enum SizeLimit : size_t {
  kMax1D = 131072,
  kMax2DWidth = 131072,
  kMax2DHeight = 65536,
  kMax3D = 16384,
  kMaxLayeredDim = 32768,
  kMaxLayers = 2048,
  kMaxCubemapLayers = 2046,
  kMaxGather = 32768,
};

struct Registry {
  std::mutex mu;
  std::unordered_set<CUarray_st*> arrays;  // standalone arrays and the levels of mipmaps
  std::unordered_set<CUmipmappedArray_st*> mipmaps;
  // Destroyed handles are kept (never freed), so that a stale handle stays readable.
  std::vector<const void*> retired;
};

Registry& R() { return Leaked<Registry>(); }  // never destroyed, like the rest of the state

// Bytes per channel of the classic formats; CUDA_ERROR_NOT_SUPPORTED for the formats the
// simulator does not model (normalized, block-compressed and video formats).
CUresult ChannelBytes(CUarray_format format, size_t* out) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      *out = 1;
      return CUDA_SUCCESS;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      *out = 2;
      return CUDA_SUCCESS;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      *out = 4;
      return CUDA_SUCCESS;
    default:
      break;
  }
  const unsigned f = static_cast<unsigned>(format);
  const bool known = f == 0x50 || (f >= 0x91 && f <= 0x9f) || (f >= 0xa1 && f <= 0xa9) ||
                     (f >= 0xb0 && f <= 0xb5) || (f >= 0xc0 && f <= 0xcb);
  return known ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

// Validates a descriptor as cuArray3DCreate documents it and returns the element size.
CUresult CheckDescriptor(const CUDA_ARRAY3D_DESCRIPTOR& d, size_t* element_size) {
  size_t channel = 0;
  if (CUresult r = ChannelBytes(d.Format, &channel); r != CUDA_SUCCESS) return r;
  if (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((d.Flags & ~kKnownFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((d.Flags & ~kSimulatedFlags) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  const size_t w = d.Width;
  const size_t h = d.Height;
  const size_t z = d.Depth;
  const bool layered = (d.Flags & CUDA_ARRAY3D_LAYERED) != 0;
  const bool cubemap = (d.Flags & CUDA_ARRAY3D_CUBEMAP) != 0;
  const bool gather = (d.Flags & CUDA_ARRAY3D_TEXTURE_GATHER) != 0;
  bool ok = false;
  if (w == 0) {
    ok = false;
  } else if (gather) {  // 2D arrays only
    ok = !layered && !cubemap && h > 0 && z == 0 && w <= kMaxGather && h <= kMaxGather;
  } else if (cubemap) {  // square faces, six per cubemap
    ok = w == h && w <= kMaxLayeredDim &&
         (layered ? z > 0 && z % 6 == 0 && z <= kMaxCubemapLayers : z == 6);
  } else if (layered) {  // 1D layered (height 0) or 2D layered; depth counts the layers
    ok = z > 0 && z <= kMaxLayers && w <= kMaxLayeredDim && h <= kMaxLayeredDim;
  } else if (z > 0) {
    ok = h > 0 && w <= kMax3D && h <= kMax3D && z <= kMax3D;
  } else if (h > 0) {
    ok = w <= kMax2DWidth && h <= kMax2DHeight;
  } else {
    ok = w <= kMax1D;
  }
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  *element_size = channel * d.NumChannels;
  return CUDA_SUCCESS;
}

size_t AtLeastOne(size_t n) { return n == 0 ? 1 : n; }

// The descriptor of mipmap level `level` (layers and cubemap faces do not shrink).
CUDA_ARRAY3D_DESCRIPTOR LevelDescriptor(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned level) {
  CUDA_ARRAY3D_DESCRIPTOR l = d;
  l.Width = AtLeastOne(d.Width >> level);
  l.Height = d.Height == 0 ? 0 : AtLeastOne(d.Height >> level);
  const bool keeps_depth = (d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  l.Depth = keeps_depth || d.Depth == 0 ? d.Depth : AtLeastOne(d.Depth >> level);
  return l;
}

uint64_t StorageBytes(const CUDA_ARRAY3D_DESCRIPTOR& d, size_t element_size) {
  return uint64_t{d.Width} * AtLeastOne(d.Height) * AtLeastOne(d.Depth) * element_size;
}

uint64_t RoundUp(uint64_t n) {
  return (n + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}

// Allocates `bytes` (a multiple of 512) of storage in ctx, charged against its device.
CUresult AllocateStorage(CUctx_st* ctx, uint64_t bytes, Allocation* out) {
  const int device = ctx->device;
  if (bytes > SIZE_MAX || !Charge(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t size = static_cast<size_t>(bytes);
  const bool mmapped = size >= kMmapThreshold;
  void* mem = nullptr;
  if (mmapped) {
    mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
    if (mem == MAP_FAILED) mem = nullptr;
  } else {
    mem = std::aligned_alloc(kAllocAlignment, size);
  }
  if (mem == nullptr) {
    Uncharge(device, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a{.base = reinterpret_cast<uintptr_t>(mem),
               .size = size,
               .origin = Origin::kArray,
               .memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
               .device = device,
               .ctx = ctx,
               .backing = mem,
               .backing_size = size,
               .mmapped = mmapped,
               .charged = bytes,
               .buffer_id = D().next_buffer_id.fetch_add(1)};
  if (!D().memory.Insert(a)) {  // cannot happen for fresh memory; keep the table consistent
    ReleaseBacking(a);
    return CUDA_ERROR_UNKNOWN;
  }
  *out = a;
  return CUDA_SUCCESS;
}

// MEMORY2 records of arrays carry the handle as their address and the array's bytes.
void RecordArray(CUpti_ActivityMemoryOperationType op, const void* handle, uint64_t bytes,
                 const Allocation& storage) {
  Allocation shown = storage;
  shown.base = reinterpret_cast<uintptr_t>(handle);
  shown.size = static_cast<size_t>(bytes);
  EmitMemoryRecord(op, shown, false, CUPTI_INVALID_STREAM_ID);
}

// Removes the storage of a destroyed array or mipmap, if its context still holds it.
std::optional<Allocation> TakeStorage(uintptr_t base, uint64_t buffer_id) {
  return D().memory.RemoveIf(base, [buffer_id](const Allocation& a) {
    return a.origin == Origin::kArray && a.buffer_id == buffer_id;
  });
}

bool StorageAlive(uintptr_t base, uint64_t buffer_id) {
  const std::optional<Allocation> a = D().memory.Find(base);
  return a && a->base == base && a->origin == Origin::kArray && a->buffer_id == buffer_id;
}

uint64_t LogicalBytes(const CUmipmappedArray_st& m) {
  uint64_t total = 0;
  for (const CUarray_st* level : m.level_arrays)
    total += StorageBytes(level->desc, level->element_size);
  return total;
}

// Copies `array` to *out if it is a live array: registered, and its storage not freed.
bool LiveArray(CUarray array, CUarray_st* out) {
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    if (array == nullptr || r.arrays.count(array) == 0) return false;
    *out = *array;
  }
  return StorageAlive(out->base, out->buffer_id);
}

}  // namespace

CUresult ViewArray(CUarray array, ArrayView* out) {
  CUarray_st a;
  if (!LiveArray(array, &a)) return CUDA_ERROR_INVALID_VALUE;
  out->storage = a.storage;
  out->element_size = a.element_size;
  out->row_bytes = a.desc.Width * a.element_size;
  out->height = AtLeastOne(a.desc.Height);
  out->depth = AtLeastOne(a.desc.Depth);
  out->one_dimensional = a.desc.Height == 0 && a.desc.Depth == 0;
  return CUDA_SUCCESS;
}

CUresult ArrayCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t element_size = 0;
  if (CUresult r = CheckDescriptor(*desc, &element_size); r != CUDA_SUCCESS) return r;
  const uint64_t bytes = StorageBytes(*desc, element_size);
  Allocation storage;
  if (CUresult r = AllocateStorage(ctx, RoundUp(bytes), &storage); r != CUDA_SUCCESS) return r;
  auto* a = new CUarray_st();
  a->desc = *desc;
  a->element_size = element_size;
  a->storage = storage.base;
  a->base = storage.base;
  a->buffer_id = storage.buffer_id;
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    r.arrays.insert(a);
  }
  RecordArray(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, a, bytes, storage);
  *handle = a;
  return CUDA_SUCCESS;
}

CUresult ArrayDestroy(CUarray array) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    // A level belongs to its mipmapped array: only cuMipmappedArrayDestroy frees it.
    if (array == nullptr || r.arrays.count(array) == 0 || array->owner != nullptr) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    r.arrays.erase(array);
    r.retired.push_back(array);
  }
  std::optional<Allocation> storage = TakeStorage(array->base, array->buffer_id);
  if (!storage) return CUDA_ERROR_INVALID_HANDLE;  // its context was destroyed
  // Recorded before the memory goes back, as for device memory.
  RecordArray(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, array,
              StorageBytes(array->desc, array->element_size), *storage);
  ReleaseBacking(*storage);
  return CUDA_SUCCESS;
}

CUresult ArrayDescriptor(CUarray array, CUDA_ARRAY3D_DESCRIPTOR* out) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUarray_st a;
  if (!LiveArray(array, &a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = a.desc;
  return CUDA_SUCCESS;
}

CUresult MipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                              unsigned levels) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t element_size = 0;
  if (CUresult r = CheckDescriptor(*desc, &element_size); r != CUDA_SUCCESS) return r;
  // At most 1 + floor(log2(largest extent)) levels; layers and cubemap faces do not count.
  const bool keeps_depth = (desc->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  size_t largest = desc->Width > desc->Height ? desc->Width : desc->Height;
  if (!keeps_depth && desc->Depth > largest) largest = desc->Depth;
  unsigned max_levels = 0;
  for (size_t n = largest; n != 0; n >>= 1) ++max_levels;
  if (levels == 0 || levels > max_levels) return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint64_t> offsets;
  uint64_t charged = 0;
  uint64_t bytes = 0;
  for (unsigned l = 0; l < levels; ++l) {
    const uint64_t level_bytes = StorageBytes(LevelDescriptor(*desc, l), element_size);
    offsets.push_back(charged);
    charged += RoundUp(level_bytes);  // each level starts at a 512-byte boundary
    bytes += level_bytes;
  }
  Allocation storage;
  if (CUresult r = AllocateStorage(ctx, charged, &storage); r != CUDA_SUCCESS) return r;
  auto* m = new CUmipmappedArray_st();
  m->desc = *desc;
  m->levels = levels;
  m->base = storage.base;
  m->buffer_id = storage.buffer_id;
  for (unsigned l = 0; l < levels; ++l) {
    auto* a = new CUarray_st();
    a->desc = LevelDescriptor(*desc, l);
    a->element_size = element_size;
    a->storage = storage.base + offsets[l];
    a->base = storage.base;
    a->buffer_id = storage.buffer_id;
    a->owner = m;
    m->level_arrays.push_back(a);
  }
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    r.mipmaps.insert(m);
    for (CUarray_st* a : m->level_arrays) r.arrays.insert(a);
  }
  RecordArray(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, m, bytes, storage);
  *handle = m;
  return CUDA_SUCCESS;
}

CUresult MipmappedArrayLevel(CUarray* level_array, CUmipmappedArray mipmap, unsigned level) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (level_array == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUarray_st* a = nullptr;
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    if (mipmap == nullptr || r.mipmaps.count(mipmap) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (level >= mipmap->levels) return CUDA_ERROR_INVALID_VALUE;
    a = mipmap->level_arrays[level];
  }
  if (!StorageAlive(mipmap->base, mipmap->buffer_id)) return CUDA_ERROR_INVALID_HANDLE;
  *level_array = a;
  return CUDA_SUCCESS;
}

CUresult MipmappedArrayDestroy(CUmipmappedArray mipmap) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  {
    Registry& r = R();
    std::lock_guard lock(r.mu);
    if (mipmap == nullptr || r.mipmaps.erase(mipmap) == 0) return CUDA_ERROR_INVALID_HANDLE;
    for (CUarray_st* a : mipmap->level_arrays) r.arrays.erase(a);  // kept with the mipmap
    r.retired.push_back(mipmap);
  }
  std::optional<Allocation> storage = TakeStorage(mipmap->base, mipmap->buffer_id);
  if (!storage) return CUDA_ERROR_INVALID_HANDLE;  // its context was destroyed
  RecordArray(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, mipmap, LogicalBytes(*mipmap),
              *storage);
  ReleaseBacking(*storage);
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
