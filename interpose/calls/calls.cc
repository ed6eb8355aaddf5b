#include "interpose/calls/calls.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include "interpose/calls/copy_readers.h"
#include "interpose/cupti/cupti_loader.h"
#include "libgpuwatch/base/enum_names.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

const char* RoleName(Role role) {
  static constexpr const char* kNames[] = {
      "alloc",      "free",        "copy",        "launch",    "graph_launch", "sync",
      "vmm_create", "vmm_release", "vmm_unmap",   "vmm_map",   "vmm_import",   "vmm_retain",
      "ipc_open",   "ipc_close",   "instantiate", "graph_node"};
  static_assert(std::size(kNames) == static_cast<size_t>(Role::kGraphNode) + 1);
  return EnumName(role, kNames, "?");
}

namespace {

using namespace call_readers;  // NOLINT(google-build-using-namespace): the registry's readers

// ---------------------------------------------------------------------------
// The registry. One line per callback id; variants are listed beside their
// base API so that a missing one is easy to see (calls_test.cc checks the
// list against every id in CUPTI's headers).

constexpr CallbackSpec Rt(CUpti_CallbackId cbid, const char* name, Role role, ParseFn parse,
                          SyncKind sync = SyncKind::kDevice) {
  return {name, parse, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, role, sync, {}};
}
constexpr CallbackSpec Drv(CUpti_CallbackId cbid, const char* name, Role role, ParseFn parse,
                           SyncKind sync = SyncKind::kDevice) {
  return {name, parse, CUPTI_CB_DOMAIN_DRIVER_API, cbid, role, sync, {}};
}
// A kernel launch: its reader, and where its stream is (LaunchStream).
constexpr CallbackSpec WithStream(CallbackSpec spec, StreamAt at) {
  spec.stream_at = at;
  return spec;
}

// RT(name, role, reader): the reader is instantiated on the call's own params struct.
// NOLINTBEGIN(bugprone-macro-parentheses): a reader is a template's name, not an expression.
#define RT(name, role, ...) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, &__VA_ARGS__<name##_params>)
#define RTA(name, role, reader, async) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, &reader<name##_params, (async)>)
#define RT0(name, role, ...) \
  Rt(CUPTI_RUNTIME_TRACE_CBID_##name, #name, Role::role, nullptr, ##__VA_ARGS__)
#define DRV(name, role, ...) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, &__VA_ARGS__<name##_params>)
#define DRVA(name, role, reader, async) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, &reader<name##_params, (async)>)
#define DRVK(name, kind, async)                           \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::kCopy, \
      &ReadDriverCopy<name##_params, CopyKind::kind, (async)>)
#define DRV0(name, role, ...) \
  Drv(CUPTI_DRIVER_TRACE_CBID_##name, #name, Role::role, nullptr, ##__VA_ARGS__)
#define RTL(name) WithStream(RT(name, kLaunch, ReadLaunch), LaunchStreamAt<name##_params>())
#define DRVL(name) WithStream(DRV(name, kLaunch, ReadLaunch), LaunchStreamAt<name##_params>())
// NOLINTEND(bugprone-macro-parentheses)

constexpr bool kSync = false;
constexpr bool kAsync = true;

}  // namespace

// In calls_internal: the callback path addresses the array itself (FindSpec,
// the status page's index of a call), not a pointer to it.
namespace calls_internal {
// clang-format off
constexpr CallbackSpec kRegistryEntries[] = {
    // Runtime: allocations.
    RT(cudaMalloc_v3020, kAlloc, ReadMalloc),
    RT(cudaMallocPitch_v3020, kAlloc, ReadMallocPitch),
    RT(cudaMalloc3D_v3020, kAlloc, ReadMalloc3D),
    RT(cudaMallocManaged_v6000, kAlloc, ReadMallocManaged),
    RT(cudaMallocAsync_v11020, kAlloc, ReadMallocAsync),
    RT(cudaMallocAsync_ptsz_v11020, kAlloc, ReadMallocAsync),
    RT(cudaMallocFromPoolAsync_v11020, kAlloc, ReadMallocFromPoolAsync),
    RT(cudaMallocFromPoolAsync_ptsz_v11020, kAlloc, ReadMallocFromPoolAsync),
    RT(cudaMallocHost_v3020, kAlloc, ReadMallocHost),
    RT(cudaHostAlloc_v3020, kAlloc, ReadHostAlloc),
    RT(cudaHostRegister_v4000, kAlloc, ReadHostRegister),
    RT(cudaMallocArray_v3020, kAlloc, ReadMallocArray),
    RT(cudaMalloc3DArray_v3020, kAlloc, ReadMalloc3DArray),
    RT(cudaMallocMipmappedArray_v5000, kAlloc, ReadMallocMipmappedArray),
    // Runtime: frees.
    RT(cudaFree_v3020, kFree, ReadFree),
    RT(cudaFreeAsync_v11020, kFree, ReadFree),
    RT(cudaFreeAsync_ptsz_v11020, kFree, ReadFree),
    RT(cudaFreeHost_v3020, kFree, ReadFree),
    RT(cudaHostUnregister_v4000, kFree, ReadFree),
    RT(cudaFreeArray_v3020, kFree, ReadFree),
    RT(cudaFreeMipmappedArray_v5000, kFree, ReadFree),
    // Runtime: CUDA IPC, another process's memory (exporting a handle changes nothing).
    RT(cudaIpcOpenMemHandle_v4010, kIpcOpen, ReadIpcOpen),
    RT(cudaIpcCloseMemHandle_v4010, kIpcClose, ReadIpcClose),
    // Runtime: copies.
    RTA(cudaMemcpy_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpy_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpy2D_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2D_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy3D_v3020, kCopy, ReadMemcpy3D, kSync),
    RTA(cudaMemcpy3D_ptds_v7000, kCopy, ReadMemcpy3D, kSync),
    RTA(cudaMemcpy3DAsync_v3020, kCopy, ReadMemcpy3D, kAsync),
    RTA(cudaMemcpy3DAsync_ptsz_v7000, kCopy, ReadMemcpy3D, kAsync),
    RTA(cudaMemcpyPeer_v4000, kCopy, ReadMemcpyPeer, kSync),
    RTA(cudaMemcpyPeerAsync_v4000, kCopy, ReadMemcpyPeer, kAsync),
    RTA(cudaMemcpy3DPeer_v4000, kCopy, ReadMemcpy3DPeer, kSync),
    RTA(cudaMemcpy3DPeer_ptds_v7000, kCopy, ReadMemcpy3DPeer, kSync),
    RTA(cudaMemcpy3DPeerAsync_v4000, kCopy, ReadMemcpy3DPeer, kAsync),
    RTA(cudaMemcpy3DPeerAsync_ptsz_v7000, kCopy, ReadMemcpy3DPeer, kAsync),
    RTA(cudaMemcpyToSymbol_v3020, kCopy, ReadMemcpyToSymbol, kSync),
    RTA(cudaMemcpyToSymbol_ptds_v7000, kCopy, ReadMemcpyToSymbol, kSync),
    RTA(cudaMemcpyToSymbolAsync_v3020, kCopy, ReadMemcpyToSymbol, kAsync),
    RTA(cudaMemcpyToSymbolAsync_ptsz_v7000, kCopy, ReadMemcpyToSymbol, kAsync),
    RTA(cudaMemcpyFromSymbol_v3020, kCopy, ReadMemcpyFromSymbol, kSync),
    RTA(cudaMemcpyFromSymbol_ptds_v7000, kCopy, ReadMemcpyFromSymbol, kSync),
    RTA(cudaMemcpyFromSymbolAsync_v3020, kCopy, ReadMemcpyFromSymbol, kAsync),
    RTA(cudaMemcpyFromSymbolAsync_ptsz_v7000, kCopy, ReadMemcpyFromSymbol, kAsync),
    RTA(cudaMemcpyToArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyToArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyToArrayAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyToArrayAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyFromArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyFromArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyFromArrayAsync_v3020, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyFromArrayAsync_ptsz_v7000, kCopy, ReadMemcpy, kAsync),
    RTA(cudaMemcpyArrayToArray_v3020, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpyArrayToArray_ptds_v7000, kCopy, ReadMemcpy, kSync),
    RTA(cudaMemcpy2DToArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DToArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DToArrayAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DToArrayAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DFromArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DFromArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DFromArrayAsync_v3020, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DFromArrayAsync_ptsz_v7000, kCopy, ReadMemcpy2D, kAsync),
    RTA(cudaMemcpy2DArrayToArray_v3020, kCopy, ReadMemcpy2D, kSync),
    RTA(cudaMemcpy2DArrayToArray_ptds_v7000, kCopy, ReadMemcpy2D, kSync),
    RT(cudaMemcpyBatchAsync_v13000, kCopy, ReadMemcpyBatch),
    RT(cudaMemcpyBatchAsync_ptsz_v13000, kCopy, ReadMemcpyBatch),
    RT(cudaMemcpy3DBatchAsync_v13000, kCopy, ReadMemcpy3DBatch),
    RT(cudaMemcpy3DBatchAsync_ptsz_v13000, kCopy, ReadMemcpy3DBatch),
    // Runtime: graph nodes that allocate, free or copy at each launch.
    RT(cudaGraphAddMemcpyNode_v10000, kCopy, ReadGraphMemcpyNode),
    RT(cudaGraphAddMemcpyNode1D_v11010, kCopy, ReadGraphMemcpyNode1D),
    RT(cudaGraphAddMemcpyNodeToSymbol_v11010, kCopy, ReadGraphMemcpyNodeToSymbol),
    RT(cudaGraphAddMemcpyNodeFromSymbol_v11010, kCopy, ReadGraphMemcpyNodeFromSymbol),
    RT(cudaGraphAddMemAllocNode_v11040, kAlloc, ReadGraphMemAllocNode),
    RT(cudaGraphAddMemFreeNode_v11040, kFree, ReadGraphMemFreeNode),
    RT(cudaGraphAddNode_v12030, kGraphNode, ReadGraphAddNodeRuntime),
    RT(cudaGraphAddKernelNode_v10000, kGraphNode, ReadGraphKernelNode),
    RT0(cudaGraphInstantiate_v10000, kInstantiate),
    RT0(cudaGraphInstantiate_v12000, kInstantiate),
    RT0(cudaGraphInstantiateWithFlags_v11040, kInstantiate),
    RT0(cudaGraphInstantiateWithParams_v12000, kInstantiate),
    RT0(cudaGraphInstantiateWithParams_ptsz_v12000, kInstantiate),
    // Runtime: launches.
    RTL(cudaLaunchKernel_v7000),
    RTL(cudaLaunchKernel_ptsz_v7000),
    RTL(cudaLaunchKernelExC_v11060),
    RTL(cudaLaunchKernelExC_ptsz_v11060),
    RT0(__cudaLaunchKernel_v13000, kLaunch),  // no params struct: stream unknown
    RT0(__cudaLaunchKernel_ptsz_v13000, kLaunch),
    RTL(cudaLaunchCooperativeKernel_v9000),
    RTL(cudaLaunchCooperativeKernel_ptsz_v9000),
    RT(cudaGraphLaunch_v10000, kGraphLaunch, ReadGraphLaunch),
    RT(cudaGraphLaunch_ptsz_v10000, kGraphLaunch, ReadGraphLaunch),
    // Runtime: where the host waits.
    RT0(cudaDeviceSynchronize_v3020, kSync, SyncKind::kDevice),
    RT0(cudaThreadSynchronize_v3020, kSync, SyncKind::kDevice),
    RT0(cudaStreamSynchronize_v3020, kSync, SyncKind::kStream),
    RT0(cudaStreamSynchronize_ptsz_v7000, kSync, SyncKind::kStream),
    RT0(cudaEventSynchronize_v3020, kSync, SyncKind::kEvent),

    // Driver: allocations.
    DRV(cuMemAlloc_v2, kAlloc, ReadMemAlloc),
    DRV(cuMemAllocPitch_v2, kAlloc, ReadMemAllocPitch),
    DRV(cuMemAllocManaged, kAlloc, ReadMemAllocManaged),
    DRV(cuMemAllocAsync, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocAsync_ptsz, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocFromPoolAsync, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocFromPoolAsync_ptsz, kAlloc, ReadMemAllocAsync),
    DRV(cuMemAllocHost_v2, kAlloc, ReadMemAllocHost),
    DRV(cuMemHostAlloc, kAlloc, ReadMemAllocHost),
    DRV(cuMemHostRegister_v2, kAlloc, ReadMemHostRegister),
    DRV(cuArrayCreate_v2, kAlloc, ReadArrayCreate),
    DRV(cuArray3DCreate_v2, kAlloc, ReadArray3DCreate),
    DRV(cuMipmappedArrayCreate, kAlloc, ReadMipmappedArrayCreate),
    DRV(cuMemCreate, kVmmCreate, ReadMemCreate),
    DRV(cuMemRelease, kVmmRelease, ReadMemRelease),
    DRV(cuMemMap, kVmmMap, ReadMemMap),
    DRV(cuMemImportFromShareableHandle, kVmmImport, ReadMemImport),
    DRV(cuMemRetainAllocationHandle, kVmmRetain, ReadMemRetain),
    DRV(cuMemUnmap, kVmmUnmap, ReadMemUnmap),
    DRV(cuIpcOpenMemHandle, kIpcOpen, ReadIpcOpen),
    DRV(cuIpcOpenMemHandle_v2, kIpcOpen, ReadIpcOpen),
    DRV(cuIpcCloseMemHandle, kIpcClose, ReadIpcClose),
    // Driver: frees.
    DRV(cuMemFree_v2, kFree, ReadFree),
    DRV(cuMemFreeAsync, kFree, ReadFree),
    DRV(cuMemFreeAsync_ptsz, kFree, ReadFree),
    DRV(cuMemFreeHost, kFree, ReadFree),
    DRV(cuMemHostUnregister, kFree, ReadFree),
    DRV(cuArrayDestroy, kFree, ReadFree),
    DRV(cuMipmappedArrayDestroy, kFree, ReadFree),
    // Driver: copies.
    DRVK(cuMemcpyHtoD_v2, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoD_v2_ptds, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoDAsync_v2, kHostToDevice, kAsync),
    DRVK(cuMemcpyHtoDAsync_v2_ptsz, kHostToDevice, kAsync),
    DRVK(cuMemcpyDtoH_v2, kDeviceToHost, kSync),
    DRVK(cuMemcpyDtoH_v2_ptds, kDeviceToHost, kSync),
    DRVK(cuMemcpyDtoHAsync_v2, kDeviceToHost, kAsync),
    DRVK(cuMemcpyDtoHAsync_v2_ptsz, kDeviceToHost, kAsync),
    DRVK(cuMemcpyDtoD_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoD_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoDAsync_v2, kDeviceToDevice, kAsync),
    DRVK(cuMemcpyDtoDAsync_v2_ptsz, kDeviceToDevice, kAsync),
    DRVK(cuMemcpyHtoA_v2, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoA_v2_ptds, kHostToDevice, kSync),
    DRVK(cuMemcpyHtoAAsync_v2, kHostToDevice, kAsync),
    DRVK(cuMemcpyHtoAAsync_v2_ptsz, kHostToDevice, kAsync),
    DRVK(cuMemcpyAtoH_v2, kDeviceToHost, kSync),
    DRVK(cuMemcpyAtoH_v2_ptds, kDeviceToHost, kSync),
    DRVK(cuMemcpyAtoHAsync_v2, kDeviceToHost, kAsync),
    DRVK(cuMemcpyAtoHAsync_v2_ptsz, kDeviceToHost, kAsync),
    DRVK(cuMemcpyAtoD_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoD_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoA_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyDtoA_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoA_v2, kDeviceToDevice, kSync),
    DRVK(cuMemcpyAtoA_v2_ptds, kDeviceToDevice, kSync),
    DRVK(cuMemcpy, kUnknown, kSync),
    DRVK(cuMemcpy_ptds, kUnknown, kSync),
    DRVK(cuMemcpyAsync, kUnknown, kAsync),
    DRVK(cuMemcpyAsync_ptsz, kUnknown, kAsync),
    DRVK(cuMemcpyPeer, kPeer, kSync),
    DRVK(cuMemcpyPeer_ptds, kPeer, kSync),
    DRVK(cuMemcpyPeerAsync, kPeer, kAsync),
    DRVK(cuMemcpyPeerAsync_ptsz, kPeer, kAsync),
    DRVA(cuMemcpy2D_v2, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy2D_v2_ptds, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy2DUnaligned_v2, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy2DUnaligned_v2_ptds, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy2DAsync_v2, kCopy, ReadDriverCopyDescriptor, kAsync),
    DRVA(cuMemcpy2DAsync_v2_ptsz, kCopy, ReadDriverCopyDescriptor, kAsync),
    DRVA(cuMemcpy3D_v2, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy3D_v2_ptds, kCopy, ReadDriverCopyDescriptor, kSync),
    DRVA(cuMemcpy3DAsync_v2, kCopy, ReadDriverCopyDescriptor, kAsync),
    DRVA(cuMemcpy3DAsync_v2_ptsz, kCopy, ReadDriverCopyDescriptor, kAsync),
    DRVA(cuMemcpy3DPeer, kCopy, ReadDriverCopy3DPeer, kSync),
    DRVA(cuMemcpy3DPeer_ptds, kCopy, ReadDriverCopy3DPeer, kSync),
    DRVA(cuMemcpy3DPeerAsync, kCopy, ReadDriverCopy3DPeer, kAsync),
    DRVA(cuMemcpy3DPeerAsync_ptsz, kCopy, ReadDriverCopy3DPeer, kAsync),
    DRV(cuMemcpyBatchAsync, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_ptsz, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_v2, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpyBatchAsync_v2_ptsz, kCopy, ReadMemcpyBatch),
    DRV(cuMemcpy3DBatchAsync, kCopy, ReadMemcpy3DBatch),
    DRV(cuMemcpy3DBatchAsync_ptsz, kCopy, ReadMemcpy3DBatch),
    DRV(cuMemcpy3DBatchAsync_v2, kCopy, ReadMemcpy3DBatch),
    DRV(cuMemcpy3DBatchAsync_v2_ptsz, kCopy, ReadMemcpy3DBatch),
    // Driver: graph nodes.
    DRV(cuGraphAddMemcpyNode, kCopy, ReadDriverGraphMemcpyNode),
    DRV(cuGraphAddMemAllocNode, kAlloc, ReadGraphMemAllocNode),
    DRV(cuGraphAddMemFreeNode, kFree, ReadGraphMemFreeNode),
    DRV(cuGraphAddNode, kGraphNode, ReadGraphAddNodeDriver),
    DRV(cuGraphAddKernelNode, kGraphNode, ReadGraphKernelNode),
    DRV(cuGraphAddKernelNode_v2, kGraphNode, ReadGraphKernelNode),
    DRV(cuGraphAddNode_v2, kGraphNode, ReadGraphAddNodeDriver),
    DRV0(cuGraphInstantiate_v2, kInstantiate),
    DRV0(cuGraphInstantiateWithFlags, kInstantiate),
    DRV0(cuGraphInstantiateWithParams, kInstantiate),
    DRV0(cuGraphInstantiateWithParams_ptsz, kInstantiate),
    // Driver: launches.
    DRVL(cuLaunchKernel),
    DRVL(cuLaunchKernel_ptsz),
    DRVL(cuLaunchKernelEx),
    DRVL(cuLaunchKernelEx_ptsz),
    DRVL(cuLaunchCooperativeKernel),
    DRVL(cuLaunchCooperativeKernel_ptsz),
    DRV(cuGraphLaunch, kGraphLaunch, ReadGraphLaunch),
    DRV(cuGraphLaunch_ptsz, kGraphLaunch, ReadGraphLaunch),
    // Driver: where the host waits.
    DRV0(cuCtxSynchronize, kSync, SyncKind::kDevice),
    DRV0(cuCtxSynchronize_v2, kSync, SyncKind::kDevice),
    DRV0(cuStreamSynchronize, kSync, SyncKind::kStream),
    DRV0(cuStreamSynchronize_ptsz, kSync, SyncKind::kStream),
    DRV0(cuEventSynchronize, kSync, SyncKind::kEvent),
};
// clang-format on
}  // namespace calls_internal

namespace {

constexpr const auto& kRegistry = calls_internal::kRegistryEntries;

#undef RT
#undef RTA
#undef RT0
#undef DRV
#undef DRVA
#undef DRVK
#undef RTL
#undef DRVL
#undef DRV0

constexpr CUpti_CallbackId kResourceCallbacks[] = {
    CUPTI_CBID_RESOURCE_CONTEXT_CREATED,        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,      CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,      CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
};

// The registry's entries by callback id, per domain, as FindSpec reads them:
// 1 + the entry's index in kRegistry, 0 for an id gpuwatch does not handle.
// Built by the compiler: no initialisation at run time, no pointer to relocate.
template <size_t N>
constexpr std::array<uint16_t, N> IndexOf(CUpti_CallbackDomain domain) {
  std::array<uint16_t, N> index{};
  for (size_t i = 0; i < std::size(kRegistry); ++i) {
    if (kRegistry[i].domain == domain && kRegistry[i].cbid < N) {
      index[kRegistry[i].cbid] = static_cast<uint16_t>(i + 1);
    }
  }
  return index;
}
static_assert(std::size(kRegistry) < UINT16_MAX);

}  // namespace

namespace calls_internal {
constexpr std::array<uint16_t, kRuntimeIds> kRuntimeIndex =
    IndexOf<kRuntimeIds>(CUPTI_CB_DOMAIN_RUNTIME_API);
constexpr std::array<uint16_t, kDriverIds> kDriverIndex =
    IndexOf<kDriverIds>(CUPTI_CB_DOMAIN_DRIVER_API);
}  // namespace calls_internal

namespace {

struct ArrayShapes {
  Mutex mu;
  std::unordered_map<uint64_t, uint32_t> element_bytes;  // guarded by mu
};

ArrayShapes& Arrays() {
  static auto* arrays = [] {
    auto* made = new ArrayShapes();  // never destroyed, like every table of gpuwatch
    fork_locks::AddLeaf(&made->mu, "CUDA arrays' element sizes");
    return made;
  }();
  return *arrays;
}

}  // namespace

std::span<const CallbackSpec> CallbackRegistry() { return kRegistry; }

std::span<const CUpti_CallbackId> ResourceCallbacks() { return kResourceCallbacks; }

bool ParseCall(const CallbackSpec& spec, const CUpti_CallbackData* data, bool succeeded,
               ParsedCall* out) {
  // Copied from a constant: building a temporary first costs twice the
  // stores, on every call.
  static constexpr ParsedCall kEmpty{};
  *out = kEmpty;
  out->role = spec.role;
  out->sync = spec.sync;
  if (spec.parse == nullptr) return true;
  if (data->functionParams == nullptr) return false;
  return spec.parse(data, succeeded, out);
}

void RememberArray(uint64_t handle, uint32_t element_bytes) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  a.element_bytes[handle] = element_bytes;
}

void ForgetArray(uint64_t handle) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  a.element_bytes.erase(handle);
}

uint32_t ArrayElementBytes(uint64_t handle) {
  ArrayShapes& a = Arrays();
  std::lock_guard<Mutex> lock(a.mu);
  const auto it = a.element_bytes.find(handle);
  return it != a.element_bytes.end() ? it->second : 1;
}

bool EnableCallbacks(const CuptiApi& api, CUpti_SubscriberHandle subscriber, std::string* error) {
  const auto enable = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    const CUptiResult r = api.EnableCallback(1, subscriber, domain, cbid);
    if (r == CUPTI_SUCCESS) return true;
    const char* text = nullptr;
    api.GetResultString(r, &text);
    *error = "cuptiEnableCallback(domain " + std::to_string(domain) + ", id " +
             std::to_string(cbid) + ") failed: " + (text != nullptr ? text : "?");
    return false;
  };
  for (const CallbackSpec& s : kRegistry) {
    if (!enable(s.domain, s.cbid)) return false;
  }
  for (const CUpti_CallbackId cbid : kResourceCallbacks) {
    if (!enable(CUPTI_CB_DOMAIN_RESOURCE, cbid)) return false;
  }
  return true;
}

}  // namespace gpuwatch
