// CUDA graph work that happens at each launch, not where it was recorded.
//
// A memcpy node, a memory allocation node and a memory free node are made by
// one API call (cudaGraphAddMemcpyNode, or a cudaMemcpyAsync captured from a
// stream) and do their work every time an executable instance of the graph
// is launched. The table keeps, per node, what it does and the site of the
// call that made it; instantiation copies the nodes into the exec; a launch
// replays the exec's work. Nodes of other types are not kept.
//
// Keys: nodes by CUPTI's node id (what activity records carry in
// graphNodeId), graphs and execs by their handle (what launch calls carry).
//
// Thread-safety: every method may be called concurrently; one mutex guards
// the tables. Graph construction and instantiation are rare and costly in
// CUDA itself; a launch copies its exec's work under the lock.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_GRAPHS_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_GRAPHS_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/event.h"
#include "libgpuwatch/record/transfers.h"

namespace gpuwatch {

struct GraphWork {
  enum class Type : uint8_t { kCopy, kAlloc, kFree, kKernel };
  Type type = Type::kCopy;
  uint32_t stack_id = 0;  // the site of the call that made the node
  // kCopy
  uint64_t bytes = 0;
  CopyKind copy_kind = CopyKind::kUnknown;
  HostKind host = HostKind::kUnknown;  // as gpuwatch's own tables saw it when the node was made
  // kAlloc and kFree: the address (an allocation's is fixed when its node
  // is made and known at the end of that call); kAlloc: size and device.
  uint64_t address = 0;
  uint64_t size = 0;
  int32_t device = 0;
  // kKernel: the kernel's name as CUPTI gave it when a launch was captured
  // into the graph (static storage); null for a node added explicitly.
  const char* kernel = nullptr;
  // Set by the table: when the node (or the node a clone copies) was made.
  uint64_t made = 0;
};

class GraphTable {
 public:
  // A node made in `graph`.
  void OnNodeCreated(uint64_t node_id, uintptr_t graph, const GraphWork& work);
  // The address of an allocation node, known at the end of the call that made it.
  void SetAddress(uint64_t node_id, uint64_t address);
  // `clone` (in `graph`, may be 0) is a copy of `original`: a cloned graph's
  // node, or an exec's.
  void OnNodeCloned(uint64_t clone, uint64_t original, uintptr_t graph);
  // A clone made by an instantiation running on `thread` (any key unique to
  // the thread): it belongs to the exec that instantiation makes.
  void AddInstantiatedClone(uintptr_t thread, uint64_t clone);
  // An exec made from `graph` by an instantiation on `thread`: its nodes are
  // the clones AddInstantiatedClone recorded for that thread, or, when there
  // were none, the graph's own nodes at this moment.
  void OnExecCreated(uintptr_t exec, uintptr_t graph, uintptr_t thread);
  // An instantiation on `thread` ended (failed, or its exec was recorded).
  void EndInstantiation(uintptr_t thread);
  void OnGraphDestroyed(uintptr_t graph);
  void OnExecDestroyed(uintptr_t exec);

  // The work of one launch of `exec`, with each node's id, in the order the
  // nodes (or those they copy) were made. That order is a topological one: a
  // node can only depend on nodes made before it, and the driver may give an
  // allocation node the address of an allocation freed before it in the
  // graph (alloc, free, alloc at one address in one launch). The order of
  // an instantiation's clone callbacks is not documented.

  std::vector<std::pair<uint64_t, GraphWork>> WorkOf(uintptr_t exec) const;
  // A node's work; false when the node is not kept.
  bool Find(uint64_t node_id, GraphWork* out) const;

  size_t node_count() const;
  // For pthread_atfork (prepare; parent and child).
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

 private:
  using NodeLists = std::unordered_map<uintptr_t, std::vector<uint64_t>>;
  // Forgets `owner` of `owners` (a graph, or an exec) and those of its nodes
  // that no entry of `others` still holds. The caller holds mu_.
  void ForgetLocked(NodeLists& owners, uintptr_t owner, const NodeLists& others);

  mutable Mutex mu_;
  uint64_t made_ = 0;                              // nodes made so far; guarded by mu_
  std::unordered_map<uint64_t, GraphWork> nodes_;  // guarded by mu_
  NodeLists graphs_;                               // graph -> its kept nodes
  NodeLists execs_;                                // exec -> its kept nodes
  NodeLists instantiating_;                        // thread -> clones
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_GRAPHS_H_
