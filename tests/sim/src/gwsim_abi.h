// Private plumbing between the three fake CUDA libraries of the simulator.
//
// The fake driver (libcuda.so.1) owns all simulated state: devices, contexts, memory, streams,
// the simulated clock, correlation ids and the one place where API callbacks, resource
// callbacks and activity records are produced. It exports the gwsim_* functions below
// (unversioned, next to the cu* ABI). The fake runtime (libcudart.so.13) and the fake CUPTI
// (libcupti.so.13) find them with dlopen("libcuda.so.1") + dlsym, the way the real libraries
// find the real driver, so neither has a DT_NEEDED on libcuda.so.1.
//
//   runtime  --gwsim_api_enter/exit-->  driver  --hooks->api/resource/activity-->  CUPTI
//
// This header is C so that its layout is fixed; it is test infrastructure, never installed.
#ifndef GWSIM_ABI_H_
#define GWSIM_ABI_H_

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GWSIM_ABI_VERSION 2u

// One traced API call. The caller (the runtime, or the driver for its own entry points) fills
// domain..symbol_name, calls gwsim_api_enter, runs the call, stores the address of its result
// in return_value and calls gwsim_api_exit with the same frame. The frame lives on the caller's
// stack; the driver links frames into a per-thread stack to nest runtime -> driver calls.
typedef struct gwsim_api_frame {
  uint32_t domain;  // CUpti_CallbackDomain: RUNTIME_API or DRIVER_API
  uint32_t cbid;    // CUPTI_RUNTIME_TRACE_CBID_* or CUPTI_DRIVER_TRACE_CBID_*
  const char* function_name;
  const void* params;       // the generated <api>_params struct, or NULL
  void* return_value;       // cudaError_t* or CUresult*, set before gwsim_api_exit
  const char* symbol_name;  // kernel name for launches, else NULL
  // Owned by the driver between enter and exit.
  uint64_t correlation_data;  // the slot CUpti_CallbackData.correlationData points at
  uint32_t correlation_id;
  uint32_t flags;
  struct gwsim_api_frame* parent;
  uint64_t start_ns;  // the simulated clock at ENTER (a RUNTIME or DRIVER record's start)
} gwsim_api_frame;

// Registered by the fake CUPTI. Every pointer must stay valid for the life of the process
// (the fake libcupti is linked -z nodelete). The driver calls these with none of its locks held.
typedef struct gwsim_cupti_hooks {
  uint32_t abi_version;  // GWSIM_ABI_VERSION
  // API ENTER/EXIT of any domain; CUPTI filters by subscriber and enable state.
  void (*api)(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
  // CUPTI_CB_DOMAIN_RESOURCE events.
  void (*resource)(CUpti_CallbackId cbid, const CUpti_ResourceData* data);
  // Whether records of this kind are wanted; a cheap check before building one.
  int (*activity_enabled)(CUpti_ActivityKind kind);
  // One complete record (CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4,
  // CUpti_ActivityMemory4, CUpti_ActivityKernel10 or CUpti_ActivityAPI); CUPTI copies it.
  void (*activity)(const CUpti_Activity* record, size_t size);
} gwsim_cupti_hooks;

typedef enum gwsim_fail_mode {
  GWSIM_FAIL_NONE = 0,
  GWSIM_FAIL_NO_DRIVER = 1,         // GWSIM_FAIL=no-driver
  GWSIM_FAIL_OTHER_SUBSCRIBER = 2,  // GWSIM_FAIL=other-subscriber
} gwsim_fail_mode;

typedef struct gwsim_config_info {
  uint32_t fail_mode;  // gwsim_fail_mode
  int device_count;
  uint32_t cupti_version;  // what cuptiGetVersion returns (GWSIM_CUPTI_VERSION)
  // GWSIM_EXIT_CONTEXT_DESTROY=1: the runtime releases its primary contexts when the process
  // exits or the runtime is unloaded (CONTEXT_DESTROY_STARTING); 0 (default): it does not.
  int exit_context_destroy;
  // The node's devices (GWSIM_DEVICE_COUNT), all of which NVML lists; device_count is those
  // CUDA_VISIBLE_DEVICES lets the process see.
  int node_device_count;
} gwsim_config_info;

// Exported by the fake driver. All are thread-safe.
void gwsim_api_enter(gwsim_api_frame* frame);
void gwsim_api_exit(gwsim_api_frame* frame);
// Suppress API callbacks (not resource callbacks) on this thread; returns the previous value.
// The runtime wraps its own bookkeeping calls into the driver (initialisation, property
// queries, teardown) in it, so a subscriber sees only the driver calls a real runtime API nests.
int gwsim_set_quiet(int quiet);
// Registers (or, with NULL, removes) the CUPTI hooks. Returns 0 on success.
int gwsim_register_cupti(const gwsim_cupti_hooks* hooks);
void gwsim_get_config(gwsim_config_info* out);
// The simulated clock in ns (what cuptiGetTimestamp returns).
uint64_t gwsim_now_ns(void);
// Ids CUPTI reports for a context (NULL: the calling thread's current one) and a stream.
// Return 0 on success, -1 for an unknown handle.
int gwsim_context_ids(CUcontext ctx, uint32_t* context_id, uint32_t* device_id);
int gwsim_stream_id(CUcontext ctx, CUstream stream, int per_thread, uint32_t* stream_id);
// Registers a kernel (deviceName from __cudaRegisterFunction) and returns its handle, usable
// as CUfunction and CUkernel. The name is copied.
CUfunction gwsim_register_function(const char* device_name);
// Allocates the storage of a __device__/__constant__ variable on `device` in its primary
// context (a MEMORY2 record of kind DEVICE_STATIC carries the name).
CUresult gwsim_alloc_variable(const char* name, size_t size, int device, CUdeviceptr* out);
// CUPTI's ids of graph objects (cuptiGetGraphNodeId, cuptiGetGraphId, cuptiGetGraphExecId):
// 0 on success, -1 for an unknown or destroyed handle.
int gwsim_graph_node_id(CUgraphNode node, uint64_t* id);
int gwsim_graph_id(CUgraph graph, uint32_t* id);
int gwsim_graph_exec_id(CUgraphExec exec, uint32_t* id);
// 1 on the driver's host-function thread, where CUDA calls are not permitted.
int gwsim_in_host_function(void);

typedef void (*gwsim_api_enter_fn)(gwsim_api_frame*);
typedef void (*gwsim_api_exit_fn)(gwsim_api_frame*);
typedef int (*gwsim_set_quiet_fn)(int);
typedef int (*gwsim_register_cupti_fn)(const gwsim_cupti_hooks*);
typedef void (*gwsim_get_config_fn)(gwsim_config_info*);
typedef uint64_t (*gwsim_now_ns_fn)(void);
typedef int (*gwsim_context_ids_fn)(CUcontext, uint32_t*, uint32_t*);
typedef int (*gwsim_stream_id_fn)(CUcontext, CUstream, int, uint32_t*);
typedef CUfunction (*gwsim_register_function_fn)(const char*);
typedef CUresult (*gwsim_alloc_variable_fn)(const char*, size_t, int, CUdeviceptr*);
typedef int (*gwsim_graph_node_id_fn)(CUgraphNode, uint64_t*);
typedef int (*gwsim_graph_id_fn)(CUgraph, uint32_t*);
typedef int (*gwsim_graph_exec_id_fn)(CUgraphExec, uint32_t*);
typedef int (*gwsim_in_host_function_fn)(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GWSIM_ABI_H_
