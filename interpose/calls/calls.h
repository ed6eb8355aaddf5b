// The CUDA API calls gpuwatch subscribes to, and what each one means.
//
// One registry lists every callback id gpuwatch handles: its domain, id, name,
// role (allocation, free, copy, launch, ...) and the function that reads its
// params struct. The same registry decides what is enabled (EnableCallbacks)
// and how a callback is dispatched (FindSpec), so a handled call can never be
// left unsubscribed. Reading a call (ParseCall) is pure: it depends only on
// the callback data, so it is tested from hand-built params structs.
#ifndef GPUWATCH_INTERPOSE_CALLS_CALLS_H_
#define GPUWATCH_INTERPOSE_CALLS_CALLS_H_

#include <cupti.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "libgpuwatch/record/event.h"
#include "libgpuwatch/record/lifecycle.h"
#include "libgpuwatch/record/transfers.h"

namespace gpuwatch {

// What a call does, as far as gpuwatch is concerned.
enum class Role : uint8_t {
  kAlloc,        // memory allocated: size at ENTER, address at a successful EXIT
  kFree,         // memory freed: the address, known at ENTER
  kCopy,         // a copy: bytes and direction, known at ENTER
  kLaunch,       // a kernel launch (in the registry: a launch now, never a graph's node)
  kGraphLaunch,  // a graph launch: the work of its nodes
  kSync,         // the host waits for the device
  kVmmCreate,    // cuMemCreate: physical memory on a device or host location
  kVmmRelease,   // cuMemRelease: a physical handle released
  kVmmUnmap,     // cuMemUnmap: every mapping inside a range ended
  kVmmMap,       // cuMemMap: a handle mapped at an address (no memory of its own)
  kVmmImport,    // cuMemImportFromShareableHandle: another process's memory
  kVmmRetain,    // cuMemRetainAllocationHandle: one more reference to a mapped handle
  kIpcOpen,      // cuIpcOpenMemHandle: another process's memory mapped here (address at EXIT)
  kIpcClose,     // cuIpcCloseMemHandle: a reference to such a mapping dropped (address at ENTER)
  kInstantiate,  // a graph instantiated: the nodes cloned inside it are the exec's
  kGraphNode,    // a graph node (cudaGraphAddNode, ...AddKernelNode): parsed as its node's role
};
const char* RoleName(Role role);

// A call as read from its params struct.
struct ParsedCall {
  Role role = Role::kAlloc;
  // kAlloc and kIpcOpen: what and where. `address` is valid only after a
  // successful EXIT; kFree, kIpcClose and kVmmUnmap: the address freed (and
  // kVmmUnmap's size); kVmmMap: the range mapped.
  MemKind kind = MemKind::kDevice;
  uint64_t address = 0;
  uint64_t size = 0;
  // The device the call names (cuMemCreate's location, a graph allocation
  // node's pool); -1: the device of the calling context.
  int32_t device = -1;
  const void* stream = nullptr;
  // VMM: the physical handle (kVmmCreate, kVmmImport and kVmmRetain at a
  // successful EXIT, kVmmRelease, kVmmMap); kVmmRetain's address too.
  uint64_t handle = 0;
  // A CUDA array's element size in bytes (array allocations).
  uint32_t array_element_bytes = 0;
  CopyCall copy;  // kCopy: bytes, direction, async, records
  // kCopy: the two sides' addresses where the call names them (0 when not:
  // symbols, arrays' offsets, batches), to classify memory the call does not.
  uint64_t src = 0;
  uint64_t dst = 0;
  SyncKind sync = SyncKind::kDevice;  // kSync
  const void* graph_exec = nullptr;   // kGraphLaunch
  // kLaunch of a kernel node added to a graph: its function, a runtime
  // function (cudaFuncGetName) or, when `kernel_func_driver`, a CUfunction.
  const void* kernel_func = nullptr;
  bool kernel_func_driver = false;
  // Adds a node to a graph and does nothing now (cudaGraphAddMemcpyNode,
  // cudaGraphAddMemAllocNode, ...); its work happens at each launch.
  bool node_only = false;
};

// Reads a call's params. `succeeded`: an EXIT whose call returned success
// (output parameters are read only then). Returns false when the params do
// not describe anything gpuwatch records (a NULL params struct, an empty
// batch, a graph node of another type).
using ParseFn = bool (*)(const CUpti_CallbackData* data, bool succeeded, ParsedCall* out);

// Where a kernel launch's params struct has its stream, for the launch path
// to read it in place (LaunchStream) rather than through the entry's reader:
// the stream's byte offset, or, for a launch given a config
// (cudaLaunchKernelExC, cuLaunchKernelEx), the config pointer's offset and
// the stream's inside the config. kNone: no stream.
struct StreamAt {
  static constexpr uint8_t kNone = 0xff;
  uint8_t offset = kNone;
  uint8_t in_config = kNone;
};

struct CallbackSpec {
  const char* name;  // the cbid's name without its prefix, e.g. "cudaMalloc_v3020"
  ParseFn parse;     // null: nothing to read (launches, syncs of zero-argument APIs)
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  Role role;
  SyncKind sync;       // kSync
  StreamAt stream_at;  // kLaunch
};

// Every runtime and driver callback gpuwatch handles.
std::span<const CallbackSpec> CallbackRegistry();

// The resource callbacks gpuwatch handles (contexts and graphs).
std::span<const CUpti_CallbackId> ResourceCallbacks();

namespace calls_internal {
inline constexpr size_t kRuntimeIds = CUPTI_RUNTIME_TRACE_CBID_SIZE;
inline constexpr size_t kDriverIds = CUPTI_DRIVER_TRACE_CBID_SIZE;
// Per domain, by callback id: 1 + the entry's index in the registry, 0 when
// gpuwatch does not handle the id (calls.cc builds them at compile time).
extern const std::array<uint16_t, kRuntimeIds> kRuntimeIndex;
extern const std::array<uint16_t, kDriverIds> kDriverIndex;
extern const CallbackSpec kRegistryEntries[];  // CallbackRegistry()
}  // namespace calls_internal

// The registry's entry for a callback, or null when gpuwatch does not handle
// it: two loads, on every callback.
inline const CallbackSpec* FindSpec(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  using namespace calls_internal;  // NOLINT(google-build-using-namespace): the tables above
  uint16_t entry = 0;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    entry = cbid < kRuntimeIds ? kRuntimeIndex[cbid] : 0;
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    entry = cbid < kDriverIds ? kDriverIndex[cbid] : 0;
  }
  return entry != 0 ? kRegistryEntries + (entry - 1) : nullptr;
}

// A kernel launch's stream, as its reader reads it (ParseCall), in a load
// or two (`spec` of Role::kLaunch; null when the call names none).
inline const void* LaunchStream(const CallbackSpec& spec, const CUpti_CallbackData* data) {
  const auto* params = static_cast<const unsigned char*>(data->functionParams);
  if (params == nullptr || spec.stream_at.offset == StreamAt::kNone) return nullptr;
  const void* at = nullptr;
  std::memcpy(&at, params + spec.stream_at.offset, sizeof(at));
  if (spec.stream_at.in_config == StreamAt::kNone || at == nullptr) return at;
  const void* stream = nullptr;
  std::memcpy(&stream, static_cast<const unsigned char*>(at) + spec.stream_at.in_config,
              sizeof(stream));
  return stream;
}

// Reads `data` as `spec` says. See ParseFn.
bool ParseCall(const CallbackSpec& spec, const CUpti_CallbackData* data, bool succeeded,
               ParsedCall* out);

// Element sizes of the CUDA arrays alive now, for copies whose extent is
// counted in elements (cudaMemcpy3D with an array). Thread-safe.
void RememberArray(uint64_t handle, uint32_t element_bytes);
void ForgetArray(uint64_t handle);
uint32_t ArrayElementBytes(uint64_t handle);  // 1 when unknown

struct CuptiApi;

// Enables exactly the runtime, driver and resource callbacks of the registry.
// Returns false with a reason on error.
bool EnableCallbacks(const CuptiApi& api, CUpti_SubscriberHandle subscriber, std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLS_CALLS_H_
