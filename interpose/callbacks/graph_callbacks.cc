// The switchboard's graph and resource callbacks (callback_state.h): a
// graph's memcpy, memory-alloc and memory-free nodes are recorded when they
// are made (explicitly, or captured from a stream) and replayed at each
// launch of an instance; the resource domain also marks contexts made and
// destroyed. The rules of callbacks.h hold here too.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "interpose/callbacks/callback_state.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/record/graphs.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch::switchboard {

namespace {

// The copy a graph's memcpy node makes at each launch.
CopyCall GraphCopy(const GraphWork& work) {
  CopyCall copy;
  copy.stack_id = work.stack_id;
  copy.bytes = work.bytes;
  copy.kind = work.copy_kind;
  copy.host = work.host;
  copy.async = true;
  return copy;
}

}  // namespace

void GraphLaunchEnter(const ParsedCall& call, uint32_t correlation) {
  Events events = CurrentEvents();
  if (!g_hooks.copy_activity || !events.enabled()) return;
  for (const auto& [node, work] : CurrentSession()->graphs().WorkOf(Addr(call.graph_exec))) {
    if (work.type != GraphWork::Type::kCopy) continue;
    CopyCall copy = GraphCopy(work);
    copy.correlation = correlation;
    events.GraphCopyCalled(correlation, node, copy, /*activity=*/true);
  }
}

void GraphLaunchExit(const ParsedCall& call, uint32_t correlation, bool succeeded) {
  Events events = CurrentEvents();
  const bool recording = events.enabled();
  for (const auto& [node, work] : CurrentSession()->graphs().WorkOf(Addr(call.graph_exec))) {
    switch (work.type) {
      case GraphWork::Type::kCopy:
        if (!succeeded) {
          if (g_hooks.copy_activity) {
            events.GraphLaunchFailed(correlation, node);
          }
        } else if (recording) {
          events.Copied(CopyEvent{work.bytes, work.copy_kind, true, CurrentPhase()});
          if (!g_hooks.copy_activity) {
            events.GraphCopyCalled(correlation, node, GraphCopy(work), /*activity=*/false);
          }
        }
        break;
      case GraphWork::Type::kAlloc:
        if (succeeded && recording && work.address != 0) {
          AllocEvent e;
          e.address = work.address;
          e.size = work.size;
          e.kind = MemKind::kGraph;
          e.device = work.device;
          e.stack_id = work.stack_id;
          e.phase = CurrentPhase();
          events.Allocated(e);
        }
        break;
      case GraphWork::Type::kFree:
        if (succeeded && work.address != 0) events.Freed(work.address);
        break;
      case GraphWork::Type::kKernel:  // each kernel node runs once per launch
        if (succeeded) {
          Launch(work.kernel != nullptr && *work.kernel != '\0' ? work.kernel : kGraphKernelNode);
        }
        break;
    }
  }
}

namespace {

uint64_t NodeId(CUgraphNode node) {
  uint64_t id = 0;
  if (node == nullptr || g_hooks.get_graph_node_id(node, &id) != CUPTI_SUCCESS) return 0;
  return id;
}

// The name of a kernel node's function, as the driver keeps it (the same
// storage as a launch's symbolName): cudaFuncGetName of the process's
// runtime, or cuFuncGetName of its driver, looked up once. Null when
// neither can tell (a static runtime, a driver before CUDA 12.3). A CUDA
// call inside the callback: gpuwatch's guard keeps its own callbacks out.
const char* KernelNameOf(const ParsedCall& call) {
  using RuntimeName = int (*)(const char**, const void*);
  using DriverName = int (*)(const char**, const void*);
  static const auto runtime_name =
      reinterpret_cast<RuntimeName>(dlsym(RTLD_DEFAULT, "cudaFuncGetName"));
  static const auto driver_name = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return driver != nullptr ? reinterpret_cast<DriverName>(dlsym(driver, "cuFuncGetName"))
                             : nullptr;
  }();
  if (call.kernel_func == nullptr) return nullptr;
  const char* name = nullptr;
  const auto get = call.kernel_func_driver ? driver_name : runtime_name;
  if (get == nullptr || get(&name, call.kernel_func) != 0) return nullptr;
  return name;
}

// A node made inside the tracked call in progress on this thread.
void OnGraphNodeCreated(const CUpti_ResourceData* r, const CUpti_GraphData* g) {
  if (!t_in_call || t_call.spec == nullptr) return;
  CallInProgress& c = t_call;
  const ParsedCall& call = c.call;
  // Instantiation makes nodes of its own; its clones are what count.
  if (call.role == Role::kInstantiate) return;
  c.made_node = true;
  GraphWork work;
  switch (call.role) {
    case Role::kCopy:
      work.type = GraphWork::Type::kCopy;
      work.bytes = call.copy.bytes;
      {
        CopyCall classified = call.copy;
        ClassifyCopy(call, &classified);
        work.copy_kind = classified.kind;
        work.host = classified.host;
      }
      break;
    case Role::kAlloc:
      work.type = GraphWork::Type::kAlloc;
      work.size = call.size;
      work.device = call.device >= 0 ? call.device : DeviceOfContext(r->context, /*context_uid=*/0);
      break;
    case Role::kFree:
      work.type = GraphWork::Type::kFree;
      work.address = call.address;
      break;
    case Role::kLaunch:  // a captured launch, or a kernel node added
      work.type = GraphWork::Type::kKernel;
      work.kernel = call.node_only ? KernelNameOf(call) : c.symbol;
      break;
    default:
      return;  // the rest do no work gpuwatch counts
  }
  const uint64_t id = NodeId(g->node);
  if (id == 0) return;
  work.stack_id = CallSite();
  c.node = id;
  CurrentSession()->graphs().OnNodeCreated(id, Addr(g->graph), work);
}

}  // namespace

void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* r) {
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
      // The CUDA libraries of this context are loaded by now (a runtime
      // loaded after gpuwatch attached, or loaded again after a dlclose).
      if (CurrentSession()->stacks() != nullptr) RefreshToolModules();
      CurrentEvents().ContextCreated(DeviceOfContext(r->context, 0));  // rare
      return;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
      // The context report captures what it holds first; then its memory
      // leaves the live table, as the driver frees it.
      if (g_hooks.on_context_destroy != nullptr) g_hooks.on_context_destroy();
      CurrentEvents().ContextDestroyed(DeviceOfContext(r->context, 0));
      return;
    default:
      break;
  }
  if (g_hooks.get_graph_node_id == nullptr || r->resourceDescriptor == nullptr) {
    return;
  }
  const auto* g = static_cast<const CUpti_GraphData*>(r->resourceDescriptor);
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
      OnGraphNodeCreated(r, g);
      return;
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
      const uint64_t clone = NodeId(g->node);
      const uint64_t original = NodeId(g->originalNode);
      if (clone == 0 || original == 0) return;
      CurrentSession()->graphs().OnNodeCloned(clone, original, Addr(g->graph));
      if (t_in_call && t_call.spec != nullptr && t_call.call.role == Role::kInstantiate) {
        CurrentSession()->graphs().AddInstantiatedClone(pthread_self(), clone);
      }
      return;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
      CurrentSession()->graphs().OnExecCreated(Addr(g->graphExec), Addr(g->graph), pthread_self());
      return;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      CurrentSession()->graphs().OnExecDestroyed(Addr(g->graphExec));
      return;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      CurrentSession()->graphs().OnGraphDestroyed(Addr(g->graph));
      return;
    default:
      return;
  }
}

}  // namespace gpuwatch::switchboard
