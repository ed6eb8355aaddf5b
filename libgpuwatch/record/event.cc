#include "libgpuwatch/record/event.h"

#include <iterator>

#include "libgpuwatch/base/enum_names.h"
#include "libgpuwatch/record/lifecycle.h"

namespace gpuwatch {

const char* MemKindName(MemKind kind) {
  static constexpr const char* kNames[] = {
      "device",          "pool",  "managed", "vmm",          "pinned_host",
      "registered_host", "array", "graph",   "vmm_imported", "ipc_imported"};
  static_assert(std::size(kNames) == static_cast<size_t>(kNumMemKinds));
  return EnumName(kind, kNames, "unknown");
}

const char* CopyKindName(CopyKind kind) {
  static constexpr const char* kNames[] = {"unknown", "h2d", "d2h", "d2d", "h2h", "peer"};
  static_assert(std::size(kNames) == static_cast<size_t>(kNumCopyKinds));
  return EnumName(kind, kNames, "unknown");
}

const char* SyncKindName(SyncKind kind) {
  static constexpr const char* kNames[] = {"device", "stream", "event", "copy"};
  static_assert(std::size(kNames) == static_cast<size_t>(kNumSyncKinds));
  return EnumName(kind, kNames, "unknown");
}

}  // namespace gpuwatch
