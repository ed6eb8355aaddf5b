#include "libgpuwatch/record/event.h"
#include "libgpuwatch/record/lifecycle.h"

namespace gpuwatch {

const char* MemKindName(MemKind kind) {
  switch (kind) {
    case MemKind::kDevice:
      return "device";
    case MemKind::kPool:
      return "pool";
    case MemKind::kManaged:
      return "managed";
    case MemKind::kVmm:
      return "vmm";
    case MemKind::kPinnedHost:
      return "pinned_host";
    case MemKind::kRegisteredHost:
      return "registered_host";
    case MemKind::kArray:
      return "array";
    case MemKind::kGraph:
      return "graph";
  }
  return "unknown";
}

const char* CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kUnknown:
      return "unknown";
    case CopyKind::kHostToDevice:
      return "h2d";
    case CopyKind::kDeviceToHost:
      return "d2h";
    case CopyKind::kDeviceToDevice:
      return "d2d";
    case CopyKind::kHostToHost:
      return "h2h";
    case CopyKind::kPeer:
      return "peer";
  }
  return "unknown";
}

const char* SyncKindName(SyncKind kind) {
  switch (kind) {
    case SyncKind::kDevice:
      return "device";
    case SyncKind::kStream:
      return "stream";
    case SyncKind::kEvent:
      return "event";
    case SyncKind::kCopy:
      return "copy";
  }
  return "unknown";
}

}  // namespace gpuwatch
