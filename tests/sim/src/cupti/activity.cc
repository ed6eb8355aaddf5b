// The fake CUPTI activity API.
//
// Records come from the driver on the thread that did the work. They are copied into the
// current client buffer (requested through the registered bufferRequested callback when
// needed). A full buffer is handed to bufferCompleted on the thread whose record did not fit;
// cuptiActivityFlushAll hands over everything buffered at the time of the call on the flushing
// thread. There is no background thread. No lock is held while a client callback runs.
#include <pthread.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/leaked.h"
#include "cupti/internal.h"

namespace gwsim::cupti {
namespace {

static_assert(sizeof(CUpti_ActivityMemcpy6) % 8 == 0, "records must keep 8-byte alignment");
static_assert(sizeof(CUpti_ActivityMemcpyPtoP4) % 8 == 0, "records must keep 8-byte alignment");
static_assert(sizeof(CUpti_ActivityMemory4) % 8 == 0, "records must keep 8-byte alignment");
static_assert(sizeof(CUpti_ActivityKernel10) % 8 == 0, "records must keep 8-byte alignment");
static_assert(sizeof(CUpti_ActivityAPI) % 8 == 0, "records must keep 8-byte alignment");
static_assert(sizeof(CUpti_ActivityExternalCorrelation) % 8 == 0,
              "records must keep 8-byte alignment");

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t max_records = 0;  // 0: as many as fit
  size_t records = 0;

  bool Fits(size_t n) const {
    return data != nullptr && used + n <= size && (max_records == 0 || records < max_records);
  }
};

// Leaked singleton: records may arrive while the process exits.
struct ActivityState {
  std::atomic<uint8_t> enabled[CUPTI_ACTIVITY_KIND_COUNT];  // zeroed (C++20)
  std::mutex mu;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;  // guarded by mu
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  Buffer current;
  std::vector<Buffer> spares;
  size_t dropped = 0;
  std::unordered_map<int, size_t> attributes;
  std::atomic<CUpti_TimestampCallbackFunc> timestamp{nullptr};  // the client's clock, if any
};
ActivityState& A() { return Leaked<ActivityState>(); }

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    default:
      return 0;
  }
}

void Complete(CUpti_BuffersCallbackCompleteFunc completed, const Buffer& b) {
  // Deprecated arguments: the context is always NULL and the stream id 0 (global buffers).
  completed(nullptr, 0, b.data, b.size, b.used);
}

Buffer Request(CUpti_BuffersCallbackRequestFunc requested) {
  Buffer b;
  requested(&b.data, &b.size, &b.max_records);
  return b;
}

// Per-thread stacks of cuptiActivityPushExternalCorrelationId (freed with the thread; kept
// trivially destructible for the exiting thread, whose exit handlers may still use them).
using IdStacks = std::unordered_map<int, std::vector<uint64_t>>;
thread_local IdStacks* t_ids = nullptr;

void FreeIds(void* ids) {
  t_ids = nullptr;
  delete static_cast<IdStacks*>(ids);
}

std::vector<uint64_t>& ExternalIds(CUpti_ExternalCorrelationKind kind) {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, FreeIds);
    return k;
  }();
  if (t_ids == nullptr) {
    t_ids = new IdStacks();
    pthread_setspecific(key, t_ids);
  }
  return (*t_ids)[static_cast<int>(kind)];
}

bool ValidKind(CUpti_ActivityKind kind) {
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

CUptiResult SetEnabled(CUpti_ActivityKind kind, bool on) {
  if (!ValidKind(kind)) return CUPTI_ERROR_INVALID_KIND;
  if (!Link().present) return CUPTI_ERROR_UNKNOWN;  // no driver to take records from
  A().enabled[kind].store(on ? 1 : 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

}  // namespace

int ActivityKindEnabled(CUpti_ActivityKind kind) {
  return ValidKind(kind) && A().enabled[kind].load(std::memory_order_relaxed) != 0 ? 1 : 0;
}

void ActivityExternalCorrelation(uint32_t correlation_id) {
  if (!ActivityKindEnabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) || t_ids == nullptr) return;
  for (const auto& [kind, ids] : *t_ids) {
    if (ids.empty()) continue;
    CUpti_ActivityExternalCorrelation r{};
    r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    r.externalKind = static_cast<CUpti_ExternalCorrelationKind>(kind);
    r.externalId = ids.back();
    r.correlationId = correlation_id;
    ActivityRecord(reinterpret_cast<const CUpti_Activity*>(&r), sizeof(r));
  }
}

void ActivityDisableAll() {
  for (auto& flag : A().enabled) flag.store(0, std::memory_order_relaxed);
}

namespace {

// Moves a timestamp from the simulated clock onto the client's (delta: the client's now minus
// the simulated now); CUPTI_TIMESTAMP_UNKNOWN and 0 (not collected) stay.
void Shift(uint64_t* ts, uint64_t delta) {
  if (*ts != 0 && *ts != CUPTI_TIMESTAMP_UNKNOWN) *ts += delta;
}

// With cuptiActivityRegisterTimestampCallback, a record's times are the client's clock: each
// record is made as its work completes on the simulated clock, so it is moved by the
// difference of the two clocks now (durations and order on the simulated clock are kept).
void ToClientClock(CUpti_Activity* record, uint64_t delta) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* r = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
      Shift(&r->start, delta);
      Shift(&r->end, delta);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      auto* r = reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(record);
      Shift(&r->start, delta);
      Shift(&r->end, delta);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      Shift(&reinterpret_cast<CUpti_ActivityMemory4*>(record)->timestamp, delta);
      break;
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* r = reinterpret_cast<CUpti_ActivityKernel10*>(record);
      for (uint64_t* ts : {&r->start, &r->end, &r->completed, &r->queued, &r->submitted}) {
        Shift(ts, delta);
      }
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto* r = reinterpret_cast<CUpti_ActivityAPI*>(record);
      Shift(&r->start, delta);
      Shift(&r->end, delta);
      break;
    }
    default:
      break;
  }
}

}  // namespace

void ActivityRecord(const CUpti_Activity* record, size_t size) {
  if (!ActivityKindEnabled(record->kind) || size != RecordSize(record->kind)) return;
  ActivityState& a = A();
  alignas(8) uint8_t moved[sizeof(CUpti_ActivityKernel10)];
  if (CUpti_TimestampCallbackFunc clock = a.timestamp.load(std::memory_order_acquire);
      clock != nullptr && size <= sizeof(moved) && Link().now_ns != nullptr) {
    std::memcpy(moved, record, size);
    ToClientClock(reinterpret_cast<CUpti_Activity*>(moved), clock() - Link().now_ns());
    record = reinterpret_cast<const CUpti_Activity*>(moved);
  }
  for (;;) {
    std::unique_lock lock(a.mu);
    if (a.current.Fits(size)) {
      std::memcpy(a.current.data + a.current.used, record, size);
      a.current.used += size;
      ++a.current.records;
      return;
    }
    if (a.requested == nullptr || a.completed == nullptr) {
      ++a.dropped;
      return;
    }
    const CUpti_BuffersCallbackRequestFunc requested = a.requested;
    const CUpti_BuffersCallbackCompleteFunc completed = a.completed;
    const Buffer full = a.current;
    a.current = Buffer{};
    if (!a.spares.empty()) {
      a.current = a.spares.back();
      a.spares.pop_back();
    }
    const bool have_next = a.current.data != nullptr;
    lock.unlock();
    if (full.data != nullptr) Complete(completed, full);
    if (have_next) continue;
    Buffer fresh = Request(requested);
    if (fresh.data == nullptr || fresh.size < size) {
      if (fresh.data != nullptr) Complete(completed, fresh);  // unusable: give it back empty
      lock.lock();
      ++a.dropped;
      return;
    }
    lock.lock();
    if (a.current.data == nullptr) {
      a.current = fresh;
    } else {
      a.spares.push_back(fresh);  // another thread installed one meanwhile
    }
  }
}

}  // namespace gwsim::cupti

using namespace gwsim::cupti;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  return SetEnabled(kind, true);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  return SetEnabled(kind, false);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext context,
                                                             CUpti_ActivityKind kind) {
  return SetEnabled(kind, true);  // per-context enabling is not simulated: enables globally
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context,
                                                              CUpti_ActivityKind kind) {
  return SetEnabled(kind, false);
}

GWSIM_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  (void)Link();
  ActivityState& a = A();
  std::lock_guard lock(a.mu);
  a.requested = funcBufferRequested;
  a.completed = funcBufferCompleted;
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  // Simulated records are complete when they are made, so a forced and a plain flush deliver
  // the same.
  (void)flag;
  ActivityState& a = A();
  std::vector<Buffer> out;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  {
    std::lock_guard lock(a.mu);
    if (a.completed == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
    completed = a.completed;
    if (a.current.data != nullptr) out.push_back(a.current);
    a.current = Buffer{};
    out.insert(out.end(), a.spares.begin(), a.spares.end());
    a.spares.clear();
  }
  for (const Buffer& b : out) Complete(completed, b);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext context, uint32_t streamId,
                                                     uint32_t flag) {
  return cuptiActivityFlushAll(flag);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer,
                                                             size_t validBufferSizeBytes,
                                                             CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  uint8_t* next = buffer;
  if (*record != nullptr) {
    const size_t size = RecordSize((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    next = reinterpret_cast<uint8_t*>(*record) + size;
  }
  if (next >= buffer + validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, next, sizeof(kind));
  const size_t size = RecordSize(kind);
  if (size == 0 || next + size > buffer + validBufferSizeBytes) return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context,
                                                                    uint32_t streamId,
                                                                    size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  ActivityState& a = A();
  std::lock_guard lock(a.mu);
  *dropped = a.dropped;
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr,
                                                            size_t* valueSize, void* value) {
  if (valueSize == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t v = 0;
  std::memcpy(&v, value, *valueSize < sizeof(v) ? *valueSize : sizeof(v));
  ActivityState& a = A();
  std::lock_guard lock(a.mu);
  a.attributes[static_cast<int>(attr)] = v;  // accepted and remembered; nothing else changes
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr,
                                                            size_t* valueSize, void* value) {
  if (valueSize == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  ActivityState& a = A();
  size_t v = attr == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE ? (8u << 20) : 0;
  {
    std::lock_guard lock(a.mu);
    auto it = a.attributes.find(static_cast<int>(attr));
    if (it != a.attributes.end()) v = it->second;
  }
  const size_t n = *valueSize < sizeof(v) ? *valueSize : sizeof(v);
  std::memcpy(value, &v, n);
  *valueSize = n;
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  ExternalIds(kind).push_back(id);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* lastId) {
  auto& ids = ExternalIds(kind);
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

// Accepted and without effect in the simulator.

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time) { return CUPTI_SUCCESS; }

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableLaunchAttributes(uint8_t enable) {
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid,
                                                               uint8_t enable) {
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid,
                                                                uint8_t enable) {
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableAllocationSource(uint8_t enable) {
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  return CUPTI_SUCCESS;
}

// Accepted, with no effect: the simulator makes no CUDA_EVENT records (PyTorch's Kineto links
// these two).
GWSIM_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable) {
  return CUPTI_SUCCESS;
}

// From now on the records' times are the callback's clock (ToClientClock), as CUPTI documents.
GWSIM_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  if (funcTimestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  A().timestamp.store(funcTimestamp, std::memory_order_release);
  return CUPTI_SUCCESS;
}
