// CUDA graphs: creation, nodes, cloning, destruction, and the ids CUPTI reports for them.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "driver/graph_internal.h"
#include "driver/trace.h"

namespace gwsim::drv {

std::atomic<int> g_open_captures{0};
std::atomic<int> g_captured_events{0};
std::atomic<int> g_graph_allocs{0};

GraphState& Graphs() {
  static auto* const state = [] {
    auto* s = new GraphState();  // never destroyed, like the rest of the driver's state
    for (auto* per_device : {&s->used, &s->high, &s->reserved, &s->reserved_high, &s->committed}) {
      per_device->assign(D().devices.size(), 0);
    }
    return s;
  }();
  return *state;
}

void GraphEvents::Emit() {
  CUctx_st* ctx = CurrentContext();
  for (const auto& [cbid, data] : events_) EmitGraphResource(cbid, ctx, &data);
  events_.clear();
}

namespace {

CUpti_GraphData GraphData(CUgraph_st* graph) {
  CUpti_GraphData d{};
  d.graph = graph;
  return d;
}

CUpti_GraphData NodeEvent(CUgraph_st* graph, CUgraphNode_st* node) {
  CUpti_GraphData d{};
  d.graph = graph;
  d.node = node;
  d.nodeType = node->data.type;
  return d;
}

CUresult ValidateDepsLocked(const CUgraph_st* g, const CUgraphNode* deps, size_t count,
                            std::vector<CUgraphNode_st*>* out) {
  if (count > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphState& s = Graphs();
  for (size_t i = 0; i < count; ++i) {
    CUgraphNode_st* d = deps[i];
    if (d == nullptr || s.nodes.count(d) == 0 || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(out->begin(), out->end(), d) != out->end()) return CUDA_ERROR_INVALID_VALUE;
    out->push_back(d);
  }
  return CUDA_SUCCESS;
}

CUresult ValidateKernel(const LaunchRequest& k) {
  if (k.function == nullptr || !ValidFunction(k.function)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (k.grid[i] == 0 || k.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    threads *= k.block[i];
  }
  return threads > 1024 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult ValidateMemsetLocked(const MemsetParams& m) {
  if (m.element_size != 1 && m.element_size != 2 && m.element_size != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t row = m.width * m.element_size;
  if (m.dst == 0 || m.dst % m.element_size != 0) return CUDA_ERROR_INVALID_VALUE;
  if (row == 0 || m.height == 0) return CUDA_SUCCESS;
  if (m.height > 1 && m.pitch < row) return CUDA_ERROR_INVALID_VALUE;
  const size_t span = (m.height - 1) * m.pitch + row;
  return DeviceOrGraphMemoryLocked(m.dst, span) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// One side of a memcpy node's descriptor.
CUresult ValidateCopySideLocked(CUmemorytype type, const void* host, CUdeviceptr device,
                                CUarray array) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      return host != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_DEVICE:
      return device != 0 && DeviceOrGraphMemoryLocked(device, 1) ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_UNIFIED:
      return device != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_ARRAY:
      return array != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult ValidateCopyDescriptorLocked(const CUDA_MEMCPY3D& c) {
  if (CUresult r = ValidateCopySideLocked(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = ValidateCopySideLocked(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstArray);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (c.WidthInBytes == 0 || c.Height == 0 || c.Depth == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// The allocation of graph g whose address range a new allocation node ordered after `deps` may
// reuse: one freed by a free node among the node's ancestors, the last to use its range, on the
// same device and at least as large. The programming guide allows a graph to give allocations
// whose lifetimes do not overlap the same address; GWSIM_GRAPH_ADDRESS_REUSE=0 never does.
GraphAlloc* ReusableLocked(CUgraph_st* g, const std::vector<CUgraphNode_st*>& deps,
                           const GraphAlloc& a) {
  if (!D().config.graph_address_reuse) return nullptr;
  std::vector<CUgraphNode_st*> todo(deps);
  std::unordered_set<CUgraphNode_st*> seen;
  while (!todo.empty()) {
    CUgraphNode_st* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->data.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      GraphAlloc* freed = n->data.alloc;
      const GraphAlloc* range = freed->range_owner != nullptr ? freed->range_owner : freed;
      const auto it = Graphs().allocs.find(freed->base);
      if (freed->owner == g && it != Graphs().allocs.end() && it->second == freed &&
          freed->device == a.device && a.size <= range->size) {
        return freed;
      }
    }
    todo.insert(todo.end(), n->deps.begin(), n->deps.end());
  }
  return nullptr;
}

// Reserves the fixed address range of an allocation node of g (or reuses one, see
// ReusableLocked): nothing is charged and touching it faults until a launch maps it.
CUresult ReserveGraphAllocLocked(GraphAlloc* a, CUgraph_st* g,
                                 const std::vector<CUgraphNode_st*>& deps) {
  if (a->size == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (a->size > SIZE_MAX - page) return CUDA_ERROR_OUT_OF_MEMORY;
  a->charge = (a->size + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
  if (GraphAlloc* earlier = ReusableLocked(g, deps, *a)) {
    GraphAlloc* range = earlier->range_owner != nullptr ? earlier->range_owner : earlier;
    a->range_owner = range;
    a->base = range->base;
    a->reserved = range->reserved;
    range->sharers.push_back(a);
    Graphs().allocs[a->base] = a;  // the address's latest allocation
    return CUDA_SUCCESS;
  }
  a->reserved = (a->size + page - 1) / page * page;
  a->sharers.push_back(a);
  void* p =
      mmap(nullptr, a->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  a->base = reinterpret_cast<uintptr_t>(p);
  Graphs().allocs[a->base] = a;
  g_graph_allocs.fetch_add(1, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUgraph_st* CloneGraphLocked(CUgraph_st* src, GraphEvents* events);

// A copy of `node` in `dst`, its dependencies mapped to their copies; a child graph node gets a
// copy of its embedded graph.
CUgraphNode_st* CloneNodeLocked(CUgraphNode_st* node, CUgraph_st* dst,
                                const std::unordered_map<CUgraphNode_st*, CUgraphNode_st*>& map,
                                GraphEvents* events) {
  CUgraphNode_st* c = NewNodeLocked(node->data);
  c->graph = dst;
  for (CUgraphNode_st* d : node->deps) c->deps.push_back(map.at(d));
  dst->nodes.push_back(c);
  CUpti_GraphData e = NodeEvent(dst, c);
  e.originalGraph = node->graph;
  e.originalNode = node;
  events->Add(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, e);
  if (node->child != nullptr) c->child = CloneGraphLocked(node->child, events);
  return c;
}

// An embedded copy of src (a child graph node's graph): GRAPHNODE_CLONED for each node, then
// GRAPH_CLONED. The caller has checked that src has no memory nodes.
CUgraph_st* CloneGraphLocked(CUgraph_st* src, GraphEvents* events) {
  CUgraph_st* dst = NewGraphLocked(true);
  std::unordered_map<CUgraphNode_st*, CUgraphNode_st*> map;
  for (CUgraphNode_st* n : src->nodes) {
    CUgraphNode_st* c = CloneNodeLocked(n, dst, map, events);
    map[n] = c;
  }
  CUpti_GraphData e = GraphData(dst);
  e.originalGraph = src;
  events->Add(CUPTI_CBID_RESOURCE_GRAPH_CLONED, e);
  return dst;
}

}  // namespace

uint32_t NextGraphIdLocked() { return Graphs().next_graph_id++; }

CUgraphNode_st* NewNodeLocked(const NodeData& data) {
  GraphState& s = Graphs();
  auto* n = new CUgraphNode_st();
  n->id = s.next_node_id++;
  n->data = data;
  n->data.child_src = nullptr;
  s.nodes.insert(n);
  return n;
}

CUgraph_st* NewGraphLocked(bool embedded) {
  auto* g = new CUgraph_st();
  g->id = NextGraphIdLocked();
  g->embedded = embedded;
  Graphs().graphs.insert(g);
  return g;
}

bool UserGraphLocked(CUgraph_st* g) {
  return g != nullptr && Graphs().graphs.count(g) != 0 && !g->embedded && !g->destroyed;
}

bool HasMemoryNodesLocked(const CUgraph_st* g) {
  for (const CUgraphNode_st* n : g->nodes) {
    if (n->data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
        n->data.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      return true;
    }
    if (n->child != nullptr && HasMemoryNodesLocked(n->child)) return true;
  }
  return false;
}

bool DeviceOrGraphMemoryLocked(uintptr_t p, size_t n) {
  if (D().memory.CoversDevice(p, n)) return true;
  const auto& allocs = Graphs().allocs;
  auto it = allocs.upper_bound(p);
  if (it == allocs.begin()) return false;
  --it;
  const GraphAlloc* a = it->second;
  return p >= a->base && p - a->base <= a->size && n <= a->size - (p - a->base);
}

CUresult AddNodeLocked(CUgraph_st* g, const CUgraphNode* deps, size_t count, NodeData data,
                       CUgraphNode_st** out, GraphEvents* events) {
  std::vector<CUgraphNode_st*> dep_list;
  CUresult r = ValidateDepsLocked(g, deps, count, &dep_list);
  CUgraph_st* child = nullptr;
  if (r == CUDA_SUCCESS) {
    switch (data.type) {
      case CU_GRAPH_NODE_TYPE_KERNEL:
        r = ValidateKernel(data.kernel);
        break;
      case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (data.copy_is_descriptor) r = ValidateCopyDescriptorLocked(data.copy_descriptor);
        break;
      case CU_GRAPH_NODE_TYPE_MEMSET:
        r = ValidateMemsetLocked(data.memset);
        break;
      case CU_GRAPH_NODE_TYPE_HOST:
        if (data.host_fn == nullptr) r = CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_GRAPH_NODE_TYPE_EMPTY:
        break;
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        r = data.alloc != nullptr ? ReserveGraphAllocLocked(data.alloc, g, dep_list)
                                  : CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_GRAPH_NODE_TYPE_MEM_FREE: {
        // The base address of a graph allocation, not freed by a node of any graph yet.
        auto it = Graphs().allocs.find(data.free_ptr);
        if (it == Graphs().allocs.end() || it->second->freed_by != nullptr) {
          r = CUDA_ERROR_INVALID_VALUE;
        } else {
          data.alloc = it->second;
        }
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH:
        // Cloned into the node; a graph with memory nodes cannot be (ownership is not moved).
        if (!UserGraphLocked(data.child_src) || data.child_src == g ||
            data.child_src->capture != nullptr || HasMemoryNodesLocked(data.child_src)) {
          r = CUDA_ERROR_INVALID_VALUE;
        }
        break;
      default:
        r = CUDA_ERROR_NOT_SUPPORTED;  // event, semaphore, batch, conditional nodes
        break;
    }
  }
  if (r != CUDA_SUCCESS) {
    if (data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) delete data.alloc;  // never reserved
    return r;
  }
  if (data.type == CU_GRAPH_NODE_TYPE_GRAPH) child = CloneGraphLocked(data.child_src, events);
  CUgraphNode_st* n = NewNodeLocked(data);
  n->graph = g;
  n->deps = std::move(dep_list);
  n->child = child;
  if (data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    data.alloc->owner = g;
    data.alloc->refs = 1;
  } else if (data.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    data.alloc->freed_by = g;
  }
  g->nodes.push_back(n);
  events->Add(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, NodeEvent(g, n));
  *out = n;
  return CUDA_SUCCESS;
}

void DestroyGraphPhase1Locked(CUgraph_st* g, GraphEvents* events) {
  g->destroyed = true;
  events->Add(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, GraphData(g));
  for (CUgraphNode_st* n : g->nodes) {
    events->Add(CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, NodeEvent(g, n));
    if (n->child != nullptr) DestroyGraphPhase1Locked(n->child, events);
  }
}

void DestroyGraphPhase2Locked(CUgraph_st* g) {
  GraphState& s = Graphs();
  for (CUgraphNode_st* n : g->nodes) {
    if (n->child != nullptr) DestroyGraphPhase2Locked(n->child);
    GraphAlloc* a = n->data.alloc;
    if (n->data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      --a->refs;
      MaybeDropGraphAllocLocked(a);
    } else if (n->data.type == CU_GRAPH_NODE_TYPE_MEM_FREE && a->freed_by == g) {
      a->freed_by = nullptr;
    }
    s.nodes.erase(n);
    s.retired.push_back(n);
  }
  s.graphs.erase(g);
  s.retired.push_back(g);
}

CUresult GraphCreate(CUgraph* out, unsigned flags) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return WithGraphsLocked([&](GraphEvents* events) {
    *out = NewGraphLocked(false);
    events->Add(CUPTI_CBID_RESOURCE_GRAPH_CREATED, GraphData(*out));
    return CUDA_SUCCESS;
  });
}

CUresult GraphDestroy(CUgraph graph) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  // The graph and its nodes are intact while the callbacks run.
  const CUresult started = WithGraphsLocked([&](GraphEvents* events) {
    // A graph being captured into belongs to the capture until cuStreamEndCapture.
    if (!UserGraphLocked(graph) || graph->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
    DestroyGraphPhase1Locked(graph, events);
    return CUDA_SUCCESS;
  });
  if (started != CUDA_SUCCESS) return started;
  std::lock_guard lock(Graphs().mu);
  DestroyGraphPhase2Locked(graph);
  return CUDA_SUCCESS;
}

CUresult GraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                      const CUgraphEdgeData* edges, size_t count, NodeData data) {
  auto drop = [&data] {
    if (data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) delete data.alloc;
  };
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) {
    drop();
    return r;
  }
  if (out == nullptr) {
    drop();
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; edges != nullptr && i < count; ++i) {
    const CUgraphEdgeData& e = edges[i];
    const bool zero = e.from_port == 0 && e.to_port == 0 && e.type == 0 &&
                      std::all_of(std::begin(e.reserved), std::end(e.reserved),
                                  [](unsigned char c) { return c == 0; });
    if (!zero) {  // programmatic dependencies are not simulated
      drop();
      return e.to_port != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return WithGraphsLocked([&](GraphEvents* events) {
    if (!UserGraphLocked(graph)) {
      drop();
      return CUDA_ERROR_INVALID_VALUE;
    }
    return AddNodeLocked(graph, deps, count, data, out, events);
  });
}

CUresult GraphClone(CUgraph* out, CUgraph original) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithGraphsLocked([&](GraphEvents* events) {
    // Cloning is not supported for graphs with memory allocation or free nodes.
    if (!UserGraphLocked(original) || HasMemoryNodesLocked(original)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    CUgraph_st* clone = CloneGraphLocked(original, events);
    clone->embedded = false;  // the user's
    *out = clone;
    return CUDA_SUCCESS;
  });
}

CUresult GraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(Graphs().mu);
  if (!UserGraphLocked(graph)) return CUDA_ERROR_INVALID_VALUE;
  const size_t n = graph->nodes.size();
  if (nodes == nullptr) {
    *count = n;
    return CUDA_SUCCESS;
  }
  // As documented: entries past the node count are set to NULL, and the count actually
  // obtained is returned.
  for (size_t i = 0; i < *count; ++i) nodes[i] = i < n ? graph->nodes[i] : nullptr;
  *count = std::min(*count, n);
  return CUDA_SUCCESS;
}

CUresult GraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(Graphs().mu);
  if (node == nullptr || Graphs().nodes.count(node) == 0) return CUDA_ERROR_INVALID_VALUE;
  *type = node->data.type;
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv

// The private exports of gwsim_abi.h: CUPTI's ids of graph objects.

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): tiny C shims below

GWSIM_EXPORT int gwsim_graph_node_id(CUgraphNode node, uint64_t* id) {
  std::lock_guard lock(Graphs().mu);
  if (node == nullptr || id == nullptr || Graphs().nodes.count(node) == 0) return -1;
  *id = node->id;
  return 0;
}

GWSIM_EXPORT int gwsim_graph_id(CUgraph graph, uint32_t* id) {
  std::lock_guard lock(Graphs().mu);
  if (graph == nullptr || id == nullptr || Graphs().graphs.count(graph) == 0) return -1;
  *id = graph->id;
  return 0;
}

GWSIM_EXPORT int gwsim_graph_exec_id(CUgraphExec exec, uint32_t* id) {
  std::lock_guard lock(Graphs().mu);
  if (exec == nullptr || id == nullptr || Graphs().execs.count(exec) == 0) return -1;
  *id = exec->id;
  return 0;
}
