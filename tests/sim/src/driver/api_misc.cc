// Exported driver API: profiler control, managed-memory prefetch and advice, function
// attributes and occupancy.
//
// Every kernel has the same fixed attributes: 32 registers per thread, no static, constant or
// local memory, at most 1024 threads per block, PTX and binary version 90, 48 KiB of dynamic
// shared memory unless cuFuncSetAttribute raises it (up to 227 KiB). Occupancy follows from the
// limits of a compute capability 9.0 SM: 64 warps (2048 threads) and 32 blocks, 65536
// registers allocated per warp in units of 256, 228 KiB of shared memory allocated per block in
// units of 128 bytes plus 1 KiB the system reserves per block.
#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/leaked.h"
#include "driver/cuda_headers.h"
#include "driver/function.h"
#include "driver/state.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxWarpsPerSm = 64;
constexpr int kMaxBlocksPerSm = 32;
constexpr int kRegistersPerSm = 65536;
constexpr int kRegistersPerThread = 32;
constexpr int kRegisterUnit = 256;  // per warp
constexpr int kSharedPerSm = 228 << 10;
constexpr int kSharedUnit = 128;
constexpr int kSharedReservedPerBlock = 1 << 10;
constexpr int kMaxSharedOptIn = 227 << 10;
constexpr int kDefaultMaxDynamicShared = 48 << 10;
constexpr int kMultiprocessors = 132;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kPortableClusterSize = 8;
constexpr int kNonPortableClusterSize = 16;

// What cuFuncSetAttribute / cuFuncSetCacheConfig changed of a function.
struct Settable {
  int max_dynamic_shared = kDefaultMaxDynamicShared;
  int carveout = CU_SHAREDMEM_CARVEOUT_DEFAULT;
  int cache_config = CU_FUNC_CACHE_PREFER_NONE;
  int cluster[3] = {0, 0, 0};
  int non_portable_cluster = 0;
  int scheduling_policy = 0;
};

struct Attributes {
  std::mutex mu;
  std::unordered_map<const CUfunc_st*, Settable> by_function;
};

Attributes& A() { return Leaked<Attributes>(); }  // never destroyed, like the rest

Settable Get(const CUfunc_st* f) {
  Attributes& a = A();
  std::lock_guard lock(a.mu);
  auto it = a.by_function.find(f);
  return it == a.by_function.end() ? Settable{} : it->second;
}

template <typename Change>
void Set(const CUfunc_st* f, Change&& change) {
  Attributes& a = A();
  std::lock_guard lock(a.mu);
  change(a.by_function[f]);
}

CUresult RequireFunction(CUfunction f) {
  return f != nullptr && ValidFunction(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult GetAttribute(int* value, CUfunction_attribute attribute, CUfunction f) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RequireFunction(f); r != CUDA_SUCCESS) return r;
  const Settable s = Get(f);
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = kMaxThreadsPerBlock;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
      *value = 0;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = kRegistersPerThread;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *value = 90;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = s.max_dynamic_shared;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *value = s.carveout;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      *value = s.cluster[attribute - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      *value = s.non_portable_cluster;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      *value = s.scheduling_policy;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult SetAttribute(CUfunction f, CUfunction_attribute attribute, int value) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = RequireFunction(f); r != CUDA_SUCCESS) return r;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:  // + static (0) <= the opt-in limit
      if (value < 0 || value > kMaxSharedOptIn) return CUDA_ERROR_INVALID_VALUE;
      Set(f, [value](Settable& s) { s.max_dynamic_shared = value; });
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < CU_SHAREDMEM_CARVEOUT_DEFAULT || value > CU_SHAREDMEM_CARVEOUT_MAX_SHARED) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      Set(f, [value](Settable& s) { s.carveout = value; });
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      if (value < 0) return CUDA_ERROR_INVALID_VALUE;
      Set(f, [attribute, value](Settable& s) {
        s.cluster[attribute - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = value;
      });
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (value != 0 && value != 1) return CUDA_ERROR_INVALID_VALUE;
      Set(f, [value](Settable& s) { s.non_portable_cluster = value; });
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
          value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      Set(f, [value](Settable& s) { s.scheduling_policy = value; });
      return CUDA_SUCCESS;
    default:  // read-only
      return CUDA_ERROR_INVALID_VALUE;
  }
}

int RoundUp(int n, int unit) { return (n + unit - 1) / unit * unit; }

// Blocks of `block_size` threads using `dynamic_shared` bytes that fit on one SM at once; 0
// when such a block cannot be launched at all.
int ActiveBlocks(const Settable& s, int block_size, size_t dynamic_shared) {
  if (block_size > kMaxThreadsPerBlock ||
      dynamic_shared > static_cast<size_t>(s.max_dynamic_shared)) {
    return 0;
  }
  const int warps = (block_size + kWarpSize - 1) / kWarpSize;
  const int by_warps = kMaxWarpsPerSm / warps;
  const int registers_per_warp = RoundUp(kRegistersPerThread * kWarpSize, kRegisterUnit);
  const int by_registers = kRegistersPerSm / registers_per_warp / warps;
  const int shared =
      RoundUp(static_cast<int>(dynamic_shared), kSharedUnit) + kSharedReservedPerBlock;
  const int by_shared = kSharedPerSm / shared;
  return std::min({kMaxBlocksPerSm, by_warps, by_registers, by_shared});
}

CUresult CheckOccupancyArgs(CUfunction f, int block_size, unsigned flags) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = RequireFunction(f); r != CUDA_SUCCESS) return r;
  if (block_size <= 0 || (flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult MaxActiveBlocks(int* blocks, CUfunction f, int block_size, size_t dynamic_shared,
                         unsigned flags) {
  if (blocks == nullptr) {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckOccupancyArgs(f, block_size, flags); r != CUDA_SUCCESS) return r;
  *blocks = ActiveBlocks(Get(f), block_size, dynamic_shared);
  return CUDA_SUCCESS;
}

// The block size with the highest occupancy (the largest one among equals), tried from the
// largest multiple of the warp size down, as the runtime's cudaOccupancyMaxPotentialBlockSize.
CUresult MaxPotentialBlockSize(int* min_grid, int* block_size, CUfunction f,
                               CUoccupancyB2DSize to_shared, size_t dynamic_shared, int limit,
                               unsigned flags) {
  if (min_grid == nullptr || block_size == nullptr || limit < 0) {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckOccupancyArgs(f, 1, flags); r != CUDA_SUCCESS) return r;
  const Settable s = Get(f);
  if (limit == 0 || limit > kMaxThreadsPerBlock) limit = kMaxThreadsPerBlock;
  int best_size = 0;
  int best_blocks = 0;
  int best_threads = 0;
  for (int aligned = RoundUp(limit, kWarpSize); aligned > 0; aligned -= kWarpSize) {
    const int size = std::min(aligned, limit);
    const size_t shared = to_shared != nullptr ? to_shared(size) : dynamic_shared;
    const int blocks = ActiveBlocks(s, size, shared);
    if (blocks * size > best_threads) {
      best_size = size;
      best_blocks = blocks;
      best_threads = blocks * size;
    }
    if (best_threads == kMaxWarpsPerSm * kWarpSize) break;
  }
  *min_grid = best_blocks * kMultiprocessors;
  *block_size = best_size;
  return CUDA_SUCCESS;
}

CUresult AvailableDynamicShared(size_t* out, CUfunction f, int blocks, int block_size) {
  if (out == nullptr || blocks <= 0) {
    if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckOccupancyArgs(f, block_size, 0); r != CUDA_SUCCESS) return r;
  const Settable s = Get(f);
  // The most each of `blocks` blocks may use while they all fit, capped by the function's
  // limit; 0 when that many blocks of this size never fit.
  if (ActiveBlocks(s, block_size, 0) < blocks) {
    *out = 0;
    return CUDA_SUCCESS;
  }
  const int per_block =
      (kSharedPerSm / blocks - kSharedReservedPerBlock) / kSharedUnit * kSharedUnit;
  *out = static_cast<size_t>(std::min(per_block, s.max_dynamic_shared));
  return CUDA_SUCCESS;
}

CUresult MaxClusterSize(int* cluster_size, CUfunction f, const CUlaunchConfig* config) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (cluster_size == nullptr || config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RequireFunction(f); r != CUDA_SUCCESS) return r;
  *cluster_size = Get(f).non_portable_cluster != 0 ? kNonPortableClusterSize : kPortableClusterSize;
  return CUDA_SUCCESS;
}

// Prefetch and advice: the range must lie in one managed allocation.
CUresult CheckManagedRange(CUdeviceptr p, size_t count) {
  const std::optional<Allocation> a = D().memory.Find(p);
  if (count == 0 || !a || a->origin != Origin::kManaged || count > a->base + a->size - p) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CheckLocation(const CUmemLocation& location) {
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return CheckDevice(location.id) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:  // the simulated host has one NUMA node, 0
      return location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult Prefetch(CUdeviceptr p, size_t count, CUmemLocation location, unsigned flags,
                  CUstream stream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckManagedRange(p, count); r != CUDA_SUCCESS) return r;
  return CheckLocation(location);  // nothing moves: managed memory is host memory here
}

CUresult Advise(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation location) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckManagedRange(p, count); r != CUDA_SUCCESS) return r;
  const bool uses_location = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                             advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                             advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
  return uses_location ? CheckLocation(location) : CUDA_SUCCESS;
}

}  // namespace

int MaxDynamicShared(const CUfunc_st* f) { return Get(f).max_dynamic_shared; }

}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Profiler control: nothing to start or stop; both need a current context.

GWSIM_EXPORT CUresult CUDAAPI cuProfilerStart(void) {
  return TraceDriver(GWSIM_DRV(cuProfilerStart), NoParams{}, [&] {
    CUctx_st* ctx = nullptr;
    return RequireContext(&ctx);
  });
}

GWSIM_EXPORT CUresult CUDAAPI cuProfilerStop(void) {
  return TraceDriver(GWSIM_DRV(cuProfilerStop), NoParams{}, [&] {
    CUctx_st* ctx = nullptr;
    return RequireContext(&ctx);
  });
}

// Managed memory

GWSIM_DRV_PER_THREAD_TWINS(cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz,
                           (CUdeviceptr devPtr, size_t count, CUmemLocation location,
                            unsigned int flags, CUstream hStream),
                           (devPtr, count, location, flags, hStream), {
                             return Prefetch(devPtr, count, location, flags, hStream, per_thread);
                           })

GWSIM_EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                             CUmemLocation location) {
  return TraceDriver(GWSIM_DRV(cuMemAdvise_v2),
                     cuMemAdvise_v2_params{devPtr, count, advice, location},
                     [&] { return Advise(devPtr, count, advice, location); });
}

// Function attributes

GWSIM_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib,
                                                 CUfunction hfunc) {
  return TraceDriver(GWSIM_DRV(cuFuncGetAttribute), cuFuncGetAttribute_params{pi, attrib, hfunc},
                     [&] { return GetAttribute(pi, attrib, hfunc); });
}

GWSIM_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib,
                                                 int value) {
  return TraceDriver(GWSIM_DRV(cuFuncSetAttribute), cuFuncSetAttribute_params{hfunc, attrib, value},
                     [&] { return SetAttribute(hfunc, attrib, value); });
}

GWSIM_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  return TraceDriver(
      GWSIM_DRV(cuFuncSetCacheConfig), cuFuncSetCacheConfig_params{hfunc, config}, [&] {
        CUctx_st* ctx = nullptr;
        if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
        if (CUresult r = RequireFunction(hfunc); r != CUDA_SUCCESS) return r;
        if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        Set(hfunc, [config](Settable& s) { s.cache_config = config; });
        return CUDA_SUCCESS;
      });
}

// Occupancy

GWSIM_DRV_TRACED(cuOccupancyMaxActiveBlocksPerMultiprocessor, false,
                 (int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize),
                 (numBlocks, func, blockSize, dynamicSMemSize),
                 { return MaxActiveBlocks(numBlocks, func, blockSize, dynamicSMemSize, 0); })

GWSIM_DRV_TRACED(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, false,
                 (int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize,
                  unsigned int flags),
                 (numBlocks, func, blockSize, dynamicSMemSize, flags),
                 { return MaxActiveBlocks(numBlocks, func, blockSize, dynamicSMemSize, flags); })

GWSIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit) {
  return TraceDriver(GWSIM_DRV(cuOccupancyMaxPotentialBlockSize),
                     cuOccupancyMaxPotentialBlockSize_params{minGridSize, blockSize, func,
                                                             blockSizeToDynamicSMemSize,
                                                             dynamicSMemSize, blockSizeLimit},
                     [&] {
                       return MaxPotentialBlockSize(minGridSize, blockSize, func,
                                                    blockSizeToDynamicSMemSize, dynamicSMemSize,
                                                    blockSizeLimit, 0);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags) {
  return TraceDriver(GWSIM_DRV(cuOccupancyMaxPotentialBlockSizeWithFlags),
                     cuOccupancyMaxPotentialBlockSizeWithFlags_params{
                         minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                         blockSizeLimit, flags},
                     [&] {
                       return MaxPotentialBlockSize(minGridSize, blockSize, func,
                                                    blockSizeToDynamicSMemSize, dynamicSMemSize,
                                                    blockSizeLimit, flags);
                     });
}

GWSIM_DRV_TRACED(cuOccupancyAvailableDynamicSMemPerBlock, false,
                 (size_t * dynamicSmemSize, CUfunction func, int numBlocks, int blockSize),
                 (dynamicSmemSize, func, numBlocks, blockSize),
                 { return AvailableDynamicShared(dynamicSmemSize, func, numBlocks, blockSize); })

GWSIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func,
                                                                 const CUlaunchConfig* config) {
  return TraceDriver(GWSIM_DRV(cuOccupancyMaxPotentialClusterSize),
                     cuOccupancyMaxPotentialClusterSize_params{clusterSize, func, config},
                     [&] { return MaxClusterSize(clusterSize, func, config); });
}
