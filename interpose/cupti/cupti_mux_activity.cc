// The activity half of the CUPTI multiplexer (cupti_mux.h): one real pair of
// buffer callbacks, gpuwatch's records, and the other clients' records copied
// into the buffers they hand out.
//
// A client buffer starts with kMagic; each record in it is preceded by an
// 8-byte header holding the record's length (a multiple of 8), so that
// ClientActivityGetNextRecord reads it whatever the record's kind. The record
// itself is CUPTI's bytes, unchanged.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "interpose/cupti/cupti_mux.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch::mux {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr size_t kBufferAlign = 8;                  // CUPTI's requirement
constexpr uint64_t kMagic = 0x31786d6877706721ull;  // "!gpwhmx1"
constexpr size_t kHeader = 8;

// Activity kinds, one bit each.
struct KindSet {
  std::atomic<uint64_t> words[4] = {};
  static_assert(CUPTI_ACTIVITY_KIND_COUNT <= 256, "activity kinds exceed the kind set");

  bool Get(uint32_t kind) const {
    return kind < 256 && (words[kind / 64].load(std::memory_order_relaxed) >> (kind % 64) & 1) != 0;
  }
  void Set(uint32_t kind, bool on) {
    const uint64_t bit = uint64_t{1} << (kind % 64);
    if (on) {
      words[kind / 64].fetch_or(bit, std::memory_order_relaxed);
    } else {
      words[kind / 64].fetch_and(~bit, std::memory_order_relaxed);
    }
  }
  bool Any() const {
    for (const auto& w : words) {
      if (w.load(std::memory_order_relaxed) != 0) return true;
    }
    return false;
  }
};

// The buffer a client's request callback handed out, being filled.
struct ClientBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t max_records = 0;  // 0: as many as fit
  size_t records = 0;
};

struct Attribute {
  bool set = false;
  size_t size = 0;
  uint64_t value = 0;
};

struct ActivityState {
  Mutex mu;                                    // registration and enabling
  std::atomic<const CuptiApi*> real{nullptr};  // set once (Ready)
  std::atomic<bool> registered{false};         // the real buffer callbacks; set under mu
  const CuptiApi* api() const { return real.load(std::memory_order_acquire); }
  std::atomic<CUpti_BuffersCallbackRequestFunc> self_request{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> self_complete{nullptr};
  KindSet self;
  KindSet clients;
  // Routing into the clients' buffers. Timed, so that a client that never
  // returns from a buffer callback costs its own records, not a hung exit
  // report. Recursive: CUPTI runs completion callbacks on the flushing
  // thread, and a client may flush from inside its own callback.
  std::recursive_timed_mutex route_mu;
  CUpti_BuffersCallbackRequestFunc request = nullptr;  // guarded by route_mu
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  ClientBuffer current;
  std::atomic<size_t> dropped{0};
  Attribute attributes[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS + 1];
};

ActivityState& A() {
  static ActivityState* const state = new ActivityState();  // never destroyed
  return *state;
}

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Hands the filled client buffer to the client. Under route_mu.
void DeliverCurrent(ActivityState& a) {
  ClientBuffer b = a.current;
  a.current = ClientBuffer{};
  if (b.data == nullptr) return;
  if (b.records == 0) b.used = 0;
  if (a.complete != nullptr) a.complete(nullptr, 0, b.data, b.size, b.used);
}

// Copies one record of `len` bytes into the client's buffer, asking it for a
// new one when it is full. Under route_mu.
void Append(ActivityState& a, const uint8_t* record, size_t len) {
  const size_t need = kHeader + Align8(len);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ClientBuffer& b = a.current;
    if (b.data != nullptr && b.used + need <= b.size &&
        (b.max_records == 0 || b.records < b.max_records)) {
      const auto length = static_cast<uint32_t>(Align8(len));
      std::memcpy(b.data + b.used, &length, sizeof(length));
      std::memset(b.data + b.used + sizeof(length), 0, kHeader - sizeof(length));
      std::memcpy(b.data + b.used + kHeader, record, len);
      std::memset(b.data + b.used + kHeader + len, 0, Align8(len) - len);
      b.used += need;
      ++b.records;
      return;
    }
    if (b.data != nullptr) DeliverCurrent(a);
    if (a.request == nullptr) break;
    ClientBuffer fresh;
    a.request(&fresh.data, &fresh.size, &fresh.max_records);
    if (fresh.data == nullptr || fresh.size < kHeader + need) {
      // Too small for even this record: given back empty, the record dropped.
      if (fresh.data != nullptr && a.complete != nullptr) {
        a.complete(nullptr, 0, fresh.data, fresh.size, 0);
      }
      break;
    }
    std::memcpy(fresh.data, &kMagic, sizeof(kMagic));
    fresh.used = kHeader;
    a.current = fresh;
  }
  a.dropped.fetch_add(1, std::memory_order_relaxed);
}

// Copies the records of the clients' kinds out of one of CUPTI's buffers and
// hands them over, as CUPTI would have handed its own buffer.
void RouteToClients(ActivityState& a, uint8_t* buffer, size_t valid) {
  std::unique_lock<std::recursive_timed_mutex> lock(a.route_mu, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(2))) {
    a.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (a.complete == nullptr) return;
  CUpti_Activity* record = nullptr;
  if (a.api()->ActivityGetNextRecord(buffer, valid, &record) != CUPTI_SUCCESS) return;
  while (record != nullptr) {
    CUpti_Activity* next = record;
    const bool more = a.api()->ActivityGetNextRecord(buffer, valid, &next) == CUPTI_SUCCESS;
    const auto* begin = reinterpret_cast<const uint8_t*>(record);
    const uint8_t* end = more ? reinterpret_cast<const uint8_t*>(next) : buffer + valid;
    if (a.clients.Get(record->kind) && end > begin) {
      Append(a, begin, static_cast<size_t>(end - begin));
    }
    record = more ? next : nullptr;
  }
  if (a.current.records != 0) DeliverCurrent(a);
}

void CUPTIAPI MuxRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (auto request = A().self_request.load(std::memory_order_acquire); request != nullptr) {
    request(buffer, size, max_records);
    return;
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI MuxComplete(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                          size_t valid) {
  ActivityState& a = A();
  if (buffer == nullptr) return;
  if (valid != 0 && a.clients.Any()) RouteToClients(a, buffer, valid);
  if (auto complete = a.self_complete.load(std::memory_order_acquire); complete != nullptr) {
    complete(context, stream, buffer, size, valid);  // gpuwatch's frees the buffer
  } else {
    std::free(buffer);  // NOLINT(cppcoreguidelines-no-malloc): MuxRequest's or gpuwatch's
  }
}

// The real buffer callbacks, registered once. Under mu.
CUptiResult RegisterReal(ActivityState& a) {
  if (a.registered) return CUPTI_SUCCESS;
  const CUptiResult r = a.api()->ActivityRegisterCallbacks(MuxRequest, MuxComplete);
  a.registered.store(r == CUPTI_SUCCESS);
  return r;
}

// Turns one kind on or off in CUPTI as the views want it. Under mu.
CUptiResult SyncKind(ActivityState& a, CUpti_ActivityKind kind, bool was_on) {
  const bool want = a.self.Get(kind) || a.clients.Get(kind);
  if (want == was_on) return CUPTI_SUCCESS;
  if (want) return a.api()->ActivityEnable(kind);
  return a.api()->ActivityDisable != nullptr ? a.api()->ActivityDisable(kind) : CUPTI_SUCCESS;
}

ActivityState* Ready() {
  ActivityState& a = A();
  if (a.api() == nullptr) a.real.store(RealForClients(), std::memory_order_release);
  if (a.api() == nullptr || a.api()->ActivityRegisterCallbacks == nullptr ||
      a.api()->ActivityEnable == nullptr || a.api()->ActivityGetNextRecord == nullptr ||
      a.api()->ActivityFlushAll == nullptr) {
    return nullptr;
  }
  return &a;
}

bool SizeAttribute(CUpti_ActivityAttribute attribute) {
  switch (attribute) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace internal {

void FlushReal(uint32_t flag) {
  ActivityState* a = Ready();
  if (a != nullptr && a->registered) a->api()->ActivityFlushAll(flag);
}

CUptiResult CUPTIAPI SelfActivityRegister(CUpti_BuffersCallbackRequestFunc request,
                                          CUpti_BuffersCallbackCompleteFunc complete) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  std::lock_guard<Mutex> lock(a->mu);
  a->self_request.store(request, std::memory_order_release);
  a->self_complete.store(complete, std::memory_order_release);
  return RegisterReal(*a);
}

CUptiResult CUPTIAPI SelfActivityEnable(CUpti_ActivityKind kind) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
    return CUPTI_ERROR_INVALID_KIND;
  }
  std::lock_guard<Mutex> lock(a->mu);
  const bool was_on = a->self.Get(kind) || a->clients.Get(kind);
  a->self.Set(kind, true);
  const CUptiResult r = SyncKind(*a, kind, was_on);
  if (r != CUPTI_SUCCESS) a->self.Set(kind, false);
  return r;
}

void FinalizeClientActivity() {
  ActivityState* a = Ready();
  if (a == nullptr) return;
  if (a->clients.Any()) FlushReal(0);  // what they recorded is theirs
  {
    std::lock_guard<Mutex> lock(a->mu);
    for (uint32_t kind = 1; kind < CUPTI_ACTIVITY_KIND_COUNT; ++kind) {
      if (!a->clients.Get(kind)) continue;
      a->clients.Set(kind, false);
      SyncKind(*a, static_cast<CUpti_ActivityKind>(kind), true);
    }
  }
  std::lock_guard<std::recursive_timed_mutex> lock(a->route_mu);
  DeliverCurrent(*a);
  a->request = nullptr;
  a->complete = nullptr;
  for (Attribute& attribute : a->attributes) attribute = Attribute{};
}

// The routing lock is not taken: a client's buffer callback may block for
// long, and in the child a routing lock left held costs that client its
// records after a bounded wait (RouteToClients), nothing more.
void LockActivityForFork() { A().mu.lock(); }
void UnlockActivityAfterFork() { A().mu.unlock(); }

}  // namespace internal

bool SelfWantsKind(uint32_t kind) { return A().self.Get(kind); }

CUptiResult ClientActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                            CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  {
    std::lock_guard<Mutex> lock(a->mu);
    if (const CUptiResult r = RegisterReal(*a); r != CUPTI_SUCCESS) return r;
  }
  std::lock_guard<std::recursive_timed_mutex> lock(a->route_mu);
  DeliverCurrent(*a);  // to the pair that asked for it
  a->request = request;
  a->complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult ClientActivityEnable(CUpti_ActivityKind kind, bool enable) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
    return CUPTI_ERROR_INVALID_KIND;
  }
  if (a->clients.Get(kind) == enable) return CUPTI_SUCCESS;
  const bool was_on = a->self.Get(kind) || a->clients.Get(kind);
  // Records made before the change belong to the views as they were: when
  // enabling a kind gpuwatch already records, the older ones are not the
  // client's; when disabling, the ones made so far still are.
  if (was_on) internal::FlushReal(0);
  std::lock_guard<Mutex> lock(a->mu);
  a->clients.Set(kind, enable);
  const CUptiResult r = SyncKind(*a, kind, was_on);
  if (r != CUPTI_SUCCESS) a->clients.Set(kind, !enable);
  return r;
}

CUptiResult ClientActivityFlushAll(uint32_t flag) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return a->registered ? a->api()->ActivityFlushAll(flag) : CUPTI_SUCCESS;
}

CUptiResult ClientActivityGetNextRecord(uint8_t* buffer, size_t valid_size,
                                        CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t magic = 0;
  if (valid_size >= kHeader) std::memcpy(&magic, buffer, sizeof(magic));
  if (magic != kMagic) {  // one of CUPTI's own buffers
    ActivityState* a = Ready();
    return a != nullptr ? a->api()->ActivityGetNextRecord(buffer, valid_size, record)
                        : CUPTI_ERROR_NOT_INITIALIZED;
  }
  const uint8_t* next = buffer + kHeader;
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<const uint8_t*>(*record);
    if (current < buffer + 2 * kHeader || current > buffer + valid_size) {
      return CUPTI_ERROR_INVALID_PARAMETER;
    }
    uint32_t length = 0;
    std::memcpy(&length, current - kHeader, sizeof(length));
    next = current + length;
  }
  if (next + kHeader >= buffer + valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(const_cast<uint8_t*>(next + kHeader));
  return CUPTI_SUCCESS;
}

CUptiResult ClientActivityGetNumDroppedRecords(CUcontext context, uint32_t stream_id,
                                               size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  ActivityState* a = Ready();
  *dropped = 0;
  if (a != nullptr && a->api()->ActivityGetNumDroppedRecords != nullptr) {
    a->api()->ActivityGetNumDroppedRecords(context, stream_id, dropped);
  }
  if (a != nullptr) *dropped += a->dropped.exchange(0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

// A client's attribute is its own: kept in its view and given back to it.
// A buffer size or pool limit larger than CUPTI's is also given to CUPTI
// (more room never costs gpuwatch a record); nothing else is.
CUptiResult ClientActivitySetAttribute(CUpti_ActivityAttribute attribute, size_t* value_size,
                                       void* value) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (value_size == nullptr || value == nullptr || *value_size == 0 ||
      *value_size > sizeof(uint64_t) || attribute < 0 ||
      static_cast<size_t>(attribute) >= std::size(a->attributes)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (SizeAttribute(attribute) && a->api()->ActivityGetAttribute != nullptr &&
      a->api()->ActivitySetAttribute != nullptr && *value_size == sizeof(size_t)) {
    size_t current = 0;
    size_t current_size = sizeof(current);
    const CUptiResult r = a->api()->ActivityGetAttribute(attribute, &current_size, &current);
    size_t wanted = 0;
    std::memcpy(&wanted, value, sizeof(wanted));
    if (r == CUPTI_SUCCESS && wanted > current) {
      size_t n = sizeof(wanted);
      if (const CUptiResult s = a->api()->ActivitySetAttribute(attribute, &n, &wanted);
          s != CUPTI_SUCCESS) {
        return s;
      }
    }
  }
  std::lock_guard<Mutex> lock(a->mu);
  Attribute& kept = a->attributes[attribute];
  kept.set = true;
  kept.size = *value_size;
  kept.value = 0;
  std::memcpy(&kept.value, value, *value_size);
  return CUPTI_SUCCESS;
}

CUptiResult ClientActivityGetAttribute(CUpti_ActivityAttribute attribute, size_t* value_size,
                                       void* value) {
  ActivityState* a = Ready();
  if (a == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (value_size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (attribute >= 0 && static_cast<size_t>(attribute) < std::size(a->attributes)) {
    std::lock_guard<Mutex> lock(a->mu);
    const Attribute& kept = a->attributes[attribute];
    if (kept.set) {
      if (*value_size < kept.size) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
      std::memcpy(value, &kept.value, kept.size);
      *value_size = kept.size;
      return CUPTI_SUCCESS;
    }
  }
  return a->api()->ActivityGetAttribute != nullptr
             ? a->api()->ActivityGetAttribute(attribute, value_size, value)
             : CUPTI_ERROR_NOT_SUPPORTED;
}

}  // namespace gpuwatch::mux
