// Executable graphs: instantiation, launch (each node's work on the calling thread), graph
// memory.
#include <sys/mman.h>

#include <unordered_map>

#include "driver/graph_internal.h"
#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {

namespace {

// The node being run by a launch on this thread, and the API frame of that launch: a call made
// from a callback during the launch has a frame of its own, and its work is not the graph's.
struct LaunchScope {
  GraphNodeScope node;
  const gwsim_api_frame* frame = nullptr;  // null: not running a graph
};
thread_local LaunchScope t_launch;  // trivially destructible

struct LaunchEnv {
  CUstream handle = nullptr;  // as passed to cuGraphLaunch
  bool per_thread = false;
  CUstream_st* stream = nullptr;
  uint32_t graph_id = 0;
};

bool RunningHere() { return t_launch.frame != nullptr && t_launch.frame == T().top_frame; }

void CloneIntoExecLocked(CUgraph_st* src, CUgraphExec_st* exec, std::vector<CUgraphNode_st*>* out,
                         GraphEvents* events) {
  std::unordered_map<CUgraphNode_st*, CUgraphNode_st*> map;
  for (CUgraphNode_st* n : src->nodes) {
    CUgraphNode_st* c = NewNodeLocked(n->data);
    c->exec = exec;
    for (CUgraphNode_st* d : n->deps) c->deps.push_back(map.at(d));
    map[n] = c;
    out->push_back(c);
    CUpti_GraphData e{};
    e.graph = nullptr;  // an exec's node belongs to no graph
    e.originalGraph = src;
    e.node = c;
    e.originalNode = n;
    e.nodeType = n->data.type;
    e.graphExec = exec;
    events->Add(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, e);
    if (n->data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      exec->allocs.push_back(n->data.alloc);
      ++n->data.alloc->refs;
    }
    if (n->child != nullptr) CloneIntoExecLocked(n->child, exec, &c->sub, events);
  }
}

void ForgetExecNodesLocked(const std::vector<CUgraphNode_st*>& nodes) {
  GraphState& s = Graphs();
  for (CUgraphNode_st* n : nodes) {
    ForgetExecNodesLocked(n->sub);
    s.nodes.erase(n);
    s.retired.push_back(n);
  }
}

// The context a graph allocation's MEMORY2 records and table entry belong to.
CUctx_st* AllocContext(const GraphAlloc* a, CUstream_st* stream) {
  if (stream->ctx->device == a->device) return stream->ctx;
  return D().devices[a->device]->primary;
}

// A launch reaches an allocation node: the memory (charged at the start of the launch) is
// mapped and recorded.
CUresult MapGraphAlloc(GraphAlloc* a, CUstream_st* stream) {
  GraphState& s = Graphs();
  Allocation al;
  {
    std::lock_guard lock(s.mu);
    if (a->state != GraphAlloc::kPending) return CUDA_ERROR_INVALID_VALUE;
    if (mprotect(reinterpret_cast<void*>(a->base), a->reserved, PROT_READ | PROT_WRITE) != 0) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    al.base = a->base;
    al.size = a->size;
    al.origin = Origin::kGraph;
    al.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    al.device = a->device;
    al.ctx = AllocContext(a, stream);
    al.charged = 0;  // the device's graph pool holds the charge
    al.stream_id = stream->id;
    al.buffer_id = D().next_buffer_id.fetch_add(1);
    if (!D().memory.Insert(al)) return CUDA_ERROR_INVALID_VALUE;
    a->state = GraphAlloc::kLive;
    s.used[a->device] += a->charge;
    s.high[a->device] = std::max(s.high[a->device], s.used[a->device]);
  }
  EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, al, true, stream->id);
  return CUDA_SUCCESS;
}

CUresult RunNodes(const std::vector<CUgraphNode_st*>& nodes, const LaunchEnv& env);

CUresult RunNode(CUgraphNode_st* n, const LaunchEnv& env) {
  const NodeData& d = n->data;
  switch (d.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      LaunchRequest k = d.kernel;
      k.stream = env.handle;
      k.per_thread = env.per_thread;
      return Launch(k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      if (d.copy_is_descriptor) {
        return CopyDescriptor3D(&d.copy_descriptor, env.handle, env.per_thread, true);
      }
      CopyRequest c = d.copy;
      c.stream = env.handle;
      c.per_thread = env.per_thread;
      c.async = true;
      return Copy(c);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const MemsetParams& m = d.memset;
      return Memset(m.dst, m.value, m.element_size, m.width, m.height, m.pitch, env.handle,
                    env.per_thread);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      RunOnHostThread([&d] { d.host_fn(d.host_data); });
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return RunNodes(n->sub, env);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      return MapGraphAlloc(d.alloc, env.stream);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return ReleaseGraphAlloc(d.alloc, true, env.stream->id);
    default:
      return CUDA_SUCCESS;  // empty
  }
}

CUresult RunNodes(const std::vector<CUgraphNode_st*>& nodes, const LaunchEnv& env) {
  for (CUgraphNode_st* n : nodes) {
    const GraphNodeScope outer = t_launch.node;
    t_launch.node = GraphNodeScope{n->id, env.graph_id};
    const CUresult r = RunNode(n, env);
    t_launch.node = outer;
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

GraphAlloc* RangeOf(GraphAlloc* a) { return a->range_owner != nullptr ? a->range_owner : a; }

// A launch holds a's memory: the first holder of its range takes the range's memory from the
// device's graph pool, which grows (charging the device) only by what it lacks.
bool HoldLocked(GraphAlloc* a) {
  GraphState& s = Graphs();
  GraphAlloc* range = RangeOf(a);
  if (range->held++ > 0) return true;
  const int d = range->device;
  const uint64_t need = s.committed[d] + range->charge;
  if (need > s.reserved[d]) {
    if (!Charge(d, need - s.reserved[d])) {
      --range->held;
      return false;
    }
    s.reserved[d] = need;
    s.reserved_high[d] = std::max(s.reserved_high[d], need);
  }
  s.committed[d] = need;
  return true;
}

// A launch no longer holds a's memory: the last holder returns it to the pool (not the device).
void LetGoLocked(GraphAlloc* a) {
  GraphAlloc* range = RangeOf(a);
  if (--range->held == 0) Graphs().committed[range->device] -= range->charge;
}

// Lets go of the allocations a launch held and did not reach.
void DropPendingLocked(const std::vector<GraphAlloc*>& allocs) {
  for (GraphAlloc* a : allocs) {
    if (a->state != GraphAlloc::kPending) continue;
    LetGoLocked(a);
    a->state = GraphAlloc::kIdle;
  }
}

CUresult ExecOf(CUgraphExec exec) {
  GraphState& s = Graphs();
  return exec != nullptr && s.execs.count(exec) != 0 && !exec->destroyed ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

GraphNodeScope CurrentGraphNode() { return RunningHere() ? t_launch.node : GraphNodeScope{}; }

bool ExecutingGraph() { return RunningHere(); }

CUresult GraphInstantiate(CUgraphExec* out, CUgraph graph, unsigned long long flags,
                          CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params != nullptr) {
    params->hErrNode_out = nullptr;
    params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  }
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  constexpr unsigned long long kKnown =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (out == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  // Upload is only for cuGraphInstantiateWithParams, device launch not with auto-free.
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0 && params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0) {
    return (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0
               ? CUDA_ERROR_INVALID_VALUE
               : CUDA_ERROR_NOT_SUPPORTED;  // device launches are not simulated
  }
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    CUstream_st* upload = nullptr;
    if (CUresult r = ResolveStream(params->hUploadStream, false, &upload); r != CUDA_SUCCESS) {
      return r;
    }
  }
  GraphState& s = Graphs();
  const CUresult r = WithGraphsLocked([&](GraphEvents* events) {
    // Not while it is being captured into; a graph with memory nodes has at most one exec.
    if (!UserGraphLocked(graph) || graph->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (HasMemoryNodesLocked(graph) && graph->execs > 0) return CUDA_ERROR_INVALID_VALUE;
    CUpti_GraphData starting{};
    starting.graph = graph;
    events->Add(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, starting);
    auto* exec = new CUgraphExec_st();
    exec->id = NextGraphIdLocked();
    exec->graph = graph;
    exec->graph_id = graph->id;
    exec->flags = flags;
    const size_t first_clone = events->size();
    CloneIntoExecLocked(graph, exec, &exec->nodes, events);
    // The order of the clones' callbacks is not documented: GWSIM_GRAPH_CLONE_ORDER.
    if (D().config.graph_clones_reversed) events->ReverseFrom(first_clone);
    s.execs.insert(exec);
    ++graph->execs;
    CUpti_GraphData created{};
    created.graph = graph;
    created.graphExec = exec;
    events->Add(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, created);
    *out = exec;
    return CUDA_SUCCESS;
  });
  if (r == CUDA_SUCCESS && params != nullptr) {
    params->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  }
  return r;
}

CUresult GraphExecDestroy(CUgraphExec exec) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  GraphState& s = Graphs();
  const CUresult started = WithGraphsLocked([&](GraphEvents* events) {
    if (CUresult r = ExecOf(exec); r != CUDA_SUCCESS) return r;
    exec->destroyed = true;
    CUpti_GraphData e{};
    e.graph = s.graphs.count(exec->graph) != 0 ? exec->graph : nullptr;
    e.graphExec = exec;
    events->Add(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, e);
    return CUDA_SUCCESS;
  });
  if (started != CUDA_SUCCESS) return started;
  std::lock_guard lock(s.mu);
  ForgetExecNodesLocked(exec->nodes);
  for (GraphAlloc* a : exec->allocs) {
    --a->refs;
    MaybeDropGraphAllocLocked(a);
  }
  --exec->graph->execs;  // a destroyed graph is retired, never freed
  s.execs.erase(exec);
  s.retired.push_back(exec);
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec exec, CUstream stream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  GraphState& g = Graphs();
  LaunchEnv env;
  env.handle = stream;
  env.per_thread = per_thread;
  env.stream = s;
  const std::vector<CUgraphNode_st*>* nodes = nullptr;
  std::vector<GraphAlloc*> allocs;
  bool auto_free = false;
  {
    std::lock_guard lock(g.mu);
    if (CUresult r = ExecOf(exec); r != CUDA_SUCCESS) return r;
    nodes = &exec->nodes;  // fixed at instantiation
    allocs = exec->allocs;
    env.graph_id = exec->graph_id;
    auto_free = (exec->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
  }
  if (auto r = CaptureGraphLaunch(s)) return *r;
  // Allocations still live from an earlier launch fail the launch, unless instantiated with
  // auto-free, which frees them first.
  std::vector<GraphAlloc*> to_free;
  {
    std::lock_guard lock(g.mu);
    for (GraphAlloc* a : allocs) {
      if (a->state == GraphAlloc::kLive && auto_free) {
        to_free.push_back(a);
      } else if (a->state != GraphAlloc::kIdle) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
  }
  for (GraphAlloc* a : to_free) {
    if (CUresult r = ReleaseGraphAlloc(a, true, s->id); r != CUDA_SUCCESS) return r;
  }
  // The memory of every allocation node is held before any node runs: a graph that does not
  // fit fails with out-of-memory and does nothing.
  {
    std::lock_guard lock(g.mu);
    for (GraphAlloc* a : allocs) {
      if (a->state != GraphAlloc::kIdle) {
        DropPendingLocked(allocs);
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (!HoldLocked(a)) {
        DropPendingLocked(allocs);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      a->state = GraphAlloc::kPending;
    }
  }
  const LaunchScope outer = t_launch;
  t_launch.frame = T().top_frame;
  t_launch.node = GraphNodeScope{};
  const CUresult r = RunNodes(*nodes, env);
  t_launch = outer;
  if (r != CUDA_SUCCESS) {
    std::lock_guard lock(g.mu);
    DropPendingLocked(allocs);
  }
  return r;
}

CUresult GraphUpload(CUgraphExec exec, CUstream stream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(Graphs().mu);
  return ExecOf(exec);  // nothing to upload: launches run on the calling thread
}

CUresult ReleaseGraphAlloc(GraphAlloc* a, bool is_async, uint32_t stream_id) {
  GraphState& s = Graphs();
  std::optional<Allocation> removed;
  {
    std::lock_guard lock(s.mu);
    if (a->state != GraphAlloc::kLive) return CUDA_ERROR_INVALID_VALUE;
    a->state = GraphAlloc::kReleasing;
    s.used[a->device] -= a->charge;
    LetGoLocked(a);
    removed = D().memory.RemoveIf(a->base,
                                  [](const Allocation& x) { return x.origin == Origin::kGraph; });
  }
  // Recorded before the memory is unmapped, as every release is.
  if (removed)
    EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, *removed, is_async, stream_id);
  void* p = reinterpret_cast<void*>(a->base);
  mprotect(p, a->reserved, PROT_NONE);
  madvise(p, a->reserved, MADV_DONTNEED);
  std::lock_guard lock(s.mu);
  a->state = GraphAlloc::kIdle;
  MaybeDropGraphAllocLocked(a);
  return CUDA_SUCCESS;
}

void MaybeDropGraphAllocLocked(GraphAlloc* a) {
  GraphState& s = Graphs();
  if (a->refs > 0 || a->state != GraphAlloc::kIdle) return;
  GraphAlloc* range = RangeOf(a);
  auto& sharers = range->sharers;
  const auto pos = std::find(sharers.begin(), sharers.end(), a);
  if (pos == sharers.end()) return;  // dropped already
  sharers.erase(pos);
  // The address now belongs to the range's latest remaining allocation, or to none.
  if (auto it = s.allocs.find(a->base); it != s.allocs.end() && it->second == a) {
    if (!sharers.empty()) {
      it->second = sharers.back();
    } else {
      s.allocs.erase(it);
      g_graph_allocs.fetch_sub(1, std::memory_order_release);
    }
  }
  if (sharers.empty()) munmap(reinterpret_cast<void*>(range->base), range->reserved);
  s.retired.push_back(a);
}

CUresult GraphMemTrim(CUdevice device) {
  if (CUresult r = CheckDevice(device); r != CUDA_SUCCESS) return r;
  GraphState& s = Graphs();
  std::lock_guard lock(s.mu);
  // What no launch holds (pending or live) goes back to the device.
  Uncharge(device, s.reserved[device] - s.committed[device]);
  s.reserved[device] = s.committed[device];
  return CUDA_SUCCESS;
}

CUresult GraphMemGetAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = CheckDevice(device); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphState& s = Graphs();
  std::lock_guard lock(s.mu);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = s.used[device];
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = s.high[device];
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = s.reserved[device];
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = s.reserved_high[device];
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult GraphMemSetAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = CheckDevice(device); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Only the high watermarks can be set, and only to zero.
  if ((attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) ||
      *static_cast<cuuint64_t*>(value) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  GraphState& s = Graphs();
  std::lock_guard lock(s.mu);
  // Reset to the current value (cuda.h: "reset the high watermark").
  if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) {
    s.high[device] = s.used[device];
  } else {
    s.reserved_high[device] = s.reserved[device];
  }
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
