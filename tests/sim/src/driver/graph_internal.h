// The simulator's CUDA graphs: graphs, nodes, executable graphs, graph memory, stream capture.
//
// A graph holds its nodes in creation order, each with its dependencies, which are nodes
// created before it, so creation order is a topological order. Instantiation clones every node
// into the executable graph (nested child graphs included); a launch runs the exec's nodes in
// that order on the calling thread. Everything lives under one mutex (Graphs().mu); handles are
// never freed (destroyed ones are retired), and no lock is held while a CUPTI hook or a host
// function runs: resource callbacks are collected under the lock and delivered after it.
#ifndef GWSIM_DRIVER_GRAPH_INTERNAL_H_
#define GWSIM_DRIVER_GRAPH_INTERNAL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "driver/cuda_headers.h"
#include "driver/graph.h"
#include "driver/state.h"
#include "driver/work.h"

namespace gwsim::drv {

struct Capture;

// The memory of one allocation node. Its address range is reserved (PROT_NONE, nothing
// charged) when the node is created and stays fixed across instantiations and launches; a
// launch charges the device and maps it, a free (node, cuMemFree or cuMemFreeAsync) unmaps it.
struct GraphAlloc {
  enum State : uint8_t {
    kIdle,       // reserved, not charged
    kPending,    // charged by a launch whose allocation node has not run yet
    kLive,       // mapped, charged, in the MemoryTable (Origin::kGraph)
    kReleasing,  // being unmapped by a free: not to be charged again until kIdle
  };
  uintptr_t base = 0;
  size_t size = 0;      // requested
  size_t reserved = 0;  // the address range, whole pages
  uint64_t charge = 0;  // bytes counted against the device while charged (512-byte units)
  int device = 0;
  CUgraph_st* owner = nullptr;     // the graph of the allocation node
  CUgraph_st* freed_by = nullptr;  // the one graph with a free node for it
  State state = kIdle;
  int refs = 0;  // the allocation node, if not destroyed, and each exec holding a clone of it
  // Address reuse: an allocation node ordered after the free of an earlier allocation of its
  // graph may get that allocation's address range (and physical memory). The range belongs to
  // the allocation that reserved it; the others point to it.
  GraphAlloc* range_owner = nullptr;  // null: this allocation reserved its range
  // On the range's owner: the allocations using the range (itself included) until dropped, and
  // how many of them a launch holds (pending or live): the range's memory is taken from the
  // device's graph pool while any is held.
  std::vector<GraphAlloc*> sharers;
  int held = 0;
};

struct MemsetParams {
  uintptr_t dst = 0;
  uint32_t value = 0;
  unsigned element_size = 1;
  size_t width = 0;  // elements
  size_t height = 1;
  size_t pitch = 0;
};

// What a node does.
struct NodeData {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  LaunchRequest kernel;  // KERNEL (stream set at launch)
  // MEMCPY: a cuGraphAddMemcpyNode descriptor, or a captured copy.
  bool copy_is_descriptor = false;
  CUDA_MEMCPY3D copy_descriptor{};
  CopyRequest copy;
  MemsetParams memset;              // MEMSET
  CUhostFn host_fn = nullptr;       // HOST
  void* host_data = nullptr;        // HOST
  GraphAlloc* alloc = nullptr;      // MEM_ALLOC
  uintptr_t free_ptr = 0;           // MEM_FREE
  CUgraph_st* child_src = nullptr;  // GRAPH, at creation only: the graph to clone into the node
};

}  // namespace gwsim::drv

struct CUgraphNode_st {
  uint64_t id = 0;  // cuptiGetGraphNodeId
  gwsim::drv::NodeData data;
  CUgraph_st* graph = nullptr;     // the graph holding it (null for a node of an exec)
  CUgraphExec_st* exec = nullptr;  // the exec holding it (null for a node of a graph)
  std::vector<CUgraphNode_st*> deps;
  CUgraph_st* child = nullptr;       // GRAPH node of a graph: its embedded graph
  std::vector<CUgraphNode_st*> sub;  // GRAPH node of an exec: the embedded graph's nodes
};

struct CUgraph_st {
  uint32_t id = 0;  // cuptiGetGraphId
  std::vector<CUgraphNode_st*> nodes;
  bool embedded = false;   // the graph of a child graph node: no handle of the user's
  bool destroyed = false;  // cuGraphDestroy has begun
  int execs = 0;           // live executable graphs instantiated from it
  gwsim::drv::Capture* capture = nullptr;  // the capture adding nodes to it
};

struct CUgraphExec_st {
  uint32_t id = 0;              // cuptiGetGraphExecId
  CUgraph_st* graph = nullptr;  // instantiated from
  uint32_t graph_id = 0;        // what its activity records carry in graphId
  unsigned long long flags = 0;
  std::vector<CUgraphNode_st*> nodes;
  std::vector<gwsim::drv::GraphAlloc*> allocs;  // of its allocation nodes
  bool destroyed = false;
};

namespace gwsim::drv {

// One capture sequence (cuStreamBeginCapture .. cuStreamEndCapture).
struct Capture {
  uint64_t id = 0;
  CUgraph_st* graph = nullptr;
  bool owns_graph = false;  // made by cuStreamBeginCapture (not ...ToGraph)
  CUstream_st* origin = nullptr;
  CUctx_st* ctx = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  uint64_t thread = 0;  // pthread_self() of cuStreamBeginCapture
  bool invalidated = false;
  bool ended = false;
  std::vector<CUstream_st*> streams;  // the origin and the streams that joined it
};

// A stream taking part in a capture: the nodes its next captured operation depends on.
struct StreamCapture {
  Capture* capture = nullptr;
  std::vector<CUgraphNode_st*> deps;
  std::vector<CUgraphEdgeData> edges;  // zeros, parallel to deps (cuStreamGetCaptureInfo)
};

// An event last recorded in a capturing stream: what a stream waiting on it depends on.
struct EventCapture {
  Capture* capture = nullptr;
  std::vector<CUgraphNode_st*> deps;
};

struct GraphState {
  std::mutex mu;
  std::unordered_set<CUgraph_st*> graphs;  // live, the user's and embedded ones
  std::unordered_set<CUgraphNode_st*> nodes;
  std::unordered_set<CUgraphExec_st*> execs;
  std::map<uintptr_t, GraphAlloc*> allocs;  // by base, while the address range is reserved
  std::vector<void*> retired;               // destroyed objects, kept (stale handles stay readable)
  uint32_t next_graph_id = 1;               // graphs and execs share the id space
  uint64_t next_node_id = 1;
  // Graph memory per device (cuDeviceGetGraphMemAttribute). The driver keeps a pool per device:
  // `reserved` is charged to the device, `committed` is what launches hold of it (pending and
  // live ranges); a free returns memory to the pool, cuDeviceGraphMemTrim returns the part no
  // launch holds to the device.
  std::vector<uint64_t> used;
  std::vector<uint64_t> high;
  std::vector<uint64_t> reserved;
  std::vector<uint64_t> reserved_high;
  std::vector<uint64_t> committed;
  // Stream capture.
  std::vector<Capture*> captures;  // not ended
  std::unordered_map<CUstream_st*, StreamCapture> streams;
  std::unordered_map<CUevent_st*, EventCapture> events;
  uint64_t next_capture_id = 1;
};
GraphState& Graphs();

// Fast paths of the hooks.
extern std::atomic<int> g_open_captures;    // captures not ended
extern std::atomic<int> g_captured_events;  // entries of GraphState::events
extern std::atomic<int> g_graph_allocs;     // entries of GraphState::allocs

// Resource callbacks collected under the lock and delivered after it.
class GraphEvents {
 public:
  void Add(CUpti_CallbackId cbid, const CUpti_GraphData& data) { events_.emplace_back(cbid, data); }
  size_t size() const { return events_.size(); }
  // Reverses the order of the events added since size() was `first`.
  void ReverseFrom(size_t first) {
    std::reverse(events_.begin() + static_cast<std::ptrdiff_t>(first), events_.end());
  }
  // Delivers them in order. No lock may be held.
  void Emit();

 private:
  std::vector<std::pair<CUpti_CallbackId, CUpti_GraphData>> events_;
};

// Runs `locked(&events)` with Graphs().mu held, then, the lock released, delivers the events it
// collected. Returns what `locked` returned.
template <typename Locked>
CUresult WithGraphsLocked(Locked&& locked) {
  GraphEvents events;
  CUresult r;
  {
    std::lock_guard lock(Graphs().mu);
    r = locked(&events);
  }
  events.Emit();
  return r;
}

// Graph model (graph.cc). "Locked" functions need Graphs().mu held.
bool UserGraphLocked(CUgraph_st* g);
bool HasMemoryNodesLocked(const CUgraph_st* g);
// Adds a node to g with the given dependencies; validates the parameters (an allocation node
// gets its address range here, a child graph node its clone of data.child_src).
CUresult AddNodeLocked(CUgraph_st* g, const CUgraphNode* deps, size_t count, NodeData data,
                       CUgraphNode_st** out, GraphEvents* events);
CUgraph_st* NewGraphLocked(bool embedded);
// A registered node with a new id and a copy of data, in no graph yet.
CUgraphNode_st* NewNodeLocked(const NodeData& data);
void DestroyGraphPhase1Locked(CUgraph_st* g, GraphEvents* events);
void DestroyGraphPhase2Locked(CUgraph_st* g);
// Whether [p, p+n) is device memory, or lies in the reserved range of a graph allocation (which
// nodes ordered after its allocation node may use).
bool DeviceOrGraphMemoryLocked(uintptr_t p, size_t n);
uint32_t NextGraphIdLocked();

// Launches (graph_exec.cc). Whether the calling thread is running a graph's nodes (their work
// must not be captured again): true inside cuGraphLaunch, not inside calls made from callbacks.
bool ExecutingGraph();

// Graph memory (graph_exec.cc).
// Releases a live allocation: MEMORY2 RELEASE, unmapped, uncharged. No lock held.
CUresult ReleaseGraphAlloc(GraphAlloc* a, bool is_async, uint32_t stream_id);
// Drops the address range once nothing refers to the allocation and it is not charged.
void MaybeDropGraphAllocLocked(GraphAlloc* a);

// Host functions (host_fn.cc): runs `job` on the driver's host-function thread and waits.
void RunOnHostThread(const std::function<void()>& job);

// The calling thread's capture interaction mode (capture.cc).
CUstreamCaptureMode& ThreadCaptureMode();

// Entry points (api_graph.cc calls these inside TraceDriver).
CUresult GraphCreate(CUgraph* out, unsigned flags);
CUresult GraphDestroy(CUgraph graph);
// Adds an explicitly created node. edges may be null; non-default edge data is not simulated.
CUresult GraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                      const CUgraphEdgeData* edges, size_t count, NodeData data);
CUresult GraphClone(CUgraph* out, CUgraph original);
CUresult GraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count);
CUresult GraphNodeGetType(CUgraphNode node, CUgraphNodeType* type);
CUresult GraphInstantiate(CUgraphExec* out, CUgraph graph, unsigned long long flags,
                          CUDA_GRAPH_INSTANTIATE_PARAMS* params);
CUresult GraphExecDestroy(CUgraphExec exec);
CUresult GraphLaunch(CUgraphExec exec, CUstream stream, bool per_thread);
CUresult GraphUpload(CUgraphExec exec, CUstream stream, bool per_thread);
CUresult GraphMemTrim(CUdevice device);
CUresult GraphMemGetAttribute(CUdevice device, CUgraphMem_attribute attr, void* value);
CUresult GraphMemSetAttribute(CUdevice device, CUgraphMem_attribute attr, void* value);
CUresult BeginCapture(CUstream stream, bool per_thread, CUstreamCaptureMode mode, CUgraph into,
                      const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t count);
CUresult EndCapture(CUstream stream, bool per_thread, CUgraph* out);
CUresult IsCapturing(CUstream stream, bool per_thread, CUstreamCaptureStatus* status);
CUresult GetCaptureInfo(CUstream stream, bool per_thread, CUstreamCaptureStatus* status,
                        cuuint64_t* id, CUgraph* graph, const CUgraphNode** deps,
                        const CUgraphEdgeData** edges, size_t* count);
CUresult ExchangeCaptureMode(CUstreamCaptureMode* mode);
CUresult LaunchHostFunc(CUstream stream, bool per_thread, CUhostFn fn, void* data);
CUresult StreamAddCallback(CUstream stream, bool per_thread, CUstreamCallback callback, void* data,
                           unsigned flags);
// Stream capture of a host function: a host node, a refusal, or nothing (run it now).
std::optional<CUresult> CaptureHostFunc(CUstream_st* stream, CUhostFn fn, void* data);
// cuStreamAddCallback, which stream capture does not support.
std::optional<CUresult> CaptureStreamCallback(CUstream_st* stream);
// cuGraphLaunch / cuGraphUpload into a capturing stream (not simulated: refused).
std::optional<CUresult> CaptureGraphLaunch(CUstream_st* stream);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_GRAPH_INTERNAL_H_
