// Exported runtime API: profiler control, managed-memory prefetch and advice, function
// attributes and occupancy. Each call nests its driver call (cudaProfilerStart ->
// cuProfilerStart, cudaMemPrefetchAsync -> cuMemPrefetchAsync_v2, cudaMemAdvise ->
// cuMemAdvise_v2, cudaFuncSetAttribute -> cuFuncSetAttribute, cudaFuncSetCacheConfig ->
// cuFuncSetCacheConfig, cudaOccupancy* -> cuOccupancy*); cudaFuncGetAttributes reads the
// attributes as the runtime's own bookkeeping (not reported). A function is a host stub
// registered with __cudaRegisterFunction; anything else is cudaErrorInvalidDeviceFunction.
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

CUmemLocation ToLocation(const cudaMemLocation& l) {
  CUmemLocation c{};
  c.type = static_cast<CUmemLocationType>(l.type);
  c.id = l.id;
  return c;
}

// The CUfunction of a registered host stub, with the context made current.
cudaError_t FunctionOf(const void* func, CUfunction* out) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  Kernel k;
  if (func == nullptr || !FindKernelByHostFunction(func, &k) || k.function == nullptr) {
    return cudaErrorInvalidDeviceFunction;
  }
  *out = k.function;
  return cudaSuccess;
}

// Runs the driver call `call` with the CUfunction of the registered host stub `func`.
template <typename Call>
cudaError_t WithFunction(const void* func, Call&& call) {
  CUfunction f = nullptr;
  if (cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
  return ToCudaError(call(f));
}

cudaError_t FuncAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr) return cudaErrorInvalidValue;
  CUfunction f = nullptr;
  if (cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  Quiet quiet;
  auto get = [&](CUfunction_attribute a) {
    int v = 0;
    d.cuFuncGetAttribute(&v, a, f);
    return v;
  };
  *attr = cudaFuncAttributes{};
  attr->sharedSizeBytes = static_cast<size_t>(get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  attr->constSizeBytes = static_cast<size_t>(get(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES));
  attr->localSizeBytes = static_cast<size_t>(get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
  attr->maxThreadsPerBlock = get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  attr->numRegs = get(CU_FUNC_ATTRIBUTE_NUM_REGS);
  attr->ptxVersion = get(CU_FUNC_ATTRIBUTE_PTX_VERSION);
  attr->binaryVersion = get(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
  attr->cacheModeCA = get(CU_FUNC_ATTRIBUTE_CACHE_MODE_CA);
  attr->maxDynamicSharedSizeBytes = get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  attr->preferredShmemCarveout = get(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
  attr->clusterDimMustBeSet = get(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET);
  attr->requiredClusterWidth = get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
  attr->requiredClusterHeight = get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT);
  attr->requiredClusterDepth = get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH);
  attr->clusterSchedulingPolicyPreference =
      get(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  attr->nonPortableClusterSizeAllowed = get(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  return cudaSuccess;
}

cudaError_t Prefetch(const void* ptr, size_t count, cudaMemLocation location, unsigned flags,
                     cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  const DriverApi& d = Drv();
  return ToCudaError((per_thread ? d.cuMemPrefetchAsync_v2_ptsz : d.cuMemPrefetchAsync_v2)(
      Dev(ptr), count, ToLocation(location), flags, stream));
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Profiler control

GWSIM_EXPORT cudaError_t CUDARTAPI cudaProfilerStart(void) {
  return TraceRuntime(GWSIM_RT(cudaProfilerStart, v4000), NoParams{}, [&] {
    if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
    return ToCudaError(Drv().cuProfilerStart());
  });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaProfilerStop(void) {
  return TraceRuntime(GWSIM_RT(cudaProfilerStop, v4000), NoParams{}, [&] {
    if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
    return ToCudaError(Drv().cuProfilerStop());
  });
}

// Managed memory

GWSIM_RT_PER_THREAD_TWINS(cudaMemPrefetchAsync, v12020, cudaMemPrefetchAsync_ptsz, v12020,
                          (const void* devPtr, size_t count, struct cudaMemLocation location,
                           unsigned int flags, cudaStream_t stream),
                          (devPtr, count, location, flags, stream),
                          { return Prefetch(devPtr, count, location, flags, stream, per_thread); })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaMemAdvise(const void* devPtr, size_t count,
                                                 enum cudaMemoryAdvise advice,
                                                 struct cudaMemLocation location) {
  return TraceRuntime(
      GWSIM_RT(cudaMemAdvise, v12020),
      GWSIM_RT_PARAMS(cudaMemAdvise, v12020){devPtr, count, advice, location}, [&] {
        if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
        return ToCudaError(Drv().cuMemAdvise_v2(
            Dev(devPtr), count, static_cast<CUmem_advise>(advice), ToLocation(location)));
      });
}

// Function attributes

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFuncGetAttributes(struct cudaFuncAttributes* attr,
                                                         const void* func) {
  return TraceRuntime(GWSIM_RT(cudaFuncGetAttributes, v3020),
                      GWSIM_RT_PARAMS(cudaFuncGetAttributes, v3020){attr, func},
                      [&] { return FuncAttributes(attr, func); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFuncSetAttribute(const void* func,
                                                        enum cudaFuncAttribute attr, int value) {
  return TraceRuntime(
      GWSIM_RT(cudaFuncSetAttribute, v9000),
      GWSIM_RT_PARAMS(cudaFuncSetAttribute, v9000){func, attr, value}, [&] {
        CUfunction f = nullptr;
        if (cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
        if (attr < cudaFuncAttributeMaxDynamicSharedMemorySize || attr >= cudaFuncAttributeMax) {
          return cudaErrorInvalidValue;
        }
        // cudaFuncAttribute and CUfunction_attribute share these values.
        return ToCudaError(
            Drv().cuFuncSetAttribute(f, static_cast<CUfunction_attribute>(attr), value));
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaFuncSetCacheConfig(const void* func,
                                                          enum cudaFuncCache cacheConfig) {
  return TraceRuntime(GWSIM_RT(cudaFuncSetCacheConfig, v3020),
                      GWSIM_RT_PARAMS(cudaFuncSetCacheConfig, v3020){func, cacheConfig}, [&] {
                        return WithFunction(func, [&](CUfunction f) {
                          return Drv().cuFuncSetCacheConfig(f,
                                                            static_cast<CUfunc_cache>(cacheConfig));
                        });
                      });
}

// Occupancy (the model: src/driver/api_misc.cc)

GWSIM_EXPORT cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize) {
  return TraceRuntime(GWSIM_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6050),
                      GWSIM_RT_PARAMS(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6050){
                          numBlocks, func, blockSize, dynamicSMemSize},
                      [&] {
                        return WithFunction(func, [&](CUfunction f) {
                          return Drv().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                              numBlocks, f, blockSize, dynamicSMemSize);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  return TraceRuntime(GWSIM_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, v7000),
                      GWSIM_RT_PARAMS(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                                      v7000){numBlocks, func, blockSize, dynamicSMemSize, flags},
                      [&] {
                        return WithFunction(func, [&](CUfunction f) {
                          return Drv().cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                              numBlocks, f, blockSize, dynamicSMemSize, flags);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaOccupancyAvailableDynamicSMemPerBlock(
    size_t* dynamicSmemSize, const void* func, int numBlocks, int blockSize) {
  return TraceRuntime(GWSIM_RT(cudaOccupancyAvailableDynamicSMemPerBlock, v10200),
                      GWSIM_RT_PARAMS(cudaOccupancyAvailableDynamicSMemPerBlock, v10200){
                          dynamicSmemSize, func, numBlocks, blockSize},
                      [&] {
                        return WithFunction(func, [&](CUfunction f) {
                          return Drv().cuOccupancyAvailableDynamicSMemPerBlock(
                              dynamicSmemSize, f, numBlocks, blockSize);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaOccupancyMaxPotentialClusterSize(
    int* clusterSize, const void* func, const cudaLaunchConfig_t* launchConfig) {
  return TraceRuntime(
      GWSIM_RT(cudaOccupancyMaxPotentialClusterSize, v11070),
      GWSIM_RT_PARAMS(cudaOccupancyMaxPotentialClusterSize, v11070){clusterSize, func,
                                                                    launchConfig},
      [&] {
        CUfunction f = nullptr;
        if (cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
        if (launchConfig == nullptr) return cudaErrorInvalidValue;
        CUlaunchConfig c = ToDriverLaunchConfig(*launchConfig);
        return ToCudaError(Drv().cuOccupancyMaxPotentialClusterSize(clusterSize, f, &c));
      });
}
