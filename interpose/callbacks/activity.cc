#include "interpose/callbacks/activity.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <initializer_list>

#include "interpose/callbacks/current_session.h"
#include "interpose/callbacks/guard.h"
#include "interpose/cupti/cupti_mux.h"
#include "libgpuwatch/session/session.h"

namespace gpuwatch {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI's requirement

// Set once the activity API's record layouts are known good (EnableActivity).
decltype(&cuptiActivityGetNextRecord) g_next_record = nullptr;

// A table from CUPTI's kinds (small integers) to gpuwatch's: each Map() says
// which of CUPTI's kinds are one of ours; the rest are To{} (unknown).
template <typename To, size_t N>
struct KindTable {
  std::array<To, N> to{};
  constexpr KindTable Map(std::initializer_list<int> from, To kind) const {
    KindTable t = *this;
    for (const int f : from) t.to[static_cast<size_t>(f)] = kind;
    return t;
  }
  constexpr To operator()(uint8_t kind) const { return kind < N ? to[kind] : To{}; }
};

// Arrays are device memory; copies between device and array memory are d2d.
constexpr auto FromActivityCopyKind =
    KindTable<CopyKind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP + 1>{}
        .Map({CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMCPY_KIND_HTOA},
             CopyKind::kHostToDevice)
        .Map({CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMCPY_KIND_ATOH},
             CopyKind::kDeviceToHost)
        .Map({CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMCPY_KIND_ATOA,
              CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOA},
             CopyKind::kDeviceToDevice)
        .Map({CUPTI_ACTIVITY_MEMCPY_KIND_HTOH}, CopyKind::kHostToHost)
        .Map({CUPTI_ACTIVITY_MEMCPY_KIND_PTOP}, CopyKind::kPeer);
static_assert(CopyKind{} == CopyKind::kUnknown);

constexpr auto FromMemoryKind =
    KindTable<HostKind, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC + 1>{}
        .Map({CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE}, HostKind::kPageable)
        .Map({CUPTI_ACTIVITY_MEMORY_KIND_PINNED}, HostKind::kPinned)
        .Map({CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC},
             HostKind::kManaged)
        .Map({CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
              CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC},
             HostKind::kDevice);
static_assert(HostKind{} == HostKind::kUnknown);
static_assert(FromMemoryKind(CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN) == HostKind::kUnknown);

// The host side of a copy: the source of H2D, the destination of D2H.
HostKind HostSide(CopyKind kind, uint8_t src, uint8_t dst) {
  switch (kind) {
    case CopyKind::kHostToDevice:
    case CopyKind::kHostToHost:
      return FromMemoryKind(src);
    case CopyKind::kDeviceToHost:
      return FromMemoryKind(dst);
    case CopyKind::kDeviceToDevice:
    case CopyKind::kPeer:
      return HostKind::kDevice;
    default:
      return HostKind::kUnknown;
  }
}

template <typename R>
CopyRecord MakeRecord(const R& r) {
  CopyRecord c;
  c.correlation = r.correlationId;
  c.bytes = r.bytes;
  c.kind = FromActivityCopyKind(r.copyKind);
  c.host = HostSide(c.kind, r.srcKind, r.dstKind);
  c.async = (r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
  c.start_ns = r.start;
  c.end_ns = r.end;
  c.graph_node = r.graphNodeId;
  return c;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const ScopedInsideGpuwatch inside;  // takes the tables' locks (guard.h)
  CUpti_Activity* record = nullptr;
  // The recording is taken per buffer, so that a fork child's records go to its own.
  Session* session = CurrentSession();
  if (session == nullptr) return;
  ActivityEvents events = session->events().ActivityBuffer();
  while (g_next_record != nullptr && g_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    // Kinds another CUPTI client enabled share the buffer (cupti_mux.h).
    if (!mux::SelfWantsKind(record->kind)) continue;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        CopyRecord c = MakeRecord(*r);
        c.runtime_correlation = r->runtimeCorrelationId;
        events.CopyRecorded(c, r->start, r->end, static_cast<int>(r->deviceId), r->streamId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
        const CopyRecord c = MakeRecord(*r);
        events.CopyRecorded(c, r->start, r->end, static_cast<int>(r->deviceId), r->streamId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* r = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        events.KernelRecorded(r->name, r->start, r->end, static_cast<int>(r->deviceId),
                              r->streamId);
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);  // NOLINT(cppcoreguidelines-no-malloc): paired with aligned_alloc
}

}  // namespace

bool KnownActivityLayout(uint32_t cupti_version) {
  return cupti_version >= kFirstKnownCuptiVersion && cupti_version <= kLastKnownCuptiVersion;
}

bool EnableActivity(const CuptiApi& api, bool kernel_timing, std::string* error) {
  if (api.ActivityRegisterCallbacks == nullptr || api.ActivityEnable == nullptr ||
      api.ActivityFlushAll == nullptr || api.ActivityGetNextRecord == nullptr) {
    *error = "this CUPTI has no activity API";
    return false;
  }
  // Records are read through CUPTI's struct layouts, which change between
  // versions: only those gpuwatch was built and checked against are read.
  uint32_t version = 0;
  if (api.GetVersion == nullptr || api.GetVersion(&version) != CUPTI_SUCCESS) {
    *error =
        "this CUPTI does not say its version, so the layout of its activity records is unknown";
    return false;
  }
  if (!KnownActivityLayout(version)) {
    *error = "CUPTI API version " + std::to_string(version) +
             " has activity record layouts gpuwatch does not know (it reads those of versions " +
             std::to_string(kFirstKnownCuptiVersion) + " to " +
             std::to_string(kLastKnownCuptiVersion) + ", CUDA 13.0)";
    return false;
  }
  g_next_record = api.ActivityGetNextRecord;
  CUptiResult r = api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  // Not MEMCPY2: its peer-copy records carry no runtimeCorrelationId, so when
  // the runtime's driver calls are not reported (and have ids of their own)
  // they could never join their cudaMemcpyPeer. Without it CUPTI reports peer
  // copies as MEMCPY records of kind PTOP, which do (tests/gpu/run.sh asks a
  // real driver). A record handled below either way.
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  for (const CUpti_ActivityKind kind : kinds) {
    if (r != CUPTI_SUCCESS) break;
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && !kernel_timing) continue;
    r = api.ActivityEnable(kind);
  }
  if (r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    api.GetResultString(r, &text);
    *error = std::string("CUPTI activity: ") + (text != nullptr ? text : "?");
    return false;
  }
  return true;
}

void FlushActivity(const CuptiApi& api) {
  if (api.ActivityFlushAll != nullptr && g_next_record != nullptr) {
    api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

}  // namespace gpuwatch
