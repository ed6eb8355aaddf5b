// The fake CUPTI's graph ids: cuptiGetGraphNodeId, cuptiGetGraphId, cuptiGetGraphExecId. The
// driver owns the graphs and hands out the ids (unique per process; an executable graph's nodes
// have ids of their own, distinct from the nodes they were cloned from).
#include <dlfcn.h>

#include "cupti/internal.h"

namespace gwsim::cupti {
namespace {

struct GraphIds {
  gwsim_graph_node_id_fn node = nullptr;
  gwsim_graph_id_fn graph = nullptr;
  gwsim_graph_exec_id_fn exec = nullptr;
};

const GraphIds& Ids() {
  static const GraphIds* const ids = [] {
    auto* g = new GraphIds();  // never destroyed
    if (!Link().present) return g;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);  // the driver Link() connected to
    if (lib == nullptr) return g;
    g->node = reinterpret_cast<gwsim_graph_node_id_fn>(dlsym(lib, "gwsim_graph_node_id"));
    g->graph = reinterpret_cast<gwsim_graph_id_fn>(dlsym(lib, "gwsim_graph_id"));
    g->exec = reinterpret_cast<gwsim_graph_exec_id_fn>(dlsym(lib, "gwsim_graph_exec_id"));
    return g;
  }();
  return *ids;
}

}  // namespace
}  // namespace gwsim::cupti

using namespace gwsim::cupti;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t* nodeId) {
  if (node == nullptr || nodeId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const GraphIds& ids = Ids();
  if (ids.node == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return ids.node(node, nodeId) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetGraphId(CUgraph graph, uint32_t* pId) {
  if (graph == nullptr || pId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const GraphIds& ids = Ids();
  if (ids.graph == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return ids.graph(graph, pId) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t* pId) {
  if (graphExec == nullptr || pId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const GraphIds& ids = Ids();
  if (ids.exec == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return ids.exec(graphExec, pId) == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
