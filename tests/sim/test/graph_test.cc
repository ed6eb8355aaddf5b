// CUDA graphs, stream capture, graph memory, graph resource callbacks and host functions: what a
// profiler sees of them.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

bool IsGraphEvent(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CREATED:
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED:
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING:
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING:
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      return true;
    default:
      return false;
  }
}

// One callback as it was delivered; for graph resource callbacks, the CUpti_GraphData and the
// CUPTI ids of its handles, read inside the callback.
struct Logged {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  CUpti_ApiCallbackSite site = CUPTI_API_ENTER;
  uint32_t correlation_id = 0;
  int result = -1;  // at EXIT
  std::thread::id thread;
  CUpti_GraphData graph{};
  uint64_t node_id = 0;
  uint64_t original_node_id = 0;
  uint32_t graph_id = 0;
  uint32_t original_graph_id = 0;
  uint32_t exec_id = 0;
};

// The process's subscriber for a test: API and graph resource callbacks, in delivery order.
class GraphLog {
 public:
  GraphLog()
      : recorder_({kRuntime, kDriver, kResource},
                  [this](CUpti_CallbackDomain d, CUpti_CallbackId cbid, const void* data) {
                    Add(d, cbid, data);
                  }) {}

  std::vector<Logged> Take() {
    recorder_.Take();
    std::lock_guard lock(mu_);
    std::vector<Logged> out;
    out.swap(log_);
    return out;
  }

 private:
  void Add(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    Logged l;
    l.domain = domain;
    l.cbid = cbid;
    l.thread = std::this_thread::get_id();
    if (domain == kResource) {
      const auto* r = static_cast<const CUpti_ResourceData*>(data);
      if (!IsGraphEvent(cbid)) return;
      EXPECT_NE(r->resourceDescriptor, nullptr);
      if (r->resourceDescriptor == nullptr) return;
      l.graph = *static_cast<const CUpti_GraphData*>(r->resourceDescriptor);
      // Every handle of the descriptor is valid while the callback runs.
      if (l.graph.node != nullptr) {
        EXPECT_EQ(cuptiGetGraphNodeId(l.graph.node, &l.node_id), CUPTI_SUCCESS);
      }
      if (l.graph.originalNode != nullptr) {
        EXPECT_EQ(cuptiGetGraphNodeId(l.graph.originalNode, &l.original_node_id), CUPTI_SUCCESS);
      }
      if (l.graph.graph != nullptr) {
        EXPECT_EQ(cuptiGetGraphId(l.graph.graph, &l.graph_id), CUPTI_SUCCESS);
      }
      if (l.graph.originalGraph != nullptr) {
        EXPECT_EQ(cuptiGetGraphId(l.graph.originalGraph, &l.original_graph_id), CUPTI_SUCCESS);
      }
      if (l.graph.graphExec != nullptr) {
        EXPECT_EQ(cuptiGetGraphExecId(l.graph.graphExec, &l.exec_id), CUPTI_SUCCESS);
      }
    } else {
      const auto* c = static_cast<const CUpti_CallbackData*>(data);
      l.site = c->callbackSite;
      l.correlation_id = c->correlationId;
      if (c->functionReturnValue != nullptr)
        l.result = *static_cast<const int*>(c->functionReturnValue);
    }
    std::lock_guard lock(mu_);
    log_.push_back(l);
  }

  std::mutex mu_;
  std::vector<Logged> log_;
  Recorder recorder_;  // last: its callbacks use the members above
};

// The n-th call of an API in the log: the indices of its ENTER and EXIT.
struct Call {
  size_t enter = 0;
  size_t exit = 0;
  uint32_t correlation_id = 0;
  int result = -1;
  bool found = false;
  bool Contains(size_t i) const { return found && enter < i && i < exit; }
};

Call FindCall(const std::vector<Logged>& log, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
              int nth = 0) {
  Call c;
  for (size_t i = 0; i < log.size(); ++i) {
    const Logged& l = log[i];
    if (l.domain != domain || l.cbid != cbid || l.site != CUPTI_API_ENTER || nth-- > 0) continue;
    for (size_t j = i + 1; j < log.size(); ++j) {
      if (log[j].domain == domain && log[j].cbid == cbid && log[j].site == CUPTI_API_EXIT &&
          log[j].correlation_id == l.correlation_id && log[j].thread == l.thread) {
        c = Call{i, j, l.correlation_id, log[j].result, true};
        return c;
      }
    }
  }
  return c;
}

// The indices of the graph resource callbacks of one cbid.
std::vector<size_t> Find(const std::vector<Logged>& log, CUpti_CallbackId cbid) {
  std::vector<size_t> out;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].domain == kResource && log[i].cbid == cbid) out.push_back(i);
  }
  return out;
}

std::vector<cudaGraphNode_t> NodesOf(cudaGraph_t graph) {
  size_t n = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(n);
  EXPECT_EQ(cudaGraphGetNodes(graph, nodes.data(), &n), cudaSuccess);
  return nodes;
}

// The value `get(handle, &value)` reads (starting from `value`), expecting it to return `ok`.
template <typename T, typename Get, typename Handle, typename Status>
T Read(Get get, Handle handle, Status ok, T value = T{}) {
  EXPECT_EQ(get(handle, &value), ok);
  return value;
}

cudaGraphNodeType TypeOf(cudaGraphNode_t node) {
  return Read(cudaGraphNodeGetType, node, cudaSuccess, cudaGraphNodeTypeCount);
}

// The types of `nodes`, in order.
std::vector<cudaGraphNodeType> TypesOf(const std::vector<cudaGraphNode_t>& nodes) {
  std::vector<cudaGraphNodeType> types;
  for (cudaGraphNode_t n : nodes) types.push_back(TypeOf(n));
  return types;
}

uint64_t NodeId(CUgraphNode node) {
  return Read<uint64_t>(cuptiGetGraphNodeId, node, CUPTI_SUCCESS);
}

uint32_t GraphId(CUgraph graph) { return Read<uint32_t>(cuptiGetGraphId, graph, CUPTI_SUCCESS); }

unsigned long long StreamId(cudaStream_t stream) {
  return Read<unsigned long long>(cudaStreamGetId, stream, cudaSuccess);
}

cudaStreamCaptureStatus CaptureStatus(cudaStream_t stream) {
  return Read(cudaStreamIsCapturing, stream, cudaSuccess, cudaStreamCaptureStatusNone);
}

// Adds to `graph`, after `deps`, a node copying `bytes` from `host` to `dev` (*node); fails the
// test on error.
void AddUpload(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count, void* dev,
               const void* host, size_t bytes, cudaGraphNode_t* node) {
  ASSERT_EQ(
      cudaGraphAddMemcpyNode1D(node, graph, deps, count, dev, host, bytes, cudaMemcpyHostToDevice),
      cudaSuccess);
}

// Device memory of `bytes`, zeroed (*dev), and a stream (*stream); fails the test on error.
void ZeroedDeviceAndStream(size_t bytes, void** dev, cudaStream_t* stream) {
  ASSERT_EQ(cudaMalloc(dev, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(*dev, 0, bytes), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(stream), cudaSuccess);
}

// Destroys an executable graph, then its graph; fails the test on error.
void DestroyExecAndGraph(cudaGraphExec_t exec, cudaGraph_t graph) {
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

cudaMemAllocNodeParams AllocParams(size_t bytes) {
  cudaMemAllocNodeParams p{};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}

uint64_t GraphMem(cudaGraphMemAttributeType attr) {
  cuuint64_t value = 0;
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, attr, &value), cudaSuccess);
  return value;
}

std::vector<unsigned char> DeviceBytes(const void* dev, size_t n) {
  std::vector<unsigned char> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), dev, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// The GraphMemory tests: InitCuda, a stream (stream_, destroyed after the test) and the free
// memory then.
class GraphMemory : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    free0_ = FreeMemory();
  }
  void TearDown() override { ASSERT_EQ(cudaStreamDestroy(stream_), cudaSuccess); }

  // Makes graph_, whose first node (alloc_) allocates `bytes`: alloc_params_.dptr is the address.
  void MakeAllocGraph(size_t bytes) {
    ASSERT_EQ(cudaGraphCreate(&graph_, 0), cudaSuccess);
    alloc_params_ = AllocParams(bytes);
    ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc_, graph_, nullptr, 0, &alloc_params_), cudaSuccess);
  }

  cudaStream_t stream_ = nullptr;
  size_t free0_ = 0;  // the device's free memory once the stream is made
  cudaGraph_t graph_ = nullptr;
  cudaGraphNode_t alloc_ = nullptr;
  cudaMemAllocNodeParams alloc_params_{};
};

// Each of these tests starts with InitCuda (CudaTest).
using Graphs = CudaTest;
using Capture = CudaTest;
using GraphCallbacks = CudaTest;
using HostFunctions = CudaTest;
using GraphDriver = CudaTest;

TEST_F(Graphs, NodesKeepTheirCreationOrderAndTypes) {
  Module();
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 256), cudaSuccess);
  std::vector<unsigned char> host(256, 1);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphCreate(&graph, 1), cudaErrorInvalidValue);  // flags must be 0
  cudaGraphNode_t copy = nullptr;
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, graph, nullptr, 0, dev, host.data(), host.size(),
                                     cudaMemcpyHostToDevice),
            cudaSuccess);
  cudaKernelNodeParams k{};
  k.func = reinterpret_cast<void*>(&KernelStub);
  k.gridDim = dim3(2);
  k.blockDim = dim3(64);
  cudaGraphNode_t kernel = nullptr;
  ASSERT_EQ(cudaGraphAddKernelNode(&kernel, graph, &copy, 1, &k), cudaSuccess);
  cudaMemsetParams m{dev, 0, 7, 1, 256, 1};
  cudaGraphNode_t memset = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&memset, graph, &kernel, 1, &m), cudaSuccess);
  cudaHostNodeParams h{[](void*) {}, nullptr};
  cudaGraphNode_t host_node = nullptr;
  ASSERT_EQ(cudaGraphAddHostNode(&host_node, graph, &memset, 1, &h), cudaSuccess);
  const cudaGraphNode_t both[] = {copy, host_node};
  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph, both, 2), cudaSuccess);

  const std::vector<cudaGraphNode_t> expected = {copy, kernel, memset, host_node, empty};
  EXPECT_EQ(NodesOf(graph), expected);
  EXPECT_EQ(TypesOf(expected),
            (std::vector{cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeKernel, cudaGraphNodeTypeMemset,
                         cudaGraphNodeTypeHost, cudaGraphNodeTypeEmpty}));
  // Fewer slots than nodes: that many; more: the rest NULL, and the count obtained.
  size_t n = 2;
  cudaGraphNode_t some[7];
  ASSERT_EQ(cudaGraphGetNodes(graph, some, &n), cudaSuccess);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(some[1], kernel);
  n = 7;
  ASSERT_EQ(cudaGraphGetNodes(graph, some, &n), cudaSuccess);
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(some[4], empty);
  EXPECT_EQ(some[5], nullptr);
  EXPECT_EQ(some[6], nullptr);

  // Dependencies: of the same graph, without duplicates; a kernel must be registered.
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
  cudaGraphNode_t bad = nullptr;
  EXPECT_EQ(cudaGraphAddEmptyNode(&bad, other, &copy, 1), cudaErrorInvalidValue);
  const cudaGraphNode_t twice[] = {copy, copy};
  EXPECT_EQ(cudaGraphAddEmptyNode(&bad, graph, twice, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddEmptyNode(&bad, graph, nullptr, 1), cudaErrorInvalidValue);
  k.func = reinterpret_cast<void*>(&FreeMemory);
  EXPECT_EQ(cudaGraphAddKernelNode(&bad, graph, nullptr, 0, &k), cudaErrorInvalidDeviceFunction);
  m.elementSize = 3;
  EXPECT_EQ(cudaGraphAddMemsetNode(&bad, graph, nullptr, 0, &m), cudaErrorInvalidValue);
  EXPECT_EQ(NodesOf(graph).size(), 5u);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(Graphs, AMemcpyNodeCopiesAtEachLaunchAndItsRecordsNameTheExecNode) {
  constexpr size_t kBytes = 4096;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_NO_FATAL_FAILURE(ZeroedDeviceAndStream(kBytes, &dev, &stream));
  std::vector<unsigned char> host(kBytes, 0x11);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  GraphLog log;

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaGraphNode_t node = nullptr;
  ASSERT_NO_FATAL_FAILURE(AddUpload(graph, nullptr, 0, dev, host.data(), kBytes, &node));
  // Making the node copies nothing.
  EXPECT_TRUE(collector.Collect().memcpy.empty());
  EXPECT_EQ(DeviceBytes(dev, kBytes), std::vector<unsigned char>(kBytes, 0));
  collector.Collect();

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(DeviceBytes(dev, kBytes), std::vector<unsigned char>(kBytes, 0x11));
  host.assign(kBytes, 0x22);  // a launch copies what the host buffer holds then
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(DeviceBytes(dev, kBytes), std::vector<unsigned char>(kBytes, 0x22));
  const auto events = log.Take();
  std::vector<CUpti_ActivityMemcpy6> launched;  // the launches' copies, not the checks'
  for (const auto& r : collector.Collect().memcpy) {
    if (r.graphId != 0) launched.push_back(r);
  }

  // GRAPH_CREATED inside cudaGraphCreate; GRAPHNODE_CREATED inside the call that made the node,
  // runtime and driver, on the calling thread.
  const auto created_graph = Find(events, CUPTI_CBID_RESOURCE_GRAPH_CREATED);
  ASSERT_EQ(created_graph.size(), 1u);
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphCreate_v10000)
                  .Contains(created_graph[0]));
  EXPECT_EQ(events[created_graph[0]].graph.graph, graph);
  const uint32_t graph_id = events[created_graph[0]].graph_id;
  EXPECT_EQ(graph_id, GraphId(graph));
  const auto created = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  ASSERT_EQ(created.size(), 1u);
  const Logged& made = events[created[0]];
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemcpyNode1D_v11010)
                  .Contains(created[0]));
  EXPECT_TRUE(
      FindCall(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemcpyNode).Contains(created[0]));
  EXPECT_EQ(made.thread, std::this_thread::get_id());
  EXPECT_EQ(made.graph.graph, graph);
  EXPECT_EQ(made.graph.node, node);
  EXPECT_EQ(made.graph.nodeType, CU_GRAPH_NODE_TYPE_MEMCPY);
  EXPECT_EQ(made.node_id, NodeId(node));

  // Instantiation: CREATE_STARTING, a clone of every node, CREATED, all inside the call.
  const Call instantiate =
      FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000);
  const auto starting = Find(events, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING);
  const auto cloned = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  const auto exec_created = Find(events, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED);
  ASSERT_EQ(starting.size(), 1u);
  ASSERT_EQ(cloned.size(), 1u);
  ASSERT_EQ(exec_created.size(), 1u);
  EXPECT_TRUE(instantiate.Contains(starting[0]));
  EXPECT_LT(starting[0], cloned[0]);
  EXPECT_LT(cloned[0], exec_created[0]);
  EXPECT_TRUE(instantiate.Contains(exec_created[0]));
  const Logged& clone = events[cloned[0]];
  EXPECT_EQ(clone.graph.originalNode, node);
  EXPECT_EQ(clone.original_node_id, made.node_id);
  EXPECT_NE(clone.graph.node, node);
  EXPECT_NE(clone.node_id, made.node_id);  // the exec's node has an id of its own
  EXPECT_EQ(clone.graph.graphExec, exec);
  EXPECT_EQ(clone.graph.originalGraph, graph);
  EXPECT_EQ(events[exec_created[0]].graph.graphExec, exec);
  EXPECT_EQ(events[exec_created[0]].graph.graph, graph);
  EXPECT_EQ(events[starting[0]].graph.graph, graph);
  uint32_t exec_id = 0;
  ASSERT_EQ(cuptiGetGraphExecId(exec, &exec_id), CUPTI_SUCCESS);
  EXPECT_EQ(events[exec_created[0]].exec_id, exec_id);
  EXPECT_NE(exec_id, graph_id);

  // One record per launch, with the launch's correlation id and the exec node's id, which
  // GRAPHNODE_CLONED maps back to the node made inside cudaGraphAddMemcpyNode1D.
  ASSERT_EQ(launched.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const Call launch =
        FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, i);
    ASSERT_TRUE(launch.found);
    const CUpti_ActivityMemcpy6& r = launched[i];
    EXPECT_EQ(r.correlationId, launch.correlation_id);
    EXPECT_EQ(r.runtimeCorrelationId, 0u);  // GWSIM_CORRELATION=shared
    EXPECT_EQ(r.graphNodeId, clone.node_id);
    EXPECT_EQ(r.graphId, graph_id);
    EXPECT_EQ(r.copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    EXPECT_EQ(r.bytes, kBytes);
    EXPECT_EQ(r.streamId, StreamId(stream));
    EXPECT_EQ(r.flags, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC);
  }

  // The exec is a snapshot: a node added to the graph later does not run.
  cudaGraphNode_t later = nullptr;
  ASSERT_NO_FATAL_FAILURE(AddUpload(graph, &node, 1, dev, host.data(), kBytes, &later));
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(collector.Collect().memcpy.size(), 1u);

  // Destruction: each inside its call, with the handles still valid.
  log.Take();
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
  const auto end = log.Take();
  const auto exec_destroy = Find(end, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING);
  ASSERT_EQ(exec_destroy.size(), 1u);
  EXPECT_EQ(end[exec_destroy[0]].graph.graphExec, exec);
  EXPECT_EQ(end[exec_destroy[0]].exec_id, exec_id);
  EXPECT_TRUE(FindCall(end, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000)
                  .Contains(exec_destroy[0]));
  const auto graph_destroy = Find(end, CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING);
  const auto node_destroy = Find(end, CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING);
  ASSERT_EQ(graph_destroy.size(), 1u);
  ASSERT_EQ(node_destroy.size(), 2u);
  EXPECT_LT(graph_destroy[0], node_destroy[0]);
  EXPECT_EQ(end[node_destroy[0]].graph.node, node);
  EXPECT_EQ(end[node_destroy[1]].graph.node, later);
  EXPECT_TRUE(FindCall(end, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000)
                  .Contains(node_destroy[1]));
  // Gone afterwards.
  uint32_t id = 0;
  EXPECT_EQ(cuptiGetGraphId(graph, &id), CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(cuptiGetGraphExecId(exec, &id), CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(Capture, CapturedWorkBecomesNodesMadeInsideTheCapturedCalls) {
  Module();
  constexpr size_t kBytes = 1024;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_NO_FATAL_FAILURE(ZeroedDeviceAndStream(kBytes, &dev, &stream));
  std::vector<unsigned char> host(kBytes, 0x5C);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  GraphLog log;

  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(dev, host.data(), kBytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&KernelStub), dim3(4), dim3(32), nullptr,
                             0, stream),
            cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusNone);
  // Nothing ran: no records, no bytes.
  Activity a = collector.Collect();
  EXPECT_TRUE(a.memcpy.empty());
  EXPECT_TRUE(a.kernels.empty());
  EXPECT_EQ(DeviceBytes(dev, kBytes), std::vector<unsigned char>(kBytes, 0));
  collector.Collect();

  const auto nodes = NodesOf(graph);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(TypeOf(nodes[0]), cudaGraphNodeTypeMemcpy);
  EXPECT_EQ(TypeOf(nodes[1]), cudaGraphNodeTypeKernel);
  auto events = log.Take();
  const auto graph_created = Find(events, CUPTI_CBID_RESOURCE_GRAPH_CREATED);
  ASSERT_EQ(graph_created.size(), 1u);
  EXPECT_EQ(events[graph_created[0]].graph.graph, graph);
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000)
                  .Contains(graph_created[0]));
  // The captured calls returned success, were traced, and made their nodes inside.
  const Call copy_call = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  EXPECT_EQ(copy_call.result, cudaSuccess);
  const auto created = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  ASSERT_EQ(created.size(), 2u);
  EXPECT_TRUE(copy_call.Contains(created[0]));
  EXPECT_TRUE(
      FindCall(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2).Contains(created[0]));
  EXPECT_EQ(events[created[0]].graph.node, nodes[0]);
  EXPECT_EQ(events[created[0]].graph.graph, graph);
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
                  .Contains(created[1]));
  EXPECT_EQ(events[created[1]].graph.node, nodes[1]);
  EXPECT_EQ(events[created[1]].graph.nodeType, CU_GRAPH_NODE_TYPE_KERNEL);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(DeviceBytes(dev, kBytes), host);
  events = log.Take();
  a = collector.Collect();
  const auto cloned = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  ASSERT_EQ(cloned.size(), 2u);
  EXPECT_EQ(events[cloned[0]].graph.originalNode, nodes[0]);
  EXPECT_EQ(events[cloned[1]].graph.originalNode, nodes[1]);
  const Call launch = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
  ASSERT_EQ(a.memcpy.size(), 2u);  // the launch's copy, then the check's
  EXPECT_EQ(a.memcpy[0].correlationId, launch.correlation_id);
  EXPECT_EQ(a.memcpy[0].graphNodeId, events[cloned[0]].node_id);
  EXPECT_EQ(a.memcpy[0].graphId, GraphId(graph));
  EXPECT_EQ(a.memcpy[1].graphNodeId, 0u);  // cudaMemcpy outside any graph
  EXPECT_EQ(a.memcpy[1].graphId, 0u);
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_STREQ(a.kernels[0].name, "_Z6kernelPi");
  EXPECT_EQ(a.kernels[0].correlationId, launch.correlation_id);
  EXPECT_EQ(a.kernels[0].graphNodeId, events[cloned[1]].node_id);
  EXPECT_EQ(a.kernels[0].graphId, GraphId(graph));
  EXPECT_EQ(a.kernels[0].gridX, 4);
  EXPECT_EQ(a.kernels[0].blockX, 32);

  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(Capture, ForkAndJoinThroughEvents) {
  constexpr size_t kBytes = 512;
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, kBytes), cudaSuccess);
  std::vector<unsigned char> host_a(kBytes, 0);
  std::vector<unsigned char> host_b(kBytes, 0);
  cudaStream_t s1 = nullptr;
  cudaStream_t s2 = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s2), cudaSuccess);
  cudaEvent_t forked = nullptr;
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a, 1, kBytes, s1), cudaSuccess);  // A
  ASSERT_EQ(cudaEventRecord(forked, s1), cudaSuccess);
  EXPECT_EQ(CaptureStatus(s2), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamWaitEvent(s2, forked, 0), cudaSuccess);  // fork: s2 joins the capture
  EXPECT_EQ(CaptureStatus(s2), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemsetAsync(b, 2, kBytes, s2), cudaSuccess);  // B, after A
  ASSERT_EQ(cudaEventRecord(done, s2), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host_a.data(), a, kBytes, cudaMemcpyDeviceToHost, s1),
            cudaSuccess);                                    // C, after A
  ASSERT_EQ(cudaStreamWaitEvent(s1, done, 0), cudaSuccess);  // join
  // The next node of s1 depends on C and B; both streams are in one capture.
  cudaStreamCaptureStatus status{};
  unsigned long long id1 = 0;
  unsigned long long id2 = 0;
  cudaGraph_t g1 = nullptr;
  cudaGraph_t g2 = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s2, &status, &id2, &g2, nullptr, nullptr, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(s1, &status, &id1, &g1, &deps, &edges, &count), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(id1, id2);
  EXPECT_EQ(g1, g2);
  ASSERT_EQ(count, 2u);
  const std::vector<cudaGraphNode_t> join(deps, deps + count);
  EXPECT_EQ(edges[0].type, 0);
  ASSERT_EQ(cudaMemcpyAsync(host_b.data(), b, kBytes, cudaMemcpyDeviceToHost, s1),
            cudaSuccess);  // D
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s1, &graph), cudaSuccess);
  EXPECT_EQ(graph, g1);
  EXPECT_EQ(CaptureStatus(s2), cudaStreamCaptureStatusNone);  // the fork ends with the capture

  const auto nodes = NodesOf(graph);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(TypesOf(nodes), (std::vector{cudaGraphNodeTypeMemset, cudaGraphNodeTypeMemset,
                                         cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeMemcpy}));
  EXPECT_EQ(join, (std::vector<cudaGraphNode_t>{nodes[2], nodes[1]}));
  // Nothing ran at capture; everything at launch.
  EXPECT_EQ(host_a, std::vector<unsigned char>(kBytes, 0));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s1), cudaSuccess);
  EXPECT_EQ(host_a, std::vector<unsigned char>(kBytes, 1));
  EXPECT_EQ(host_b, std::vector<unsigned char>(kBytes, 2));
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));

  // A fork that is not joined back fails the capture, whose graph is destroyed.
  GraphLog log;
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, forked, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b, 3, kBytes, s2), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a, 3, kBytes, s1), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s2, &graph), cudaErrorStreamCaptureUnmatched);  // not its origin
  graph = reinterpret_cast<cudaGraph_t>(0x1);
  EXPECT_EQ(cudaStreamEndCapture(s1, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(CaptureStatus(s2), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, forked, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b, 3, kBytes, s2), cudaSuccess);
  graph = reinterpret_cast<cudaGraph_t>(0x1);
  EXPECT_EQ(cudaStreamEndCapture(s1, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(CaptureStatus(s2), cudaStreamCaptureStatusNone);
  const auto events = log.Take();
  const auto destroyed = Find(events, CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING);
  ASSERT_EQ(destroyed.size(), 2u);  // both failed captures' graphs
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, 2)
                  .Contains(destroyed[1]));
  // Nothing of the failed captures ran.
  EXPECT_EQ(DeviceBytes(b, kBytes), std::vector<unsigned char>(kBytes, 2));
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnjoined);

  // An event recorded outside the capture cannot be waited on inside it.
  ASSERT_EQ(cudaEventRecord(done, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s1, done, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(cudaStreamEndCapture(s1, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);

  for (cudaEvent_t e : {forked, done}) ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  for (cudaStream_t s : {s1, s2}) ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  for (void* p : {a, b}) ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(Capture, SynchronousAndLegacyStreamWorkIsRefusedAndInvalidatesTheCapture) {
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 256), cudaSuccess);
  std::vector<unsigned char> host(256, 4);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;

  // cudaMalloc is potentially unsafe during a global capture.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 256, stream), cudaErrorStreamCaptureInvalidated);
  graph = reinterpret_cast<cudaGraph_t>(0x1);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusNone);

  // So is a synchronous copy; and a capturing stream cannot be synchronized.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), 256, cudaMemcpyHostToDevice),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);

  // Work on the legacy stream would depend on a capturing blocking stream.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status{};
  EXPECT_EQ(cudaStreamIsCapturing(nullptr, &status), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(CaptureStatus(stream), cudaStreamCaptureStatusActive);  // that query invalidates not
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 256, nullptr), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  // The legacy stream cannot capture; a stream captures once at a time.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_TRUE(NodesOf(graph).empty());
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorInvalidValue);  // not capturing

  // A relaxed thread may make unsafe calls; a non-blocking stream's capture leaves the legacy
  // stream alone.
  cudaStream_t nonblocking = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(p, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);  // back to global
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(CaptureStatus(nonblocking), cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(nonblocking, &graph), cudaErrorStreamCaptureInvalidated);
  // A capture begun relaxed prohibits nothing.
  ASSERT_EQ(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(nonblocking, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  mode = static_cast<cudaStreamCaptureMode>(3);  // no such mode
  EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaErrorInvalidValue);

  EXPECT_NE(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(GraphMemory, AnAllocationFreedInItsGraphIsChargedOnlyDuringTheLaunch) {
  constexpr size_t kBytes = 1 << 20;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  GraphLog log;

  ASSERT_NO_FATAL_FAILURE(MakeAllocGraph(kBytes));
  ASSERT_NE(alloc_params_.dptr, nullptr);  // fixed when the node is made
  EXPECT_EQ(FreeMemory(), free0_);         // nothing charged yet
  cudaMemsetParams m{alloc_params_.dptr, 0, 0x5A, 1, kBytes, 1};
  cudaGraphNode_t memset = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&memset, graph_, &alloc_, 1, &m), cudaSuccess);
  std::vector<unsigned char> host(kBytes, 0);
  cudaGraphNode_t copy = nullptr;
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, graph_, &memset, 1, host.data(), alloc_params_.dptr,
                                     kBytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaGraphNode_t free_node = nullptr;
  ASSERT_EQ(cudaGraphAddMemFreeNode(&free_node, graph_, &copy, 1, alloc_params_.dptr), cudaSuccess);
  EXPECT_EQ(TypeOf(alloc_), cudaGraphNodeTypeMemAlloc);
  EXPECT_EQ(TypeOf(free_node), cudaGraphNodeTypeMemFree);
  // Freed twice in the graph, or an address no allocation node returned: refused.
  cudaGraphNode_t bad = nullptr;
  EXPECT_EQ(cudaGraphAddMemFreeNode(&bad, graph_, &free_node, 1, alloc_params_.dptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&bad, graph_, nullptr, 0, host.data()), cudaErrorInvalidValue);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph_, 0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);
  EXPECT_TRUE(collector.Collect().memory.empty());

  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(kBytes, 0x5A));  // the memory was usable in between
  // Released by the free node into the device's graph pool, which keeps it.
  EXPECT_EQ(GraphMem(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(GraphMem(cudaGraphMemAttrReservedMemCurrent), kBytes);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);
  host.assign(kBytes, 0);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);  // again: nothing was left allocated
  EXPECT_EQ(host, std::vector<unsigned char>(kBytes, 0x5A));
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);  // taken from the pool, nothing more charged
  const auto events = log.Take();
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memory.size(), 4u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const Call launch = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                 static_cast<int>(i));
    const CUpti_ActivityMemory4& made = a.memory[2 * i];
    const CUpti_ActivityMemory4& released = a.memory[2 * i + 1];
    EXPECT_EQ(made.memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    EXPECT_EQ(released.memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    for (const CUpti_ActivityMemory4* r : {&made, &released}) {
      EXPECT_EQ(r->address,
                reinterpret_cast<uint64_t>(alloc_params_.dptr));  // the same every launch
      EXPECT_EQ(r->bytes, kBytes);
      EXPECT_EQ(r->memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
      EXPECT_EQ(r->correlationId, launch.correlation_id);
      EXPECT_EQ(r->isAsync, 1u);
      EXPECT_EQ(r->streamId, StreamId(stream_));
      EXPECT_EQ(r->deviceId, 0u);
    }
  }
  cuuint64_t used = 7;
  ASSERT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 0u);
  ASSERT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &used), cudaSuccess);
  EXPECT_GE(used, kBytes);
  cuuint64_t zero = 0;
  ASSERT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &used), cudaSuccess);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(GraphMem(cudaGraphMemAttrReservedMemHigh), kBytes);
  // Trimming returns what no launch holds to the device.
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(GraphMem(cudaGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(GraphMem(cudaGraphMemAttrReservedMemHigh), kBytes);
  EXPECT_EQ(FreeMemory(), free0_);

  // Freed in its own graph: not outside it. A graph with memory nodes: one exec at a time, no
  // clones, no child graph nodes.
  EXPECT_EQ(cudaFree(alloc_params_.dptr), cudaErrorInvalidValue);
  cudaGraphExec_t second = nullptr;
  EXPECT_EQ(cudaGraphInstantiate(&second, graph_, 0), cudaErrorInvalidValue);
  cudaGraph_t clone = nullptr;
  EXPECT_EQ(cudaGraphClone(&clone, graph_), cudaErrorInvalidValue);
  cudaGraph_t parent = nullptr;
  ASSERT_EQ(cudaGraphCreate(&parent, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphAddChildGraphNode(&bad, parent, nullptr, 0, graph_), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&second, graph_, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(second), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphDestroy(parent), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph_), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);
}

TEST_F(GraphMemory, AnUnfreedAllocationStaysLiveUntilFreedAndBlocksARelaunch) {
  constexpr size_t kBytes = 4 << 20;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  GraphLog log;
  ASSERT_NO_FATAL_FAILURE(MakeAllocGraph(kBytes));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph_, 0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);

  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);  // charged at launch, and still after it
  // Work ordered after the launch may use it.
  ASSERT_EQ(cudaMemsetAsync(alloc_params_.dptr, 9, kBytes, stream_), cudaSuccess);
  EXPECT_EQ(DeviceBytes(alloc_params_.dptr, 16), std::vector<unsigned char>(16, 9));
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, alloc_params_.dptr), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  // Launching again while the allocation lives is an error.
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);
  ASSERT_EQ(cudaFree(alloc_params_.dptr), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);  // back in the graph pool
  EXPECT_EQ(GraphMem(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(cudaFree(alloc_params_.dptr), cudaErrorInvalidValue);  // once
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);
  ASSERT_EQ(cudaFreeAsync(alloc_params_.dptr, stream_), cudaSuccess);
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);

  auto events = log.Take();
  Activity a = collector.Collect();
  ASSERT_EQ(a.memory.size(), 4u);
  const Call launch0 = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
  const Call launch2 =
      FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 2);
  const Call free_call = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
  const Call free_async = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020);
  EXPECT_EQ(a.memory[0].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(a.memory[0].correlationId, launch0.correlation_id);
  EXPECT_EQ(a.memory[1].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(a.memory[1].correlationId, free_call.correlation_id);
  EXPECT_EQ(a.memory[1].isAsync, 0u);
  EXPECT_EQ(a.memory[2].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(a.memory[2].correlationId, launch2.correlation_id);
  EXPECT_EQ(a.memory[3].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(a.memory[3].correlationId, free_async.correlation_id);
  EXPECT_EQ(a.memory[3].isAsync, 1u);
  for (const auto& r : a.memory)
    EXPECT_EQ(r.address, reinterpret_cast<uint64_t>(alloc_params_.dptr));

  // A free node in another graph frees it too.
  cudaGraph_t freeing = nullptr;
  ASSERT_EQ(cudaGraphCreate(&freeing, 0), cudaSuccess);
  cudaGraphNode_t free_node = nullptr;
  ASSERT_EQ(cudaGraphAddMemFreeNode(&free_node, freeing, nullptr, 0, alloc_params_.dptr),
            cudaSuccess);
  cudaGraph_t third = nullptr;
  ASSERT_EQ(cudaGraphCreate(&third, 0), cudaSuccess);
  cudaGraphNode_t bad = nullptr;
  EXPECT_EQ(cudaGraphAddMemFreeNode(&bad, third, nullptr, 0, alloc_params_.dptr),
            cudaErrorInvalidValue);
  cudaGraphExec_t freeing_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&freeing_exec, freeing, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(freeing_exec, stream_), cudaErrorInvalidValue);  // nothing to free
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(freeing_exec, stream_), cudaSuccess);
  EXPECT_EQ(GraphMem(cudaGraphMemAttrUsedMemCurrent), 0u);

  // Instantiated to free on relaunch: each launch frees what the last one left.
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph_, cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaSuccess);
  collector.Collect();
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);
  a = collector.Collect();
  ASSERT_EQ(a.memory.size(), 3u);
  EXPECT_EQ(a.memory[0].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(a.memory[1].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(a.memory[2].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(a.memory[1].correlationId, a.memory[2].correlationId);
  ASSERT_EQ(cudaFree(alloc_params_.dptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);

  // A graph whose memory does not fit fails its launch and does nothing.
  cudaGraph_t huge = nullptr;
  ASSERT_EQ(cudaGraphCreate(&huge, 0), cudaSuccess);
  cudaMemAllocNodeParams too_big = AllocParams(free0_ + 512);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc_, huge, nullptr, 0, &too_big), cudaSuccess);
  cudaGraphExec_t huge_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&huge_exec, huge, 0), cudaSuccess);
  collector.Collect();
  EXPECT_EQ(cudaGraphLaunch(huge_exec, stream_), cudaErrorMemoryAllocation);
  EXPECT_EQ(FreeMemory(), free0_);
  EXPECT_TRUE(collector.Collect().memory.empty());
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);

  ASSERT_EQ(cudaGraphExecDestroy(huge_exec), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(freeing_exec), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  for (cudaGraph_t g : {huge, third, freeing, graph_}) ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
}

// The programming guide lets a graph give allocations whose lifetimes do not overlap the same
// address (and memory): an allocation node ordered after an earlier allocation's free node.
TEST_F(GraphMemory, AnAllocationMadeAfterAnotherIsFreedMayTakeItsAddress) {
  constexpr size_t kBytes = 1 << 20;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaMemAllocNodeParams first = AllocParams(3 * kBytes);
  cudaGraphNode_t first_alloc = nullptr;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&first_alloc, graph, nullptr, 0, &first), cudaSuccess);
  cudaGraphNode_t first_free = nullptr;
  ASSERT_EQ(cudaGraphAddMemFreeNode(&first_free, graph, &first_alloc, 1, first.dptr), cudaSuccess);
  // Ordered after the free: the same address. Unordered with it: an address of its own.
  cudaMemAllocNodeParams second = AllocParams(kBytes);
  cudaGraphNode_t second_alloc = nullptr;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&second_alloc, graph, &first_free, 1, &second), cudaSuccess);
  EXPECT_EQ(second.dptr, first.dptr);
  cudaMemAllocNodeParams apart = AllocParams(kBytes);
  cudaGraphNode_t apart_alloc = nullptr;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&apart_alloc, graph, nullptr, 0, &apart), cudaSuccess);
  EXPECT_NE(apart.dptr, first.dptr);
  // Larger than the range: an address of its own, even after the free.
  cudaMemAllocNodeParams larger = AllocParams(4 * kBytes);
  cudaGraphNode_t larger_alloc = nullptr;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&larger_alloc, graph, &first_free, 1, &larger), cudaSuccess);
  EXPECT_NE(larger.dptr, first.dptr);
  // The address's free node now frees the second allocation, once.
  cudaMemsetParams m{second.dptr, 0, 0x3C, 1, kBytes, 1};
  cudaGraphNode_t memset = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&memset, graph, &second_alloc, 1, &m), cudaSuccess);
  std::vector<unsigned char> host(kBytes, 0);
  cudaGraphNode_t copy = nullptr;
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, graph, &memset, 1, host.data(), second.dptr, kBytes,
                                     cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaGraphNode_t second_free = nullptr;
  ASSERT_EQ(cudaGraphAddMemFreeNode(&second_free, graph, &copy, 1, second.dptr), cudaSuccess);
  cudaGraphNode_t bad = nullptr;
  EXPECT_EQ(cudaGraphAddMemFreeNode(&bad, graph, &second_free, 1, first.dptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(kBytes, 0x3C));
  // At one address: allocation, release, allocation, release, in that order.
  std::vector<CUpti_ActivityMemoryOperationType> at_first;
  for (const auto& r : collector.Collect().memory) {
    if (r.address == reinterpret_cast<uint64_t>(first.dptr)) {
      at_first.push_back(r.memoryOperationType);
      EXPECT_EQ(r.bytes, at_first.size() <= 2 ? 3 * kBytes : kBytes);
    }
  }
  const auto made = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  const auto released = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  EXPECT_EQ(at_first,
            (std::vector<CUpti_ActivityMemoryOperationType>{made, released, made, released}));
  // The shared range holds 3 MiB of the pool, the others their own: 3 + 1 + 4 MiB, not 9.
  EXPECT_EQ(GraphMem(cudaGraphMemAttrReservedMemCurrent), 8 * kBytes);
  EXPECT_EQ(FreeMemory(), free0_ - 8 * kBytes);
  ASSERT_EQ(cudaFree(apart.dptr), cudaSuccess);
  ASSERT_EQ(cudaFree(larger.dptr), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);
}

TEST_F(GraphMemory, CapturedStreamOrderedAllocationsBecomeMemoryNodes) {
  constexpr size_t kBytes = 8192;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  GraphLog log;
  std::vector<unsigned char> host(kBytes, 0);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, kBytes, stream_), cudaSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(FreeMemory(), free0_);  // nothing charged at capture
  ASSERT_EQ(cudaMemsetAsync(p, 0x6B, kBytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), p, kBytes, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, stream_), cudaSuccess);
  int outside = 0;
  EXPECT_EQ(cudaFreeAsync(&outside, stream_), cudaErrorInvalidValue);  // not graph memory
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_TRUE(collector.Collect().memory.empty());
  const auto events = log.Take();
  const auto created = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  ASSERT_EQ(created.size(), 4u);
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020)
                  .Contains(created[0]));
  EXPECT_EQ(events[created[0]].graph.nodeType, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  EXPECT_TRUE(FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020)
                  .Contains(created[3]));
  EXPECT_EQ(events[created[3]].graph.nodeType, CU_GRAPH_NODE_TYPE_MEM_FREE);
  const auto nodes = NodesOf(graph);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(TypesOf(nodes), (std::vector{cudaGraphNodeTypeMemAlloc, cudaGraphNodeTypeMemset,
                                         cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeMemFree}));

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(kBytes, 0x6B));
  EXPECT_EQ(FreeMemory(), free0_ - kBytes);  // kept in the graph pool until trimmed
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(FreeMemory(), free0_);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memory.size(), 2u);
  EXPECT_EQ(a.memory[0].address, reinterpret_cast<uint64_t>(p));
  EXPECT_EQ(a.memory[1].address, reinterpret_cast<uint64_t>(p));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
}

TEST_F(Graphs, ClonesAndChildGraphsAreClonedNodeByNode) {
  constexpr size_t kBytes = 128;
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  std::vector<unsigned char> host(kBytes, 0x3D);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaGraphNode_t copy = nullptr;
  ASSERT_NO_FATAL_FAILURE(AddUpload(graph, nullptr, 0, dev, host.data(), kBytes, &copy));
  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph, &copy, 1), cudaSuccess);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  GraphLog log;

  // cudaGraphClone: GRAPHNODE_CLONED for each node, then GRAPH_CLONED.
  cudaGraph_t clone = nullptr;
  ASSERT_EQ(cudaGraphClone(&clone, graph), cudaSuccess);
  auto events = log.Take();
  const Call clone_call =
      FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphClone_v10000);
  const auto nodes_cloned = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  const auto graph_cloned = Find(events, CUPTI_CBID_RESOURCE_GRAPH_CLONED);
  ASSERT_EQ(nodes_cloned.size(), 2u);
  ASSERT_EQ(graph_cloned.size(), 1u);
  const auto clone_nodes = NodesOf(clone);
  ASSERT_EQ(clone_nodes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Logged& e = events[nodes_cloned[i]];
    EXPECT_TRUE(clone_call.Contains(nodes_cloned[i]));
    EXPECT_EQ(e.graph.graph, clone);
    EXPECT_EQ(e.graph.originalGraph, graph);
    EXPECT_EQ(e.graph.node, clone_nodes[i]);
    EXPECT_EQ(e.graph.originalNode, i == 0 ? copy : empty);
    EXPECT_NE(e.node_id, e.original_node_id);
  }
  EXPECT_LT(nodes_cloned[1], graph_cloned[0]);
  EXPECT_TRUE(clone_call.Contains(graph_cloned[0]));
  EXPECT_EQ(events[graph_cloned[0]].graph.graph, clone);
  EXPECT_EQ(events[graph_cloned[0]].graph.originalGraph, graph);
  EXPECT_NE(GraphId(clone), GraphId(graph));

  // A child graph node embeds a clone of the child, made inside the call.
  cudaGraph_t parent = nullptr;
  ASSERT_EQ(cudaGraphCreate(&parent, 0), cudaSuccess);
  cudaGraphNode_t child = nullptr;
  log.Take();
  ASSERT_EQ(cudaGraphAddChildGraphNode(&child, parent, nullptr, 0, graph), cudaSuccess);
  events = log.Take();
  const Call add_child =
      FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddChildGraphNode_v10000);
  const auto embedded = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  ASSERT_EQ(embedded.size(), 2u);
  const auto made = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_TRUE(add_child.Contains(embedded[0]));
  EXPECT_TRUE(add_child.Contains(made[0]));
  EXPECT_EQ(events[embedded[0]].graph.originalNode, copy);
  EXPECT_EQ(events[made[0]].graph.node, child);
  EXPECT_EQ(events[made[0]].graph.nodeType, CU_GRAPH_NODE_TYPE_GRAPH);
  EXPECT_EQ(TypeOf(child), cudaGraphNodeTypeGraph);
  const uint64_t embedded_copy = events[embedded[0]].node_id;
  // Changing the child afterwards changes neither the clone nor the child node.
  cudaGraphNode_t extra = nullptr;
  ASSERT_NO_FATAL_FAILURE(AddUpload(graph, nullptr, 0, dev, host.data(), kBytes, &extra));

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, parent, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  events = log.Take();
  // The exec clones the child node and the embedded graph's nodes.
  const auto exec_clones = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  ASSERT_EQ(exec_clones.size(), 3u);
  EXPECT_EQ(events[exec_clones[0]].graph.originalNode, child);
  EXPECT_EQ(events[exec_clones[1]].original_node_id, embedded_copy);
  EXPECT_EQ(events[exec_clones[1]].graph.graphExec, exec);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memcpy.size(), 1u);
  EXPECT_EQ(a.memcpy[0].graphNodeId, events[exec_clones[1]].node_id);
  EXPECT_EQ(a.memcpy[0].graphId, GraphId(parent));
  EXPECT_EQ(DeviceBytes(dev, kBytes), host);

  // Destroying the parent destroys the embedded graph and its nodes too.
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  log.Take();
  ASSERT_EQ(cudaGraphDestroy(parent), cudaSuccess);
  events = log.Take();
  const auto graphs_destroyed = Find(events, CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING);
  const auto nodes_destroyed = Find(events, CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING);
  ASSERT_EQ(graphs_destroyed.size(), 2u);
  ASSERT_EQ(nodes_destroyed.size(), 3u);
  EXPECT_EQ(events[graphs_destroyed[0]].graph.graph, parent);
  EXPECT_EQ(events[nodes_destroyed[0]].graph.node, child);
  EXPECT_EQ(events[nodes_destroyed[1]].node_id, embedded_copy);
  ASSERT_EQ(cudaGraphDestroy(clone), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(GraphCallbacks, OnlyEnabledResourceCallbacksAreDelivered) {
  Recorder rec({});
  ASSERT_EQ(cuptiEnableCallback(1, rec.handle(), kResource, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED),
            CUPTI_SUCCESS);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaGraphNode_t node = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&node, graph, nullptr, 0), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
  const auto events = rec.Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(IsCallback(events[0], kResource, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
}

struct HostCall {
  std::atomic<int> calls{0};
  std::thread::id thread;
  cudaError_t runtime = cudaSuccess;
  CUresult driver = CUDA_SUCCESS;
  cudaStream_t stream = nullptr;
  cudaError_t status = cudaErrorUnknown;
};

void CUDART_CB HostFunction(void* data) {
  auto* h = static_cast<HostCall*>(data);
  h->thread = std::this_thread::get_id();
  void* p = nullptr;
  h->runtime = cudaMalloc(&p, 64);
  CUdeviceptr d = 0;
  h->driver = cuMemAlloc(&d, 64);
  h->calls.fetch_add(1);
}

void CUDART_CB StreamCallback(cudaStream_t stream, cudaError_t status, void* data) {
  auto* h = static_cast<HostCall*>(data);
  h->thread = std::this_thread::get_id();
  h->stream = stream;
  h->status = status;
  h->calls.fetch_add(1);
}

TEST_F(HostFunctions, RunOnADriverThreadWhileTheSubmittingCallWaits) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  GraphLog log;
  HostCall h;
  ASSERT_EQ(cudaLaunchHostFunc(stream, HostFunction, &h), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 1);  // finished before the call returned
  const std::thread::id driver_thread = h.thread;
  EXPECT_NE(driver_thread, std::this_thread::get_id());
  // CUDA may not be called from a host function; the refused calls are still traced.
  EXPECT_EQ(h.runtime, cudaErrorNotPermitted);
  EXPECT_EQ(h.driver, CUDA_ERROR_NOT_PERMITTED);
  const auto events = log.Take();
  const Call launch =
      FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000);
  const Call malloc_call = FindCall(events, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
  const Call alloc_call = FindCall(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  ASSERT_TRUE(malloc_call.found);
  EXPECT_TRUE(launch.Contains(malloc_call.enter));
  EXPECT_EQ(events[malloc_call.enter].thread, driver_thread);
  EXPECT_EQ(malloc_call.result, cudaErrorNotPermitted);
  EXPECT_EQ(alloc_call.result, CUDA_ERROR_NOT_PERMITTED);
  EXPECT_TRUE(FindCall(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc).found);

  // cudaStreamAddCallback: the stream as passed and the status of earlier work.
  ASSERT_EQ(cudaStreamAddCallback(stream, StreamCallback, &h, 0), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 2);
  EXPECT_EQ(h.stream, stream);
  EXPECT_EQ(h.status, cudaSuccess);
  EXPECT_EQ(h.thread, driver_thread);
  EXPECT_EQ(cudaStreamAddCallback(stream, StreamCallback, &h, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchHostFunc(stream, nullptr, &h), cudaErrorInvalidValue);

  // A host node runs at each launch, on the same thread; a captured host function too.
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaHostNodeParams params{HostFunction, &h};
  cudaGraphNode_t node = nullptr;
  ASSERT_EQ(cudaGraphAddHostNode(&node, graph, nullptr, 0, &params), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 2);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 3);
  EXPECT_EQ(h.thread, driver_thread);
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(stream, HostFunction, &h), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 3);  // captured, not run
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  const auto nodes = NodesOf(graph);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(TypeOf(nodes[0]), cudaGraphNodeTypeHost);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(h.calls.load(), 4);
  ASSERT_NO_FATAL_FAILURE(DestroyExecAndGraph(exec, graph));
  // cudaStreamAddCallback cannot be captured.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamAddCallback(stream, StreamCallback, &h, 0),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(h.calls.load(), 4);
  EXPECT_NE(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(GraphDriver, GenericNodesDirectLaunchesAndEntryPoints) {
  constexpr size_t kBytes = 4096;
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);

  CUgraphNodeParams alloc{};
  alloc.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  alloc.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc.alloc.poolProps.location.id = 0;
  alloc.alloc.bytesize = kBytes;
  CUgraphNode_st* a = nullptr;
  ASSERT_EQ(cuGraphAddNode(&a, graph, nullptr, nullptr, 0, &alloc), CUDA_SUCCESS);
  const CUdeviceptr dptr = alloc.alloc.dptr;
  ASSERT_NE(dptr, 0u);
  CUgraphNodeParams set{};
  set.type = CU_GRAPH_NODE_TYPE_MEMSET;
  set.memset.dst = dptr;
  set.memset.value = 0x3C;
  set.memset.elementSize = 1;
  set.memset.width = kBytes;
  set.memset.height = 1;
  set.memset.ctx = ctx;
  CUgraphNode m = nullptr;
  ASSERT_EQ(cuGraphAddNode(&m, graph, &a, nullptr, 1, &set), CUDA_SUCCESS);
  std::vector<unsigned char> host(kBytes, 0);
  CUgraphNodeParams copy{};
  copy.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  copy.memcpy.copyCtx = ctx;
  copy.memcpy.copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.memcpy.copyParams.srcDevice = dptr;
  copy.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_HOST;
  copy.memcpy.copyParams.dstHost = host.data();
  copy.memcpy.copyParams.WidthInBytes = kBytes;
  copy.memcpy.copyParams.Height = 1;
  copy.memcpy.copyParams.Depth = 1;
  CUgraphNode c = nullptr;
  ASSERT_EQ(cuGraphAddNode(&c, graph, &m, nullptr, 1, &copy), CUDA_SUCCESS);
  CUgraphNodeParams free_params{};
  free_params.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  free_params.free.dptr = dptr;
  CUgraphNode f = nullptr;
  ASSERT_EQ(cuGraphAddNode(&f, graph, &c, nullptr, 1, &free_params), CUDA_SUCCESS);
  // Not simulated: event nodes, moving a child graph, non-default edges.
  CUgraphNodeParams event{};
  event.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  CUgraphNode unused = nullptr;
  EXPECT_EQ(cuGraphAddNode(&unused, graph, nullptr, nullptr, 0, &event), CUDA_ERROR_NOT_SUPPORTED);
  CUgraph other = nullptr;
  ASSERT_EQ(cuGraphCreate(&other, 0), CUDA_SUCCESS);
  CUgraphNodeParams moved{};
  moved.type = CU_GRAPH_NODE_TYPE_GRAPH;
  moved.graph.graph = other;
  moved.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  EXPECT_EQ(cuGraphAddNode(&unused, graph, nullptr, nullptr, 0, &moved), CUDA_ERROR_NOT_SUPPORTED);
  CUgraphEdgeData programmatic{};
  programmatic.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  CUgraphNodeParams empty{};
  empty.type = CU_GRAPH_NODE_TYPE_EMPTY;
  EXPECT_EQ(cuGraphAddNode(&unused, graph, &f, &programmatic, 1, &empty), CUDA_ERROR_NOT_SUPPORTED);
  empty.reserved2 = 1;
  EXPECT_EQ(cuGraphAddNode(&unused, graph, nullptr, nullptr, 0, &empty), CUDA_ERROR_INVALID_VALUE);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  params.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  CUgraphExec device_exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithParams(&device_exec, other, &params), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
  params.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  params.hUploadStream = stream;
  CUgraphExec other_exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithParams(&other_exec, other, &params), CUDA_SUCCESS);
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  EXPECT_EQ(params.hErrNode_out, nullptr);
  EXPECT_EQ(cuGraphInstantiate(&device_exec, other, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD),
            CUDA_ERROR_INVALID_VALUE);  // upload only with params

  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMORY2});
  GraphLog log;
  ASSERT_EQ(cuGraphUpload(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  EXPECT_EQ(host, std::vector<unsigned char>(kBytes, 0x3C));
  const auto events = log.Take();
  const Activity act = collector.Collect();
  const Call launch = FindCall(events, kDriver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
  ASSERT_TRUE(launch.found);
  ASSERT_EQ(act.memcpy.size(), 1u);
  EXPECT_EQ(act.memcpy[0].correlationId, launch.correlation_id);
  EXPECT_EQ(act.memcpy[0].runtimeCorrelationId, 0u);  // the driver was called directly
  EXPECT_EQ(act.memcpy[0].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
  ASSERT_EQ(act.memory.size(), 2u);
  EXPECT_EQ(act.memory[0].correlationId, launch.correlation_id);

  // cuGetProcAddress hands out the newest ABI of each.
  void* fn = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuGraphAddNode", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuGraphAddNode_v2));
  ASSERT_EQ(
      cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr),
      CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v3));

  for (CUgraphExec e : {other_exec, exec}) ASSERT_EQ(cuGraphExecDestroy(e), CUDA_SUCCESS);
  for (CUgraph g : {other, graph}) ASSERT_EQ(cuGraphDestroy(g), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

TEST_F(GraphDriver, DriverCaptureOfDriverCopies) {
  constexpr size_t kBytes = 256;
  CUdeviceptr dev = 0;
  ASSERT_EQ(cuMemAlloc(&dev, kBytes), CUDA_SUCCESS);
  std::vector<unsigned char> host(kBytes, 0x77);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(dev, host.data(), kBytes, stream), CUDA_SUCCESS);
  CUstreamCaptureStatus status{};
  cuuint64_t id = 0;
  CUgraph capturing = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t count = 0;
  ASSERT_EQ(cuStreamGetCaptureInfo(stream, &status, &id, &capturing, &deps, nullptr, &count),
            CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  ASSERT_EQ(count, 1u);
  CUgraphNodeType type{};
  ASSERT_EQ(cuGraphNodeGetType(deps[0], &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEMCPY);
  // A captured graph cannot be destroyed or instantiated before the capture ends.
  EXPECT_EQ(cuGraphDestroy(capturing), CUDA_ERROR_INVALID_VALUE);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiate(&exec, capturing, 0), CUDA_ERROR_INVALID_VALUE);
  // Another thread's capture in thread-local mode does not prohibit anything here; from this
  // thread the capture cannot be ended by another one.
  std::thread([&] {
    CUcontext ctx = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, 64), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
    CUgraph g = nullptr;
    EXPECT_EQ(cuStreamEndCapture(stream, &g), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  }).join();
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  EXPECT_EQ(graph, capturing);
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  std::vector<unsigned char> back(kBytes, 0);
  ASSERT_EQ(cuMemcpyDtoH(back.data(), dev, kBytes), CUDA_SUCCESS);
  EXPECT_EQ(back, host);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(dev), CUDA_SUCCESS);
}

TEST(GraphExports, RuntimeAndCuptiSymbols) {
  void* cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(cudart, nullptr);
  for (const char* name : {"cudaGraphCreate",
                           "cudaGraphDestroy",
                           "cudaGraphAddKernelNode",
                           "cudaGraphAddMemcpyNode",
                           "cudaGraphAddMemcpyNode1D",
                           "cudaGraphAddMemsetNode",
                           "cudaGraphAddHostNode",
                           "cudaGraphAddEmptyNode",
                           "cudaGraphAddMemAllocNode",
                           "cudaGraphAddMemFreeNode",
                           "cudaGraphAddChildGraphNode",
                           "cudaGraphAddNode",
                           "cudaGraphClone",
                           "cudaGraphGetNodes",
                           "cudaGraphNodeGetType",
                           "cudaGraphInstantiate",
                           "cudaGraphInstantiateWithFlags",
                           "cudaGraphInstantiateWithParams",
                           "cudaGraphInstantiateWithParams_ptsz",
                           "cudaGraphLaunch",
                           "cudaGraphLaunch_ptsz",
                           "cudaGraphUpload",
                           "cudaGraphUpload_ptsz",
                           "cudaGraphExecDestroy",
                           "cudaDeviceGraphMemTrim",
                           "cudaDeviceGetGraphMemAttribute",
                           "cudaDeviceSetGraphMemAttribute",
                           "cudaStreamBeginCapture",
                           "cudaStreamBeginCapture_ptsz",
                           "cudaStreamBeginCaptureToGraph",
                           "cudaStreamBeginCaptureToGraph_ptsz",
                           "cudaStreamEndCapture",
                           "cudaStreamEndCapture_ptsz",
                           "cudaStreamIsCapturing",
                           "cudaStreamIsCapturing_ptsz",
                           "cudaStreamGetCaptureInfo",
                           "cudaStreamGetCaptureInfo_ptsz",
                           "cudaThreadExchangeStreamCaptureMode",
                           "cudaLaunchHostFunc",
                           "cudaLaunchHostFunc_ptsz",
                           "cudaStreamAddCallback",
                           "cudaStreamAddCallback_ptsz"}) {
    EXPECT_NE(dlvsym(cudart, name, "libcudart.so.13"), nullptr) << name;
  }
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(cupti, nullptr);
  for (const char* name : {"cuptiGetGraphNodeId", "cuptiGetGraphId", "cuptiGetGraphExecId"}) {
    EXPECT_NE(dlvsym(cupti, name, "libcupti.so.13"), nullptr) << name;
  }
  uint64_t id = 0;
  EXPECT_EQ(cuptiGetGraphNodeId(nullptr, &id), CUPTI_ERROR_INVALID_PARAMETER);
}

}  // namespace
}  // namespace gwsim::test
