// Exported runtime API: profiler control, managed-memory prefetch and advice, function
// attributes and occupancy. Each call nests its driver call (cudaProfilerStart ->
// cuProfilerStart, cudaMemPrefetchAsync -> cuMemPrefetchAsync_v2, cudaMemAdvise ->
// cuMemAdvise_v2, cudaFuncSetAttribute -> cuFuncSetAttribute, cudaFuncSetCacheConfig ->
// cuFuncSetCacheConfig, cudaOccupancy* -> cuOccupancy*); cudaFuncGetAttributes reads the
// attributes as the runtime's own bookkeeping (not reported). A function is a host stub
// registered with __cudaRegisterFunction; anything else is cudaErrorInvalidDeviceFunction.
#include <utility>

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
  // The int members, each the driver's function attribute of the same meaning.
  using A = cudaFuncAttributes;
  static constexpr std::pair<int A::*, CUfunction_attribute> kInts[] = {
      {&A::maxThreadsPerBlock, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {&A::numRegs, CU_FUNC_ATTRIBUTE_NUM_REGS},
      {&A::ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION},
      {&A::binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION},
      {&A::cacheModeCA, CU_FUNC_ATTRIBUTE_CACHE_MODE_CA},
      {&A::maxDynamicSharedSizeBytes, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES},
      {&A::preferredShmemCarveout, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT},
      {&A::clusterDimMustBeSet, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET},
      {&A::requiredClusterWidth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH},
      {&A::requiredClusterHeight, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT},
      {&A::requiredClusterDepth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH},
      {&A::clusterSchedulingPolicyPreference,
       CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE},
      {&A::nonPortableClusterSizeAllowed, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED},
  };
  for (const auto& [member, a] : kInts) attr->*member = get(a);
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

// Defines the occupancy query `name` (of `version`) of (`out_param`, const void* func,
// `params`...): it runs the driver's `query` with `out`, the CUfunction of the host stub `func`
// and `args` (the names of `params`).
#define GWSIM_RT_OCCUPANCY(name, version, query, out_param, out, params, args)               \
  GWSIM_RT_TRACED(name, version, false, (out_param, const void* func, GWSIM_UNPAREN params), \
                  (out, func, GWSIM_UNPAREN args), {                                         \
                    return WithFunction(func, [&](CUfunction f) {                            \
                      return Drv().query(out, f, GWSIM_UNPAREN args);                        \
                    });                                                                      \
                  })

GWSIM_RT_OCCUPANCY(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6050,
                   cuOccupancyMaxActiveBlocksPerMultiprocessor, int* numBlocks, numBlocks,
                   (int blockSize, size_t dynamicSMemSize), (blockSize, dynamicSMemSize))
GWSIM_RT_OCCUPANCY(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, v7000,
                   cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, int* numBlocks, numBlocks,
                   (int blockSize, size_t dynamicSMemSize, unsigned int flags),
                   (blockSize, dynamicSMemSize, flags))
GWSIM_RT_OCCUPANCY(cudaOccupancyAvailableDynamicSMemPerBlock, v10200,
                   cuOccupancyAvailableDynamicSMemPerBlock, size_t* dynamicSmemSize,
                   dynamicSmemSize, (int numBlocks, int blockSize), (numBlocks, blockSize))

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
