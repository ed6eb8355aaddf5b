// Exported driver API: graphs, executable graphs, graph memory, stream capture, host functions.
#include "driver/cuda_headers.h"
#include "driver/graph_internal.h"
#include "driver/state.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

template <typename P>
NodeData KernelNode(const P& p, CUfunction f) {
  NodeData d;
  d.type = CU_GRAPH_NODE_TYPE_KERNEL;
  d.kernel.function = f;
  d.kernel.grid[0] = p.gridDimX;
  d.kernel.grid[1] = p.gridDimY;
  d.kernel.grid[2] = p.gridDimZ;
  d.kernel.block[0] = p.blockDimX;
  d.kernel.block[1] = p.blockDimY;
  d.kernel.block[2] = p.blockDimZ;
  d.kernel.shared_mem = p.sharedMemBytes;
  return d;
}

// A CUkernel is the same object as its CUfunction in the simulator.
template <typename P>
NodeData KernelNodeV2(const P& p) {
  return KernelNode(p, p.func != nullptr ? p.func : reinterpret_cast<CUfunction>(p.kern));
}

CUresult CheckNodeContext(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidContext(ctx) || !ctx->active.load()) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult MemcpyNode(const CUDA_MEMCPY3D* copy, CUcontext ctx, NodeData* d) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckNodeContext(ctx); r != CUDA_SUCCESS) return r;
  d->type = CU_GRAPH_NODE_TYPE_MEMCPY;
  d->copy_is_descriptor = true;
  d->copy_descriptor = *copy;
  return CUDA_SUCCESS;
}

template <typename P>
CUresult MemsetNode(const P* p, CUcontext ctx, NodeData* d) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckNodeContext(ctx); r != CUDA_SUCCESS) return r;
  d->type = CU_GRAPH_NODE_TYPE_MEMSET;
  d->memset = MemsetParams{p->dst, p->value, p->elementSize, p->width, p->height, p->pitch};
  return CUDA_SUCCESS;
}

// The allocation of a mem-alloc node: pinned device memory, no IPC handles.
template <typename P>
CUresult AllocNode(const P* p, NodeData* d) {
  if (p == nullptr || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUmemPoolProps& props = p->poolProps;
  if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      props.handleTypes != CU_MEM_HANDLE_TYPE_NONE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckDevice(props.location.id); r != CUDA_SUCCESS) {
    return r == CUDA_ERROR_INVALID_DEVICE ? CUDA_ERROR_INVALID_VALUE : r;
  }
  if (p->accessDescCount > D().devices.size() || (p->accessDescCount > 0 && !p->accessDescs)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < p->accessDescCount; ++i) {
    const CUmemAccessDesc& a = p->accessDescs[i];
    if (a.location.type != CU_MEM_LOCATION_TYPE_DEVICE || CheckDevice(a.location.id) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  d->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  d->alloc = new GraphAlloc();
  d->alloc->size = p->bytesize;
  d->alloc->device = props.location.id;
  return CUDA_SUCCESS;
}

// Adds a node; an allocation node's address is written to *dptr_out.
CUresult Add(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
             size_t count, const NodeData& data, CUdeviceptr* dptr_out = nullptr) {
  const CUresult r = GraphAddNode(out, graph, deps, edges, count, data);
  if (r == CUDA_SUCCESS && dptr_out != nullptr) *dptr_out = (*out)->data.alloc->base;
  return r;
}

// Adds the node `make` fills in (MemcpyNode, MemsetNode), once the driver is initialised.
template <typename Make>
CUresult AddMade(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                 Make&& make) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  NodeData d;
  if (CUresult r = make(&d); r != CUDA_SUCCESS) return r;
  return Add(out, graph, deps, nullptr, count, d);
}

template <typename P>
CUresult AddMemAlloc(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                     const CUgraphEdgeData* edges, size_t count, P* params) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  NodeData d;
  if (CUresult r = AllocNode(params, &d); r != CUDA_SUCCESS) return r;
  return Add(out, graph, deps, edges, count, d, &params->dptr);
}

// cuGraphAddNode: the generic form.
CUresult AddGeneric(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                    const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* p) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (p == nullptr || p->reserved0[0] != 0 || p->reserved0[1] != 0 || p->reserved0[2] != 0 ||
      p->reserved2 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  NodeData d;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      d = KernelNodeV2(p->kernel);
      break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (p->memcpy.flags != 0 || p->memcpy.reserved != 0) return CUDA_ERROR_INVALID_VALUE;
      if (CUresult r = MemcpyNode(&p->memcpy.copyParams, p->memcpy.copyCtx, &d);
          r != CUDA_SUCCESS) {
        return r;
      }
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
      if (CUresult r = MemsetNode(&p->memset, p->memset.ctx, &d); r != CUDA_SUCCESS) return r;
      break;
    case CU_GRAPH_NODE_TYPE_HOST:
      d.type = CU_GRAPH_NODE_TYPE_HOST;
      d.host_fn = p->host.fn;
      d.host_data = p->host.userData;
      break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      // Moving the child graph into the parent is not simulated.
      if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
        return p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE ? CUDA_ERROR_NOT_SUPPORTED
                                                                         : CUDA_ERROR_INVALID_VALUE;
      }
      d.type = CU_GRAPH_NODE_TYPE_GRAPH;
      d.child_src = p->graph.graph;
      break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      d.type = CU_GRAPH_NODE_TYPE_EMPTY;
      break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      if (CUresult r = AllocNode(&p->alloc, &d); r != CUDA_SUCCESS) return r;
      return Add(out, graph, deps, edges, count, d, &p->alloc.dptr);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      d.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
      d.free_ptr = p->free.dptr;
      break;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;  // event, semaphore, batch mem-op, conditional nodes
  }
  return Add(out, graph, deps, edges, count, d);
}

NodeData Typed(CUgraphNodeType type) {
  NodeData d;
  d.type = type;
  return d;
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

// Graphs and their nodes

GWSIM_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  return TraceDriver(GWSIM_DRV(cuGraphCreate), cuGraphCreate_params{phGraph, flags},
                     [&] { return GraphCreate(phGraph, flags); });
}

GWSIM_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  return TraceDriver(GWSIM_DRV(cuGraphDestroy), cuGraphDestroy_params{hGraph},
                     [&] { return GraphDestroy(hGraph); });
}

// Defines the entry point `name` that adds a node to hGraph after `dependencies`: its parameters
// are phGraphNode, hGraph, dependencies, numDependencies and then `params` (their names:
// `args`); traced under its own cbid, it runs `body`.
#define GWSIM_DRV_ADD_NODE(name, params, args, ...)                                             \
  GWSIM_DRV_TRACED(name, false,                                                                 \
                   (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, \
                    size_t numDependencies, GWSIM_UNPAREN params),                              \
                   (phGraphNode, hGraph, dependencies, numDependencies, GWSIM_UNPAREN args),    \
                   __VA_ARGS__)

GWSIM_DRV_ADD_NODE(cuGraphAddKernelNode, (const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams),
                   (nodeParams), {
                     if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
                     return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                                KernelNode(*nodeParams, nodeParams->func));
                   })

GWSIM_DRV_ADD_NODE(cuGraphAddKernelNode_v2, (const CUDA_KERNEL_NODE_PARAMS* nodeParams),
                   (nodeParams), {
                     if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
                     return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                                KernelNodeV2(*nodeParams));
                   })

GWSIM_DRV_ADD_NODE(cuGraphAddMemcpyNode, (const CUDA_MEMCPY3D* copyParams, CUcontext ctx),
                   (copyParams, ctx), {
                     return AddMade(phGraphNode, hGraph, dependencies, numDependencies,
                                    [&](NodeData* d) { return MemcpyNode(copyParams, ctx, d); });
                   })

GWSIM_DRV_ADD_NODE(cuGraphAddMemsetNode,
                   (const CUDA_MEMSET_NODE_PARAMS* memsetParams, CUcontext ctx),
                   (memsetParams, ctx), {
                     return AddMade(phGraphNode, hGraph, dependencies, numDependencies,
                                    [&](NodeData* d) { return MemsetNode(memsetParams, ctx, d); });
                   })

GWSIM_DRV_ADD_NODE(cuGraphAddHostNode, (const CUDA_HOST_NODE_PARAMS* nodeParams), (nodeParams), {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  NodeData d = Typed(CU_GRAPH_NODE_TYPE_HOST);
  d.host_fn = nodeParams->fn;
  d.host_data = nodeParams->userData;
  return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies, d);
})

GWSIM_DRV_ADD_NODE(cuGraphAddChildGraphNode, (CUgraph childGraph), (childGraph), {
  NodeData d = Typed(CU_GRAPH_NODE_TYPE_GRAPH);
  d.child_src = childGraph;
  return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies, d);
})

GWSIM_EXPORT CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  size_t numDependencies) {
  return TraceDriver(GWSIM_DRV(cuGraphAddEmptyNode),
                     cuGraphAddEmptyNode_params{phGraphNode, hGraph, dependencies, numDependencies},
                     [&] {
                       return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                                  Typed(CU_GRAPH_NODE_TYPE_EMPTY));
                     });
}

GWSIM_DRV_ADD_NODE(cuGraphAddMemAllocNode, (CUDA_MEM_ALLOC_NODE_PARAMS * nodeParams), (nodeParams),
                   {
                     return AddMemAlloc(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                                        nodeParams);
                   })

GWSIM_DRV_ADD_NODE(cuGraphAddMemFreeNode, (CUdeviceptr dptr), (dptr), {
  NodeData d = Typed(CU_GRAPH_NODE_TYPE_MEM_FREE);
  d.free_ptr = dptr;
  return Add(phGraphNode, hGraph, dependencies, nullptr, numDependencies, d);
})

GWSIM_DRV_ADD_NODE(cuGraphAddNode, (CUgraphNodeParams * nodeParams), (nodeParams), {
  return AddGeneric(phGraphNode, hGraph, dependencies, nullptr, numDependencies, nodeParams);
})

GWSIM_EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                const CUgraphNode* dependencies,
                                                const CUgraphEdgeData* dependencyData,
                                                size_t numDependencies,
                                                CUgraphNodeParams* nodeParams) {
  return TraceDriver(GWSIM_DRV(cuGraphAddNode_v2),
                     cuGraphAddNode_v2_params{phGraphNode, hGraph, dependencies, dependencyData,
                                              numDependencies, nodeParams},
                     [&] {
                       return AddGeneric(phGraphNode, hGraph, dependencies, dependencyData,
                                         numDependencies, nodeParams);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuGraphClone(CUgraph* phGraphClone, CUgraph originalGraph) {
  return TraceDriver(GWSIM_DRV(cuGraphClone), cuGraphClone_params{phGraphClone, originalGraph},
                     [&] { return GraphClone(phGraphClone, originalGraph); });
}

GWSIM_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes,
                                              size_t* numNodes) {
  return TraceDriver(GWSIM_DRV(cuGraphGetNodes), cuGraphGetNodes_params{hGraph, nodes, numNodes},
                     [&] { return GraphGetNodes(hGraph, nodes, numNodes); });
}

GWSIM_EXPORT CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  return TraceDriver(GWSIM_DRV(cuGraphNodeGetType), cuGraphNodeGetType_params{hNode, type},
                     [&] { return GraphNodeGetType(hNode, type); });
}

// Executable graphs

GWSIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                          unsigned long long flags) {
  return TraceDriver(GWSIM_DRV(cuGraphInstantiateWithFlags),
                     cuGraphInstantiateWithFlags_params{phGraphExec, hGraph, flags},
                     [&] { return GraphInstantiate(phGraphExec, hGraph, flags, nullptr); });
}

GWSIM_DRV_PER_THREAD_TWINS(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz,
                           (CUgraphExec * phGraphExec, CUgraph hGraph,
                            CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams),
                           (phGraphExec, hGraph, instantiateParams), {
                             if (instantiateParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
                             return GraphInstantiate(phGraphExec, hGraph, instantiateParams->flags,
                                                     instantiateParams);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuGraphLaunch, cuGraphLaunch_ptsz,
                           (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream),
                           { return GraphLaunch(hGraphExec, hStream, per_thread); })

GWSIM_DRV_PER_THREAD_TWINS(cuGraphUpload, cuGraphUpload_ptsz,
                           (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream),
                           { return GraphUpload(hGraphExec, hStream, per_thread); })

GWSIM_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  return TraceDriver(GWSIM_DRV(cuGraphExecDestroy), cuGraphExecDestroy_params{hGraphExec},
                     [&] { return GraphExecDestroy(hGraphExec); });
}

// Graph memory

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device) {
  return TraceDriver(GWSIM_DRV(cuDeviceGraphMemTrim), cuDeviceGraphMemTrim_params{device},
                     [&] { return GraphMemTrim(device); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device,
                                                           CUgraphMem_attribute attr, void* value) {
  return TraceDriver(GWSIM_DRV(cuDeviceGetGraphMemAttribute),
                     cuDeviceGetGraphMemAttribute_params{device, attr, value},
                     [&] { return GraphMemGetAttribute(device, attr, value); });
}

GWSIM_EXPORT CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device,
                                                           CUgraphMem_attribute attr, void* value) {
  return TraceDriver(GWSIM_DRV(cuDeviceSetGraphMemAttribute),
                     cuDeviceSetGraphMemAttribute_params{device, attr, value},
                     [&] { return GraphMemSetAttribute(device, attr, value); });
}

// Stream capture

GWSIM_DRV_PER_THREAD_TWINS(cuStreamBeginCapture, cuStreamBeginCapture_ptsz, (CUstream hStream),
                           (hStream), {
                             return BeginCapture(hStream, per_thread, CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 nullptr, nullptr, nullptr, 0);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz,
                           (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode), {
                             return BeginCapture(hStream, per_thread, mode, nullptr, nullptr,
                                                 nullptr, 0);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph_ptsz,
                           (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                            const CUgraphEdgeData* dependencyData, size_t numDependencies,
                            CUstreamCaptureMode mode),
                           (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), {
                             if (hGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
                             return BeginCapture(hStream, per_thread, mode, hGraph, dependencies,
                                                 dependencyData, numDependencies);
                           })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamEndCapture, cuStreamEndCapture_ptsz,
                           (CUstream hStream, CUgraph* phGraph), (hStream, phGraph),
                           { return EndCapture(hStream, per_thread, phGraph); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamIsCapturing, cuStreamIsCapturing_ptsz,
                           (CUstream hStream, CUstreamCaptureStatus* captureStatus),
                           (hStream, captureStatus),
                           { return IsCapturing(hStream, per_thread, captureStatus); })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz,
                           (CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                            cuuint64_t* id_out),
                           (hStream, captureStatus_out, id_out), {
                             return GetCaptureInfo(hStream, per_thread, captureStatus_out, id_out,
                                                   nullptr, nullptr, nullptr, nullptr);
                           })

GWSIM_DRV_PER_THREAD_TWINS(
    cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz,
    (CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out,
     CUgraph* graph_out, const CUgraphNode** dependencies_out, size_t* numDependencies_out),
    (hStream, captureStatus_out, id_out, graph_out, dependencies_out, numDependencies_out), {
      return GetCaptureInfo(hStream, per_thread, captureStatus_out, id_out, graph_out,
                            dependencies_out, nullptr, numDependencies_out);
    })

GWSIM_DRV_PER_THREAD_TWINS(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz,
                           (CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                            cuuint64_t* id_out, CUgraph* graph_out,
                            const CUgraphNode** dependencies_out,
                            const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out),
                           (hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                            edgeData_out, numDependencies_out),
                           {
                             return GetCaptureInfo(hStream, per_thread, captureStatus_out, id_out,
                                                   graph_out, dependencies_out, edgeData_out,
                                                   numDependencies_out);
                           })

GWSIM_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  return TraceDriver(GWSIM_DRV(cuThreadExchangeStreamCaptureMode),
                     cuThreadExchangeStreamCaptureMode_params{mode},
                     [&] { return ExchangeCaptureMode(mode); });
}

// Host functions

GWSIM_DRV_PER_THREAD_TWINS(cuLaunchHostFunc, cuLaunchHostFunc_ptsz,
                           (CUstream hStream, CUhostFn fn, void* userData), (hStream, fn, userData),
                           { return LaunchHostFunc(hStream, per_thread, fn, userData); })

GWSIM_DRV_PER_THREAD_TWINS(
    cuStreamAddCallback, cuStreamAddCallback_ptsz,
    (CUstream hStream, CUstreamCallback callback, void* userData, unsigned int flags),
    (hStream, callback, userData, flags),
    { return StreamAddCallback(hStream, per_thread, callback, userData, flags); })
