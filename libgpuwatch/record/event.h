// The event model shared by the interposition layer and the core.
//
// Plain structs, no CUDA types: interpose/ translates CUPTI callback data into
// these, and everything in libgpuwatch/ works on them alone.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_EVENT_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_EVENT_H_

#include <cstdint>

namespace gpuwatch {

// What kind of memory an allocation is. The device kinds add up to "device
// bytes"; the host kinds are pinned host memory and never count as device;
// imported memory (VMM handles, CUDA IPC) is another process's and counts as
// neither.
enum class MemKind : uint8_t {
  kDevice = 0,      // cudaMalloc, cuMemAlloc, pitched and 3D allocations
  kPool,            // stream-ordered: cudaMallocAsync, cuMemAllocFromPoolAsync, ...
  kManaged,         // cudaMallocManaged, cuMemAllocManaged
  kVmm,             // a cuMemCreate handle's memory (PyTorch expandable segments)
  kPinnedHost,      // cudaMallocHost, cudaHostAlloc, cuMemAllocHost, cuMemHostAlloc
  kRegisteredHost,  // cudaHostRegister, cuMemHostRegister
  kArray,           // CUDA arrays: cudaMallocArray, cudaMalloc3DArray, cuArrayCreate, ...
  kGraph,           // graph memory nodes, allocated when their graph is launched
  kVmmImported,     // cuMemImportFromShareableHandle: another process's VMM memory
  kIpcImported,     // cuIpcOpenMemHandle: another process's cudaMalloc memory, mapped here
};
inline constexpr int kNumMemKinds = 10;

constexpr bool IsHostKind(MemKind kind) {
  return kind == MemKind::kPinnedHost || kind == MemKind::kRegisteredHost;
}
constexpr bool IsImportedKind(MemKind kind) {
  return kind == MemKind::kVmmImported || kind == MemKind::kIpcImported;
}
constexpr bool IsDeviceKind(MemKind kind) { return !IsHostKind(kind) && !IsImportedKind(kind); }

// Masks of memory kinds, a bit per MemKind: the device kinds, the host kinds,
// the imported kinds.
template <bool (*Is)(MemKind)>
constexpr uint32_t KindMask() {
  uint32_t mask = 0;
  for (int k = 0; k < kNumMemKinds; ++k) {
    if (Is(static_cast<MemKind>(k))) mask |= 1u << k;
  }
  return mask;
}
// The kinds whose every allocation and free is a call into the driver that
// takes memory from the device or the system (not stream-ordered pools, graph
// memory, VMM handles or another process's): allocating them again and again
// is churn (Tracker::OnFreeDone).
constexpr bool IsChurnKind(MemKind kind) {
  return kind == MemKind::kDevice || kind == MemKind::kManaged || kind == MemKind::kPinnedHost ||
         kind == MemKind::kRegisteredHost || kind == MemKind::kArray;
}
inline constexpr uint32_t kDeviceKinds = KindMask<IsDeviceKind>();
inline constexpr uint32_t kHostKinds = KindMask<IsHostKind>();
inline constexpr uint32_t kImportedKinds = KindMask<IsImportedKind>();

// Stable names used in reports (docs/report-format.md).
const char* MemKindName(MemKind kind);

// Direction of a copy.
enum class CopyKind : uint8_t {
  kUnknown = 0,
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,
  kHostToHost,
  kPeer,
};
inline constexpr int kNumCopyKinds = 6;
const char* CopyKindName(CopyKind kind);

// An allocation as the core sees it.
struct AllocEvent {
  uint64_t address = 0;
  uint64_t size = 0;
  MemKind kind = MemKind::kDevice;
  int32_t device = 0;
  uint64_t stream = 0;
  uint32_t stack_id = 0;    // 0: no stack captured
  uint32_t phase = 0;       // the path of ranges open on its thread (phases.h); 0: none
  uint64_t call_ticks = 0;  // Ticks() (base/clock.h) spent in the call; 0: not timed
};

// A host<->device copy as seen at the API call.
struct CopyEvent {
  uint64_t bytes = 0;
  CopyKind kind = CopyKind::kUnknown;
  bool async = false;
  uint32_t phase = 0;  // as AllocEvent's
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_EVENT_H_
