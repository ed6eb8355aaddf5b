#include "driver/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "driver/trace.h"

namespace gwsim::drv {

namespace {

constexpr size_t kMmapThreshold = 1u << 20;

bool RoundUp(size_t n, size_t align, size_t* out) {
  if (n > SIZE_MAX - (align - 1)) return false;
  *out = (n + align - 1) / align * align;
  return true;
}

// Freed backing memory, handed to the next allocation of the same size at once, from any
// thread, as a real driver hands out a freed address again: a profiler that records a free only
// after the memory was released must see the address come back before its free is recorded.
// Most recently freed first. Device-side and pinned host memory are kept apart, per device.
class Recycler {
 public:
  // Returns a block of exactly `size` bytes freed earlier, or null.
  void* Take(int device, bool host, size_t size, bool mmapped) {
    std::lock_guard lock(mu_);
    auto it = blocks_.find(Key{device, host, mmapped, size});
    if (it == blocks_.end() || it->second.empty()) return nullptr;
    void* mem = it->second.back();
    it->second.pop_back();
    (mmapped ? mapped_count_ : small_bytes_) -= mmapped ? 1 : size;
    return mem;
  }
  // Keeps a freed block for reuse; false when the cache is full (the caller releases it).
  bool Keep(int device, bool host, size_t size, bool mmapped, void* mem) {
    std::lock_guard lock(mu_);
    if (mmapped ? mapped_count_ >= kMaxMapped : small_bytes_ + size > kMaxSmallBytes) {
      return false;
    }
    // Large blocks keep their address but give their pages back.
    if (mmapped) madvise(mem, size, MADV_DONTNEED);
    blocks_[Key{device, host, mmapped, size}].push_back(mem);
    (mmapped ? mapped_count_ : small_bytes_) += mmapped ? 1 : size;
    return true;
  }

 private:
  struct Key {
    int device;
    bool host;
    bool mmapped;
    size_t size;
    bool operator<(const Key& o) const {
      return std::tie(device, host, mmapped, size) < std::tie(o.device, o.host, o.mmapped, o.size);
    }
  };
  static constexpr size_t kMaxSmallBytes = size_t{256} << 20;
  static constexpr size_t kMaxMapped = 4096;

  std::mutex mu_;
  std::map<Key, std::vector<void*>> blocks_;
  size_t small_bytes_ = 0;
  size_t mapped_count_ = 0;
};

Recycler& Blocks() {
  static auto* recycler = new Recycler();  // never destroyed, like the rest of the state
  return *recycler;
}

bool Recyclable(Origin origin) {
  return origin == Origin::kDevice || origin == Origin::kAsync || origin == Origin::kManaged ||
         origin == Origin::kHost;
}

// cuMemAlloc memory is always whole pages of its own, whatever its size: its first IPC export
// moves those pages onto a memfd at the same address (ipc.cc), which a malloc'ed block, sharing
// its pages with other objects, could not allow.
void* AllocBacking(size_t size, Origin origin, int device, bool* mmapped) {
  *mmapped = size >= kMmapThreshold || origin == Origin::kDevice;
  if (Recyclable(origin)) {
    if (void* mem = Blocks().Take(device, origin == Origin::kHost, size, *mmapped)) return mem;
  }
  if (*mmapped) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    *mmapped = true;
    return p == MAP_FAILED ? nullptr : p;
  }
  *mmapped = false;
  return std::aligned_alloc(kAllocAlignment, size);
}

void WriteBool(void* data, bool value) { *static_cast<unsigned char*>(data) = value ? 1 : 0; }

}  // namespace

CUresult Allocate(const AllocRequest& req, CUctx_st* ctx, uintptr_t* out) {
  if (out == nullptr || req.size == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = 0;
  if (!RoundUp(req.size, kAllocAlignment, &rounded)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int device = ctx->device;
  if (req.charge && !Charge(device, rounded)) return CUDA_ERROR_OUT_OF_MEMORY;
  bool mmapped = false;
  void* mem = AllocBacking(rounded, req.origin, device, &mmapped);
  if (mem == nullptr) {
    if (req.charge) Uncharge(device, rounded);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(mem);
  a.size = req.size;
  a.origin = req.origin;
  a.memory_kind = req.memory_kind;
  a.device = device;
  a.ctx = ctx;
  a.backing = mem;
  a.backing_size = rounded;
  a.mmapped = mmapped;
  a.charged = req.charge ? rounded : 0;
  a.pool = req.pool;
  a.stream_id = req.stream_id;
  a.flags = req.flags;
  a.buffer_id = D().next_buffer_id.fetch_add(1);
  a.name = req.name;
  if (!D().memory.Insert(a)) {  // cannot happen for fresh memory; keep the table consistent
    ReleaseBacking(a);
    return CUDA_ERROR_UNKNOWN;
  }
  EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, a, req.is_async, req.stream_id);
  *out = a.base;
  return CUDA_SUCCESS;
}

void ReleaseBacking(const Allocation& a) {
  if (a.ipc_fd >= 0) EndExport(a);
  if (a.backing != nullptr && Recyclable(a.origin) &&
      Blocks().Keep(a.device, a.origin == Origin::kHost, a.backing_size, a.mmapped, a.backing)) {
    Uncharge(a.device, a.charged);
    return;
  }
  if (a.backing != nullptr) {
    if (a.mmapped) {
      munmap(a.backing, a.backing_size);
    } else {
      std::free(a.backing);
    }
  }
  Uncharge(a.device, a.charged);
}

CUresult Free(uintptr_t p, unsigned origins, bool is_async, uint32_t stream_id) {
  std::optional<Allocation> a = D().memory.RemoveIf(
      p, [origins](const Allocation& x) { return (origins & Bit(x.origin)) != 0; });
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  // Record before the memory goes back to the system, so that a later allocation at the same
  // address is recorded after this release.
  EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, *a, is_async, stream_id);
  ReleaseBacking(*a);
  return CUDA_SUCCESS;
}

CUresult HostRegister(void* p, size_t size, unsigned flags) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (p == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.origin = Origin::kRegistered;
  a.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  a.device = ctx->device;
  a.ctx = ctx;
  a.flags = flags;
  a.buffer_id = D().next_buffer_id.fetch_add(1);
  if (!D().memory.Insert(a)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  return CUDA_SUCCESS;
}

CUresult HostUnregister(void* p) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  auto a = D().memory.RemoveIf(reinterpret_cast<uintptr_t>(p),
                               [](const Allocation& x) { return x.origin == Origin::kRegistered; });
  return a ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

PointerClass Classify(uintptr_t p) {
  PointerClass c;
  c.alloc = D().memory.Find(p);
  if (!c.alloc) return c;
  switch (c.alloc->origin) {
    case Origin::kHost:
    case Origin::kRegistered:
      c.kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
      break;
    case Origin::kManaged:
      c.kind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
      break;
    default:
      c.kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      break;
  }
  return c;
}

CUresult GetPointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                             bool strict) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::optional<Allocation> a = D().memory.Find(ptr);
  const bool host = a && (a->origin == Origin::kHost || a->origin == Origin::kRegistered);
  const bool managed = a && a->origin == Origin::kManaged;
  if (!a && strict) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = a ? a->ctx : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) =
          !a ? 0u : static_cast<unsigned>(host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = a ? ptr : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (a && !host && !managed && strict) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = host || managed ? reinterpret_cast<void*>(ptr) : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
      WriteBool(data, a.has_value());
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      WriteBool(data, managed);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = a ? a->buffer_id : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = a ? a->device : -2;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = a ? a->base : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = a ? a->size : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *static_cast<int*>(data) = a ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      WriteBool(data, a && a->origin == Origin::kDevice);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<CUmemoryPool*>(data) = a ? a->pool : nullptr;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace gwsim::drv
