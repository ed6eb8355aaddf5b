// Reading copies, graph nodes and graph launches from a call's `*_params`
// struct (see call_readers.h). Included by calls.cc alone.
#ifndef GPUWATCH_INTERPOSE_CALLS_COPY_READERS_H_
#define GPUWATCH_INTERPOSE_CALLS_COPY_READERS_H_

#include <cstdint>

#include "interpose/calls/call_readers.h"

namespace gpuwatch::call_readers {

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
inline uint64_t Bytes3D(const cudaMemcpy3DParms& p) {
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

// Whether a batch operand is a CUDA array: the runtime's and the driver's
// operand types.
constexpr bool IsArrayOperand(cudaMemcpy3DOperandType type) {
  return type == cudaMemcpyOperandTypeArray;
}
constexpr bool IsArrayOperand(CUmemcpy3DOperandType type) {
  return type == CU_MEMCPY_OPERAND_TYPE_ARRAY;
}

// One operation of a 3D batch: its extent, in elements of its array operand
// (the destination's when both are arrays) or in bytes.
template <typename Op>
uint64_t Batch3DBytes(const Op& op) {
  uint32_t element = 1;
  if (IsArrayOperand(op.src.type)) element = ArrayElementBytes(Addr(op.src.op.array.array));
  if (IsArrayOperand(op.dst.type)) element = ArrayElementBytes(Addr(op.dst.op.array.array));
  return Volume(op.extent.width * element, op.extent.height, op.extent.depth);
}

// cudaMemcpy3DBatchAsync and cuMemcpy3DBatchAsync: one record per operation.
template <typename P>
bool ReadMemcpy3DBatch(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto& p = Params<P>(d);
  uint64_t bytes = 0;
  for (size_t i = 0; p.opList != nullptr && i < p.numOps; ++i) {
    bytes += Batch3DBytes(p.opList[i]);
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
inline size_t DepthOf(const CUDA_MEMCPY2D&) { return 1; }
inline size_t DepthOf(const CUDA_MEMCPY3D& p) { return p.Depth; }

// cuMemcpy2D and cuMemcpy3D (and their async forms): a descriptor.
template <typename P, bool kAsync>
bool ReadDriverCopyDescriptor(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  const auto* p = Params<P>(d).pCopy;
  if (p == nullptr) return false;
  return SetCopy(c, Volume(p->WidthInBytes, p->Height, DepthOf(*p)),
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

inline bool NodeOnly(ParsedCall* c, bool parsed) {
  c->node_only = true;
  return parsed;
}

// A kernel node added to a graph (cudaGraphAddKernelNode, cuGraphAddKernelNode
// and their generic forms): no launch now; the kernel runs at each launch of
// the graph's instances.
template <typename P>
bool ReadGraphKernelNode(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  c->role = Role::kLaunch;
  if (d != nullptr && d->functionParams != nullptr) {
    const auto& p = Params<P>(d);
    if constexpr (requires { p.pNodeParams; }) {
      if (p.pNodeParams != nullptr) c->kernel_func = p.pNodeParams->func;
    } else if constexpr (requires { p.nodeParams->func; }) {
      if (p.nodeParams != nullptr) c->kernel_func = p.nodeParams->func;
      c->kernel_func_driver = true;
    }
  }
  return NodeOnly(c, true);
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
    case cudaGraphNodeTypeKernel:
      c->role = Role::kLaunch;
      c->kernel_func = p->kernel.func;
      return NodeOnly(c, true);
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
    case CU_GRAPH_NODE_TYPE_KERNEL:
      c->role = Role::kLaunch;
      c->kernel_func = p->kernel.func;
      c->kernel_func_driver = true;
      return NodeOnly(c, true);
    default:
      return false;
  }
}

// cudaGraphLaunch and cuGraphLaunch: the exec launched, by the name each
// params struct gives it.
template <typename P>
bool ReadGraphLaunch(const CUpti_CallbackData* d, bool, ParsedCall* c) {
  c->role = Role::kGraphLaunch;
  const auto& p = Params<P>(d);
  if constexpr (requires { p.graphExec; }) {
    c->graph_exec = p.graphExec;
  } else if constexpr (requires { p.hGraphExec; }) {
    c->graph_exec = p.hGraphExec;
  } else {
    c->graph_exec = p.hGraph;
  }
  return true;
}

}  // namespace gpuwatch::call_readers

#endif  // GPUWATCH_INTERPOSE_CALLS_COPY_READERS_H_
