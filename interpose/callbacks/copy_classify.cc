// ClassifyCopy (callback_state.h): a copy's direction and host memory, from
// gpuwatch's own tables where the call did not say them.
#include "interpose/callbacks/callback_state.h"
#include "libgpuwatch/session/session.h"

namespace gpuwatch::switchboard {

namespace {

// The host side of a copy, as gpuwatch's own table of pinned and registered
// memory sees it: pinned, else pageable (managed memory on the host side
// reads as pageable here; an activity record says better).
HostKind HostOf(uint64_t address) {
  MemKind kind = MemKind::kDevice;
  return CurrentEvents().ClassifyHost(address, &kind) ? HostKind::kPinned : HostKind::kPageable;
}

}  // namespace

// Resolves what the call did not say (cudaMemcpyDefault, cuMemcpy, unified
// memory) and the host memory kind, from gpuwatch's own tables: an activity
// record, when one joins the call, says it better.
void ClassifyCopy(const ParsedCall& parsed, CopyCall* call) {
  if (call->kind == CopyKind::kUnknown && parsed.src != 0 && parsed.dst != 0) {
    MemKind src = MemKind::kDevice;
    MemKind dst = MemKind::kDevice;
    int src_device_id = -1;
    int dst_device_id = -1;
    const Events events = CurrentEvents();
    const bool src_known = events.Classify(parsed.src, &src, &src_device_id);
    const bool dst_known = events.Classify(parsed.dst, &dst, &dst_device_id);
    if (src_known && dst_known) {
      const bool src_device = !IsHostKind(src);
      const bool dst_device = !IsHostKind(dst);
      if (src_device && dst_device) {
        call->kind = src_device_id == dst_device_id ? CopyKind::kDeviceToDevice : CopyKind::kPeer;
      } else {
        call->kind = src_device ? CopyKind::kDeviceToHost
                                : (dst_device ? CopyKind::kHostToDevice : CopyKind::kHostToHost);
      }
    }
  }
  switch (call->kind) {
    case CopyKind::kHostToDevice:
    case CopyKind::kHostToHost:
      call->host = parsed.src != 0 ? HostOf(parsed.src) : HostKind::kUnknown;
      break;
    case CopyKind::kDeviceToHost:
      call->host = parsed.dst != 0 ? HostOf(parsed.dst) : HostKind::kUnknown;
      break;
    case CopyKind::kDeviceToDevice:
    case CopyKind::kPeer:
      call->host = HostKind::kDevice;
      break;
    default:
      call->host = HostKind::kUnknown;
      break;
  }
}

}  // namespace gpuwatch::switchboard
