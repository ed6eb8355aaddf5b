// Exported runtime API: graphs, executable graphs, graph memory, stream capture and host
// functions. Each call nests the driver call the real runtime makes (cudaGraphLaunch ->
// cuGraphLaunch, cudaStreamBeginCapture -> cuStreamBeginCapture_v2, ...).
#include <dlfcn.h>

#include "runtime/array.h"
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {

bool InHostFunction() {
  static const gwsim_in_host_function_fn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);  // already loaded by Drv()
    return lib == nullptr
               ? nullptr
               : reinterpret_cast<gwsim_in_host_function_fn>(dlsym(lib, "gwsim_in_host_function"));
  }();
  return fn != nullptr && fn() != 0;
}

namespace {

// The calling thread's current context (the current device's primary context).
cudaError_t Current(CUcontext* ctx) {
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  return EnsurePrimary(CurrentDevice(), ctx);
}

// A kernel is named by its host stub (or by the handle cudaGetKernel returned). Q: the
// driver's CUDA_KERNEL_NODE_PARAMS or its _v3 (in CUgraphNodeParams).
template <typename Q>
cudaError_t KernelParams(const void* func, dim3 grid, dim3 block, unsigned shared_mem,
                         void** params, void** extra, Q* out) {
  Kernel k;
  if ((!FindKernelByHostFunction(func, &k) && !FindKernelByHandle(func, &k)) ||
      k.function == nullptr) {
    return cudaErrorInvalidDeviceFunction;
  }
  *out = Q{};
  out->func = k.function;
  out->gridDimX = grid.x;
  out->gridDimY = grid.y;
  out->gridDimZ = grid.z;
  out->blockDimX = block.x;
  out->blockDimY = block.y;
  out->blockDimZ = block.z;
  out->sharedMemBytes = shared_mem;
  out->kernelParams = params;
  out->extra = extra;
  return cudaSuccess;
}

// Q: the driver's CUDA_MEMSET_NODE_PARAMS or its _v2 (in CUgraphNodeParams).
template <typename P, typename Q>
void MemsetParams(const P& p, Q* out) {
  *out = Q{};
  out->dst = Dev(p.dst);
  out->pitch = p.pitch;
  out->value = p.value;
  out->elementSize = p.elementSize;
  out->width = p.width;
  out->height = p.height;
}

void PoolProps(const cudaMemPoolProps& p, CUmemPoolProps* out) {
  *out = CUmemPoolProps{};
  out->allocType = static_cast<CUmemAllocationType>(p.allocType);
  out->handleTypes = static_cast<CUmemAllocationHandleType>(p.handleTypes);
  out->location.type = static_cast<CUmemLocationType>(p.location.type);
  out->location.id = p.location.id;
  out->maxSize = p.maxSize;
  out->usage = p.usage;
}

// cudaMemAllocNodeParams and its V2 have the same members.
template <typename P, typename Q>
void AllocParams(const P& p, Q* out) {
  *out = Q{};
  PoolProps(p.poolProps, &out->poolProps);
  // cudaMemAccessDesc and CUmemAccessDesc share their layout.
  out->accessDescs = reinterpret_cast<const CUmemAccessDesc*>(p.accessDescs);
  out->accessDescCount = p.accessDescCount;
  out->bytesize = p.bytesize;
}

cudaError_t AddMemcpy(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                      size_t count, const cudaMemcpy3DParms* p) {
  if (p == nullptr) return cudaErrorInvalidValue;
  CUcontext ctx = nullptr;
  if (cudaError_t e = Current(&ctx); e != cudaSuccess) return e;
  CUDA_MEMCPY3D c{};
  if (cudaError_t e = ToDriver3D(p, &c); e != cudaSuccess) return e;
  return ToCudaError(Drv().cuGraphAddMemcpyNode(node, graph, deps, count, &c, ctx));
}

cudaError_t AddGeneric(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                       const cudaGraphEdgeData* edges, size_t count, cudaGraphNodeParams* p) {
  if (p == nullptr) return cudaErrorInvalidValue;
  CUcontext ctx = nullptr;
  if (cudaError_t e = Current(&ctx); e != cudaSuccess) return e;
  CUgraphNodeParams c{};
  c.type = static_cast<CUgraphNodeType>(p->type);
  for (int i = 0; i < 3; ++i) c.reserved0[i] = p->reserved0[i];  // must be zero: the driver checks
  c.reserved2 = p->reserved2;
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      const cudaKernelNodeParamsV2& k = p->kernel;
      if (cudaError_t e = KernelParams(k.func, k.gridDim, k.blockDim, k.sharedMemBytes,
                                       k.kernelParams, k.extra, &c.kernel);
          e != cudaSuccess) {
        return e;
      }
      break;
    }
    case cudaGraphNodeTypeMemcpy:
      if (p->memcpy.flags != 0 || p->memcpy.reserved[0] != 0 || p->memcpy.reserved[1] != 0 ||
          p->memcpy.reserved[2] != 0) {
        return cudaErrorInvalidValue;
      }
      if (cudaError_t e = ToDriver3D(&p->memcpy.copyParams, &c.memcpy.copyParams);
          e != cudaSuccess) {
        return e;
      }
      c.memcpy.copyCtx = ctx;
      break;
    case cudaGraphNodeTypeMemset:
      MemsetParams(p->memset, &c.memset);
      c.memset.ctx = ctx;
      break;
    case cudaGraphNodeTypeHost:
      c.host.fn = p->host.fn;
      c.host.userData = p->host.userData;
      break;
    case cudaGraphNodeTypeGraph:
      c.graph.graph = p->graph.graph;
      c.graph.ownership = static_cast<CUgraphChildGraphNodeOwnership>(p->graph.ownership);
      break;
    case cudaGraphNodeTypeEmpty:
      break;
    case cudaGraphNodeTypeMemAlloc:
      AllocParams(p->alloc, &c.alloc);
      break;
    case cudaGraphNodeTypeMemFree:
      c.free.dptr = Dev(p->free.dptr);
      break;
    default:
      return cudaErrorNotSupported;  // event, semaphore and conditional nodes
  }
  // cudaGraphEdgeData and CUgraphEdgeData share their layout.
  const CUresult r = Drv().cuGraphAddNode_v2(
      node, graph, deps, reinterpret_cast<const CUgraphEdgeData*>(edges), count, &c);
  if (r == CUDA_SUCCESS && p->type == cudaGraphNodeTypeMemAlloc) {
    p->alloc.dptr = reinterpret_cast<void*>(c.alloc.dptr);
  }
  return ToCudaError(r);
}

cudaError_t Instantiate(cudaGraphExec_t* exec, cudaGraph_t graph, cudaGraphInstantiateParams* p,
                        bool per_thread) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUDA_GRAPH_INSTANTIATE_PARAMS c{};
  c.flags = p->flags;
  c.hUploadStream = p->uploadStream;
  const DriverApi& d = Drv();
  const CUresult r = (per_thread ? d.cuGraphInstantiateWithParams_ptsz
                                 : d.cuGraphInstantiateWithParams)(exec, graph, &c);
  p->errNode_out = c.hErrNode_out;
  p->result_out = static_cast<cudaGraphInstantiateResult>(c.result_out);
  return ToCudaError(r);
}

cudaError_t CaptureInfo(bool per_thread, cudaStream_t stream, cudaStreamCaptureStatus* status,
                        unsigned long long* id, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                        const cudaGraphEdgeData** edges, size_t* count) {
  if (status == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t cu_id = 0;
  const CUgraphEdgeData* cu_edges = nullptr;
  const DriverApi& d = Drv();
  const CUresult r = (per_thread ? d.cuStreamGetCaptureInfo_v3_ptsz : d.cuStreamGetCaptureInfo_v3)(
      stream, &s, id != nullptr ? &cu_id : nullptr, graph, deps,
      edges != nullptr ? &cu_edges : nullptr, count);
  if (r != CUDA_SUCCESS) return ToCudaError(r);
  *status = static_cast<cudaStreamCaptureStatus>(s);
  if (s == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    if (id != nullptr) *id = cu_id;
    // cudaGraphEdgeData and CUgraphEdgeData share their layout.
    if (edges != nullptr) *edges = reinterpret_cast<const cudaGraphEdgeData*>(cu_edges);
  }
  return cudaSuccess;
}

// cudaDevice{Get,Set}GraphMemAttribute through the driver's `call` (its cuDevice* twin).
template <typename Call>
cudaError_t GraphMemAttribute(Call call, int device, cudaGraphMemAttributeType attr, void* value) {
  return WithDriver([&] { return call(device, static_cast<CUgraphMem_attribute>(attr), value); });
}

cudaError_t IsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status, bool per_thread) {
  if (status == nullptr) return cudaErrorInvalidValue;
  return WithContext([&] {
    CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
    const DriverApi& d = Drv();
    const CUresult r =
        (per_thread ? d.cuStreamIsCapturing_ptsz : d.cuStreamIsCapturing)(stream, &s);
    if (r == CUDA_SUCCESS) *status = static_cast<cudaStreamCaptureStatus>(s);
    return r;
  });
}

// cudaStreamAddCallback: the driver's callback takes a CUresult; the user's a cudaError_t.
struct Callback {
  cudaStreamCallback_t fn = nullptr;
  void* data = nullptr;
};

void CUDA_CB RunCallback(CUstream stream, CUresult status, void* data) {
  const auto* c = static_cast<const Callback*>(data);
  c->fn(stream, ToCudaError(status), c->data);
}

cudaError_t AddCallback(cudaStream_t stream, cudaStreamCallback_t fn, void* data, unsigned flags,
                        bool per_thread) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  // The driver runs the callback before it returns, so the payload can live here.
  Callback c{fn, data};
  return WithContext([&] {
    const DriverApi& d = Drv();
    return (per_thread ? d.cuStreamAddCallback_ptsz : d.cuStreamAddCallback)(stream, RunCallback,
                                                                             &c, flags);
  });
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Graphs and their nodes

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) {
  return TraceRuntime(
      GWSIM_RT(cudaGraphCreate, v10000), GWSIM_RT_PARAMS(cudaGraphCreate, v10000){pGraph, flags},
      [&] { return WithContext([&] { return Drv().cuGraphCreate(pGraph, flags); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  return TraceRuntime(GWSIM_RT(cudaGraphDestroy, v10000),
                      GWSIM_RT_PARAMS(cudaGraphDestroy, v10000){graph},
                      [&] { return WithContext([&] { return Drv().cuGraphDestroy(graph); }); });
}

// Defines the call `name` that adds a node to `graph` after `pDependencies`: its parameters are
// pGraphNode, graph, pDependencies, numDependencies and then `params` (their names: `args`);
// traced under its own cbid (of its own `version`), it runs `body`.
#define GWSIM_RT_ADD_NODE(name, version, params, args, ...)                                   \
  GWSIM_RT_TRACED(                                                                            \
      name, version, false,                                                                   \
      (cudaGraphNode_t * pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies, \
       size_t numDependencies, GWSIM_UNPAREN params),                                         \
      (pGraphNode, graph, pDependencies, numDependencies, GWSIM_UNPAREN args), __VA_ARGS__)

GWSIM_RT_ADD_NODE(cudaGraphAddKernelNode, v10000, (const struct cudaKernelNodeParams* p), (p), {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = EnsureContext(); e != cudaSuccess) return e;
  CUDA_KERNEL_NODE_PARAMS c{};
  if (cudaError_t e = KernelParams(p->func, p->gridDim, p->blockDim, p->sharedMemBytes,
                                   p->kernelParams, p->extra, &c);
      e != cudaSuccess) {
    return e;
  }
  return ToCudaError(
      Drv().cuGraphAddKernelNode_v2(pGraphNode, graph, pDependencies, numDependencies, &c));
})

GWSIM_RT_ADD_NODE(cudaGraphAddMemcpyNode, v10000, (const struct cudaMemcpy3DParms* p), (p),
                  { return AddMemcpy(pGraphNode, graph, pDependencies, numDependencies, p); })

GWSIM_RT_ADD_NODE(cudaGraphAddMemcpyNode1D, v11010,
                  (void* dst, const void* src, size_t count, enum cudaMemcpyKind kind),
                  (dst, src, count, kind), {
                    // A 3D copy of one row of `count` bytes.
                    cudaMemcpy3DParms p{};
                    p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
                    p.dstPtr = cudaPitchedPtr{dst, count, count, 1};
                    p.extent = cudaExtent{count, 1, 1};
                    p.kind = kind;
                    return AddMemcpy(pGraphNode, graph, pDependencies, numDependencies, &p);
                  })

GWSIM_RT_ADD_NODE(cudaGraphAddMemsetNode, v10000, (const struct cudaMemsetParams* p), (p), {
  if (p == nullptr) return cudaErrorInvalidValue;
  CUcontext ctx = nullptr;
  if (cudaError_t e = Current(&ctx); e != cudaSuccess) return e;
  CUDA_MEMSET_NODE_PARAMS c{};
  MemsetParams(*p, &c);
  return ToCudaError(
      Drv().cuGraphAddMemsetNode(pGraphNode, graph, pDependencies, numDependencies, &c, ctx));
})

GWSIM_RT_ADD_NODE(cudaGraphAddHostNode, v10000, (const struct cudaHostNodeParams* p), (p), {
  if (p == nullptr) return cudaErrorInvalidValue;
  return WithContext([&] {
    CUDA_HOST_NODE_PARAMS c{p->fn, p->userData};
    return Drv().cuGraphAddHostNode(pGraphNode, graph, pDependencies, numDependencies, &c);
  });
})

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode,
                                                         cudaGraph_t graph,
                                                         const cudaGraphNode_t* pDependencies,
                                                         size_t numDependencies) {
  return TraceRuntime(GWSIM_RT(cudaGraphAddEmptyNode, v10000),
                      GWSIM_RT_PARAMS(cudaGraphAddEmptyNode, v10000){
                          pGraphNode, graph, pDependencies, numDependencies},
                      [&] {
                        return WithContext([&] {
                          return Drv().cuGraphAddEmptyNode(pGraphNode, graph, pDependencies,
                                                           numDependencies);
                        });
                      });
}

GWSIM_RT_ADD_NODE(cudaGraphAddMemAllocNode, v11040, (struct cudaMemAllocNodeParams * p), (p), {
  if (p == nullptr) return cudaErrorInvalidValue;
  return WithContext([&] {
    CUDA_MEM_ALLOC_NODE_PARAMS c{};
    AllocParams(*p, &c);
    const CUresult r =
        Drv().cuGraphAddMemAllocNode(pGraphNode, graph, pDependencies, numDependencies, &c);
    if (r == CUDA_SUCCESS) p->dptr = reinterpret_cast<void*>(c.dptr);
    return r;
  });
})

GWSIM_RT_ADD_NODE(cudaGraphAddMemFreeNode, v11040, (void* dptr), (dptr), {
  return WithContext([&] {
    return Drv().cuGraphAddMemFreeNode(pGraphNode, graph, pDependencies, numDependencies,
                                       Dev(dptr));
  });
})

GWSIM_RT_ADD_NODE(cudaGraphAddChildGraphNode, v10000, (cudaGraph_t childGraph), (childGraph), {
  return WithContext([&] {
    return Drv().cuGraphAddChildGraphNode(pGraphNode, graph, pDependencies, numDependencies,
                                          childGraph);
  });
})

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphAddNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                    const cudaGraphNode_t* pDependencies,
                                                    const cudaGraphEdgeData* dependencyData,
                                                    size_t numDependencies,
                                                    struct cudaGraphNodeParams* nodeParams) {
  return TraceRuntime(
      GWSIM_RT(cudaGraphAddNode, v12030),
      GWSIM_RT_PARAMS(cudaGraphAddNode, v12030){pGraphNode, graph, pDependencies, dependencyData,
                                                numDependencies, nodeParams},
      [&] {
        return AddGeneric(pGraphNode, graph, pDependencies, dependencyData, numDependencies,
                          nodeParams);
      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphClone(cudaGraph_t* pGraphClone,
                                                  cudaGraph_t originalGraph) {
  return TraceRuntime(
      GWSIM_RT(cudaGraphClone, v10000),
      GWSIM_RT_PARAMS(cudaGraphClone, v10000){pGraphClone, originalGraph},
      [&] { return WithContext([&] { return Drv().cuGraphClone(pGraphClone, originalGraph); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                                                     size_t* numNodes) {
  return TraceRuntime(
      GWSIM_RT(cudaGraphGetNodes, v10000),
      GWSIM_RT_PARAMS(cudaGraphGetNodes, v10000){graph, nodes, numNodes},
      [&] { return WithContext([&] { return Drv().cuGraphGetNodes(graph, nodes, numNodes); }); });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphNodeGetType(cudaGraphNode_t node,
                                                        enum cudaGraphNodeType* pType) {
  return TraceRuntime(GWSIM_RT(cudaGraphNodeGetType, v10000),
                      GWSIM_RT_PARAMS(cudaGraphNodeGetType, v10000){node, pType}, [&] {
                        if (pType == nullptr) return cudaErrorInvalidValue;
                        return WithContext([&] {
                          CUgraphNodeType t{};
                          const CUresult r = Drv().cuGraphNodeGetType(node, &t);
                          if (r == CUDA_SUCCESS) *pType = static_cast<cudaGraphNodeType>(t);
                          return r;
                        });
                      });
}

// Executable graphs

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* pGraphExec,
                                                        cudaGraph_t graph,
                                                        unsigned long long flags) {
  return TraceRuntime(GWSIM_RT(cudaGraphInstantiate, v12000),
                      GWSIM_RT_PARAMS(cudaGraphInstantiate, v12000){pGraphExec, graph, flags}, [&] {
                        return WithContext([&] {
                          return Drv().cuGraphInstantiateWithFlags(pGraphExec, graph, flags);
                        });
                      });
}

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec,
                                                                 cudaGraph_t graph,
                                                                 unsigned long long flags) {
  return TraceRuntime(
      GWSIM_RT(cudaGraphInstantiateWithFlags, v11040),
      GWSIM_RT_PARAMS(cudaGraphInstantiateWithFlags, v11040){pGraphExec, graph, flags}, [&] {
        return WithContext(
            [&] { return Drv().cuGraphInstantiateWithFlags(pGraphExec, graph, flags); });
      });
}

GWSIM_RT_PER_THREAD_TWINS(cudaGraphInstantiateWithParams, v12000,
                          cudaGraphInstantiateWithParams_ptsz, v12000,
                          (cudaGraphExec_t * pGraphExec, cudaGraph_t graph,
                           cudaGraphInstantiateParams* instantiateParams),
                          (pGraphExec, graph, instantiateParams),
                          { return Instantiate(pGraphExec, graph, instantiateParams, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaGraphLaunch, v10000, cudaGraphLaunch_ptsz, v10000,
                          (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream), {
                            return InContext(per_thread, Drv().cuGraphLaunch,
                                             Drv().cuGraphLaunch_ptsz, graphExec, stream);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaGraphUpload, v10000, cudaGraphUpload_ptsz, v10000,
                          (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream), {
                            return InContext(per_thread, Drv().cuGraphUpload,
                                             Drv().cuGraphUpload_ptsz, graphExec, stream);
                          })

GWSIM_EXPORT cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  return TraceRuntime(GWSIM_RT(cudaGraphExecDestroy, v10000),
                      GWSIM_RT_PARAMS(cudaGraphExecDestroy, v10000){graphExec}, [&] {
                        return WithContext([&] { return Drv().cuGraphExecDestroy(graphExec); });
                      });
}

// Graph memory

GWSIM_EXPORT cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int device) {
  return TraceRuntime(GWSIM_RT(cudaDeviceGraphMemTrim, v11040),
                      GWSIM_RT_PARAMS(cudaDeviceGraphMemTrim, v11040){device}, [&] {
                        return WithDriver([&] { return Drv().cuDeviceGraphMemTrim(device); });
                      });
}

GWSIM_RT_TRACED(cudaDeviceGetGraphMemAttribute, v11040, false,
                (int device, enum cudaGraphMemAttributeType attr, void* value),
                (device, attr, value), {
                  return GraphMemAttribute(Drv().cuDeviceGetGraphMemAttribute, device, attr, value);
                })

GWSIM_RT_TRACED(cudaDeviceSetGraphMemAttribute, v11040, false,
                (int device, enum cudaGraphMemAttributeType attr, void* value),
                (device, attr, value), {
                  return GraphMemAttribute(Drv().cuDeviceSetGraphMemAttribute, device, attr, value);
                })

// Stream capture

GWSIM_RT_PER_THREAD_TWINS(cudaStreamBeginCapture, v10000, cudaStreamBeginCapture_ptsz, v10000,
                          (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode), {
                            return InContext(per_thread, Drv().cuStreamBeginCapture_v2,
                                             Drv().cuStreamBeginCapture_v2_ptsz, stream,
                                             static_cast<CUstreamCaptureMode>(mode));
                          })

GWSIM_RT_PER_THREAD_TWINS(
    cudaStreamBeginCaptureToGraph, v12030, cudaStreamBeginCaptureToGraph_ptsz, v12030,
    (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
     const cudaGraphEdgeData* dependencyData, size_t numDependencies,
     enum cudaStreamCaptureMode mode),
    (stream, graph, dependencies, dependencyData, numDependencies, mode), {
      return InContext(per_thread, Drv().cuStreamBeginCaptureToGraph,
                       Drv().cuStreamBeginCaptureToGraph_ptsz, stream, graph, dependencies,
                       reinterpret_cast<const CUgraphEdgeData*>(dependencyData), numDependencies,
                       static_cast<CUstreamCaptureMode>(mode));
    })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamEndCapture, v10000, cudaStreamEndCapture_ptsz, v10000,
                          (cudaStream_t stream, cudaGraph_t* pGraph), (stream, pGraph), {
                            return InContext(per_thread, Drv().cuStreamEndCapture,
                                             Drv().cuStreamEndCapture_ptsz, stream, pGraph);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamIsCapturing, v10000, cudaStreamIsCapturing_ptsz, v10000,
                          (cudaStream_t stream, enum cudaStreamCaptureStatus* pStatus),
                          (stream, pStatus), { return IsCapturing(stream, pStatus, per_thread); })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamGetCaptureInfo, v12030, cudaStreamGetCaptureInfo_ptsz, v12030,
                          (cudaStream_t stream, enum cudaStreamCaptureStatus* status,
                           unsigned long long* id, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                           const cudaGraphEdgeData** edges, size_t* count),
                          (stream, status, id, graph, deps, edges, count), {
                            return CaptureInfo(per_thread, stream, status, id, graph, deps, edges,
                                               count);
                          })

GWSIM_EXPORT cudaError_t CUDARTAPI
cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  return TraceRuntime(GWSIM_RT(cudaThreadExchangeStreamCaptureMode, v10010),
                      GWSIM_RT_PARAMS(cudaThreadExchangeStreamCaptureMode, v10010){mode}, [&] {
                        if (mode == nullptr) return cudaErrorInvalidValue;
                        return WithDriver([&] {
                          auto m = static_cast<CUstreamCaptureMode>(*mode);
                          const CUresult r = Drv().cuThreadExchangeStreamCaptureMode(&m);
                          if (r == CUDA_SUCCESS) *mode = static_cast<cudaStreamCaptureMode>(m);
                          return r;
                        });
                      });
}

// Host functions

GWSIM_RT_PER_THREAD_TWINS(cudaLaunchHostFunc, v10000, cudaLaunchHostFunc_ptsz, v10000,
                          (cudaStream_t stream, cudaHostFn_t fn, void* userData),
                          (stream, fn, userData), {
                            return InContext(per_thread, Drv().cuLaunchHostFunc,
                                             Drv().cuLaunchHostFunc_ptsz, stream, fn, userData);
                          })

GWSIM_RT_PER_THREAD_TWINS(cudaStreamAddCallback, v5000, cudaStreamAddCallback_ptsz, v7000,
                          (cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                           unsigned int flags),
                          (stream, callback, userData, flags),
                          { return AddCallback(stream, callback, userData, flags, per_thread); })
