// A pool allocator that declares its blocks with NVTX's memory extension, as
// Umpire and RMM-like pools can (tests/e2e/regions_test.cc asserts the
// report): each segment is a heap, each block handed out a region,
// registered from the pool's Allocate and so from the stack of the code that
// asked for it.
//
// - Pool "main" (8 MiB, kept to the end as caching allocators keep theirs):
//   blocks of 1 MiB and 2 MiB given back; 512 KiB taken in the range "step"
//   and never given back (leaked); 256 KiB taken, resized to 128 KiB and
//   never given back (leaked); two blocks registered in one batch with
//   handles and unregistered by handle.
// - Pool "arena" (4 MiB): three blocks of 1 MiB ended by a heap reset, then
//   the pool torn down.
// - Pool "short" (2 MiB): torn down while a block of 64 KiB is still out
//   (leaked, in no live allocation: its segment is freed). Last, so that no
//   later allocation takes its address.
// - An unregistration of a pointer that is no region.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

void Check(cudaError_t e) {
  if (e != cudaSuccess) std::abort();
}

// A struct of NVTX's memory extension, zeroed, its header filled in.
template <typename T>
T MemStruct() {
  T s = {};
  s.extCompatID = NVTX_EXT_COMPATID_MEM;
  s.structSize = sizeof(s);
  return s;
}

nvtxDomainHandle_t Domain() {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("pool");
  return domain;
}

class Pool {
 public:
  explicit Pool(size_t bytes) : size_(bytes) {
    Check(cudaMalloc(&base_, bytes));  // AT:segment
    nvtxMemVirtualRangeDesc_t range = {bytes, base_};
    auto desc = MemStruct<nvtxMemHeapDesc_t>();
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof(range);
    desc.typeSpecificDesc = &range;
    heap_ = nvtxMemHeapRegister(Domain(), &desc);  // AT:heap
  }

  // A bump allocator: blocks are never reused, so addresses are distinct.
  __attribute__((noinline)) void* Allocate(size_t bytes) {
    nvtxMemVirtualRangeDesc_t region = {bytes, Take(bytes)};
    Register(&region, 1, nullptr);
    return const_cast<void*>(region.ptr);
  }

  // Two blocks in one batch; their handles in `handles`.
  __attribute__((noinline)) void AllocatePair(size_t bytes, nvtxMemRegionHandle_t handles[2]) {
    nvtxMemVirtualRangeDesc_t regions[2] = {{bytes, Take(bytes)}, {bytes, Take(bytes)}};
    Register(regions, 2, handles);
  }

  static void Resize(void* block, size_t bytes) {
    nvtxMemVirtualRangeDesc_t region = {bytes, block};
    auto batch = MemStruct<nvtxMemRegionsResizeBatch_t>();
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.regionDescCount = 1;
    batch.regionDescElementSize = sizeof(region);
    batch.regionDescElements = &region;
    nvtxMemRegionsResize(Domain(), &batch);
  }

  static void Deallocate(const void* block) { Unregister(NVTX_MEM_REGION_REF_TYPE_POINTER, block); }
  static void DeallocateByHandle(nvtxMemRegionHandle_t handle) {
    Unregister(NVTX_MEM_REGION_REF_TYPE_HANDLE, handle);
  }

  void Reset() {
    nvtxMemHeapReset(Domain(), heap_);
    used_ = 0;
  }

  void Destroy() {
    nvtxMemHeapUnregister(Domain(), heap_);
    Check(cudaFree(base_));
  }

 private:
  void* Take(size_t bytes) {
    if (used_ + bytes > size_) std::abort();
    void* block = static_cast<char*>(base_) + used_;
    used_ += bytes;
    return block;
  }

  // Registers `n` regions of this pool's heap in one batch; `handles`, when
  // given, receives theirs. Two of the pool's frames then stand between the
  // registration and the line that asked for the block.
  __attribute__((noinline)) void Register(const nvtxMemVirtualRangeDesc_t* regions, size_t n,
                                          nvtxMemRegionHandle_t* handles) {
    auto batch = MemStruct<nvtxMemRegionsRegisterBatch_t>();
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = heap_;
    batch.regionCount = n;
    batch.regionDescElementSize = sizeof(regions[0]);
    batch.regionDescElements = regions;
    batch.regionHandleElementsOut = handles;
    nvtxMemRegionsRegister(Domain(), &batch);  // AT:register
  }

  static void Unregister(uint32_t type, const void* ref) {
    nvtxMemRegionRef_t r;
    r.pointer = ref;
    auto batch = MemStruct<nvtxMemRegionsUnregisterBatch_t>();
    batch.refType = type;
    batch.refCount = 1;
    batch.refElementSize = sizeof(r);
    batch.refElements = &r;
    nvtxMemRegionsUnregister(Domain(), &batch);
  }

  void* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
  nvtxMemHeapHandle_t heap_ = nullptr;
};

}  // namespace

int main() {
  Pool main_pool(8 * kMiB);
  void* given_back_1 = main_pool.Allocate(kMiB);      // AT:given_back_1
  void* given_back_2 = main_pool.Allocate(2 * kMiB);  // AT:given_back_2
  nvtxRangePushA("step");
  void* leaked = main_pool.Allocate(512 * kKiB);  // AT:leaked
  nvtxRangePop();
  void* shrunk = main_pool.Allocate(256 * kKiB);  // AT:shrunk
  Pool::Resize(shrunk, 128 * kKiB);
  nvtxMemRegionHandle_t pair[2] = {};
  main_pool.AllocatePair(64 * kKiB, pair);
  Pool::DeallocateByHandle(pair[0]);
  Pool::DeallocateByHandle(pair[1]);
  Pool::Deallocate(given_back_1);
  Pool::Deallocate(given_back_2);
  (void)leaked;

  Pool arena(4 * kMiB);
  for (int i = 0; i < 3; ++i) arena.Allocate(kMiB);
  arena.Reset();
  arena.Destroy();

  int not_a_region = 0;
  Pool::Deallocate(&not_a_region);

  Pool short_lived(2 * kMiB);
  short_lived.Allocate(64 * kKiB);  // AT:torn_down
  short_lived.Destroy();
  std::printf("nvtx_pool: done\n");
  return 0;
}
