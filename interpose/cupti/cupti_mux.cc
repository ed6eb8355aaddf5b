// The callback half of the CUPTI multiplexer (cupti_mux.h): the real
// subscription, gpuwatch's own view of it and the other clients'.
#include "interpose/cupti/cupti_mux.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/guard.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch::mux {

std::atomic<bool> g_active{false};

namespace {

constexpr uint32_t kMaxCbid = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCbid &&
                  CUPTI_RUNTIME_TRACE_CBID_SIZE <= kMaxCbid &&
                  CUPTI_CBID_RESOURCE_SIZE <= kMaxCbid && CUPTI_CBID_SYNCHRONIZE_SIZE <= kMaxCbid &&
                  CUPTI_CBID_NVTX_SIZE <= kMaxCbid && CUPTI_CBID_STATE_SIZE <= kMaxCbid,
              "callback ids exceed the enable tables");

// How many ids a domain has; 0 for a domain CUPTI does not have.
uint32_t DomainSize(CUpti_CallbackDomain domain) {
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
      return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE:
      return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE:
      return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX:
      return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE:
      return CUPTI_CBID_STATE_SIZE;
    default:
      return 0;
  }
}

// One flag per (domain, id): written under State::mu, read by callbacks.
// gpuwatch's own view, read in every callback, keeps a byte a flag; the
// others a bit (the real subscription's, read under mu, and a client's, read
// only while one is subscribed): the State holds ten views, and a byte each
// made it 70 KiB, zeroed at attach (17 page faults in every process).
struct Enables {
  std::atomic<uint8_t> on[CUPTI_CB_DOMAIN_SIZE][kMaxCbid];  // zeroed (C++20)

  bool Get(CUpti_CallbackDomain d, CUpti_CallbackId id) const {
    return on[d][id].load(std::memory_order_relaxed) != 0;
  }
  void Set(CUpti_CallbackDomain d, CUpti_CallbackId id, bool v) {
    on[d][id].store(v ? 1 : 0, std::memory_order_relaxed);
  }
};

struct BitEnables {
  std::atomic<uint8_t> on[CUPTI_CB_DOMAIN_SIZE][kMaxCbid / 8];  // zeroed (C++20)

  bool Get(CUpti_CallbackDomain d, CUpti_CallbackId id) const {
    return ((on[d][id / 8].load(std::memory_order_relaxed) >> (id % 8)) & 1) != 0;
  }
  void Set(CUpti_CallbackDomain d, CUpti_CallbackId id, bool v) {
    const auto bit = static_cast<uint8_t>(1u << (id % 8));
    if (v) {
      on[d][id / 8].fetch_or(bit, std::memory_order_relaxed);
    } else {
      on[d][id / 8].fetch_and(static_cast<uint8_t>(~bit), std::memory_order_relaxed);
    }
  }
};

// What a subscriber gave cuptiSubscribe. Never freed: a callback may still be
// running on another thread after its client unsubscribed.
struct Target {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
};

struct Client {
  std::atomic<const Target*> target{nullptr};  // null: the slot is free
  BitEnables enabled;
};

struct State {
  Mutex mu;  // subscribe, unsubscribe, enable, finalize
  const CuptiApi* real = nullptr;
  CUpti_SubscriberHandle real_subscriber = nullptr;  // guarded by mu
  bool self_subscribed = false;                      // guarded by mu
  Enables self;
  BitEnables real_on;  // what the real subscription has enabled; guarded by mu
  // One id gpuwatch enabled, to ask CUPTI whether it still is (SelfDetached).
  CUpti_CallbackDomain probe_domain = CUPTI_CB_DOMAIN_INVALID;  // guarded by mu
  CUpti_CallbackId probe_id = 0;
  Client clients[kMaxClients];
};

// Never destroyed: callbacks come during exit.
State& S() {
  static State* const state = new State();
  return *state;
}

// The handle gpuwatch's own view gets (never dereferenced).
CUpti_SubscriberHandle SelfHandle() { return reinterpret_cast<CUpti_SubscriberHandle>(&S().self); }

Client* ClientOf(CUpti_SubscriberHandle handle) {
  State& s = S();
  for (Client& c : s.clients) {
    if (reinterpret_cast<CUpti_SubscriberHandle>(&c) == handle &&
        c.target.load(std::memory_order_acquire) != nullptr) {
      return &c;
    }
  }
  return nullptr;
}

bool AnyClient(const State& s) {
  for (const Client& c : s.clients) {
    if (c.target.load(std::memory_order_acquire) != nullptr) return true;
  }
  return false;
}

void CopyName(CUpti_SubscriberParams* params, const char* name) {
  if (params == nullptr || params->structSize < CUpti_SubscriberParams_STRUCT_SIZE ||
      params->oldSubscriberName == nullptr || params->oldSubscriberSize == 0) {
    return;
  }
  std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", name);
}

// The real subscription, made once someone needs it. Under mu.
CUptiResult SubscribeReal(State& s, CUpti_SubscriberParams* client_params) {
  if (s.real_subscriber != nullptr) return CUPTI_SUCCESS;
  CUptiResult r = CUPTI_SUCCESS;
  if (s.real->SubscribeV2 != nullptr) {
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpuwatch";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof(holder);
    r = s.real->SubscribeV2(&s.real_subscriber, OnCuptiCallback, nullptr, &params);
    if (r != CUPTI_SUCCESS) CopyName(client_params, holder);
  } else {
    r = s.real->Subscribe(&s.real_subscriber, OnCuptiCallback, nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    s.real_subscriber = nullptr;
    return r;
  }
  for (auto& domain : s.real_on.on) {
    for (auto& flag : domain) flag.store(0, std::memory_order_relaxed);
  }
  return CUPTI_SUCCESS;
}

// Gives the real subscription up when nobody uses it any more. Under mu.
void UnsubscribeRealIfUnused(State& s) {
  if (s.self_subscribed || AnyClient(s) || s.real_subscriber == nullptr) return;
  s.real->Unsubscribe(s.real_subscriber);
  s.real_subscriber = nullptr;
}

// Makes the real subscription enable (d, id) exactly when gpuwatch or a
// client wants it. Under mu.
CUptiResult SyncReal(State& s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  bool want = s.self.Get(d, id);
  for (const Client& c : s.clients) {
    want = want || (c.target.load(std::memory_order_relaxed) != nullptr && c.enabled.Get(d, id));
  }
  if (want == s.real_on.Get(d, id) || s.real_subscriber == nullptr) return CUPTI_SUCCESS;
  const CUptiResult r = s.real->EnableCallback(want ? 1 : 0, s.real_subscriber, d, id);
  if (r == CUPTI_SUCCESS) s.real_on.Set(d, id, want);
  return r;
}

// Sets one view's flag and the real subscription to match; the flag is put
// back when CUPTI refuses. Under mu.
template <typename View>
CUptiResult SetEnable(State& s, View& view, uint32_t enable, CUpti_CallbackDomain d,
                      CUpti_CallbackId id) {
  if (id >= DomainSize(d)) return CUPTI_ERROR_INVALID_PARAMETER;
  const bool before = view.Get(d, id);
  view.Set(d, id, enable != 0);
  const CUptiResult r = SyncReal(s, d, id);
  if (r != CUPTI_SUCCESS) view.Set(d, id, before);
  return r;
}

template <typename View>
CUptiResult SetDomain(State& s, View& view, uint32_t enable, CUpti_CallbackDomain d) {
  const uint32_t size = DomainSize(d);
  if (size == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  for (uint32_t id = 0; id < size; ++id) {
    if (const CUptiResult r = SetEnable(s, view, enable, d, id); r != CUPTI_SUCCESS) return r;
  }
  return CUPTI_SUCCESS;
}

// Clears a view and everything the real subscription had on for it alone. Under mu.
template <typename View>
void ClearView(State& s, View& view) {
  for (int d = 0; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    const auto domain = static_cast<CUpti_CallbackDomain>(d);
    for (uint32_t id = 0; id < kMaxCbid; ++id) {
      if (!view.Get(domain, id)) continue;
      view.Set(domain, id, false);
      SyncReal(s, domain, id);
    }
  }
}

// --- gpuwatch's own view (SelfView) ------------------------------------------

CUptiResult CUPTIAPI SelfSubscribeV2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*,
                                     CUpti_SubscriberParams* params) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  const CUptiResult r = SubscribeReal(s, params);
  if (r != CUPTI_SUCCESS) return r;
  s.self_subscribed = true;
  *subscriber = SelfHandle();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI SelfSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                   void* userdata) {
  return SelfSubscribeV2(subscriber, callback, userdata, nullptr);
}

CUptiResult CUPTIAPI SelfUnsubscribe(CUpti_SubscriberHandle) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  ClearView(s, s.self);
  s.self_subscribed = false;
  UnsubscribeRealIfUnused(s);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI SelfEnableCallback(uint32_t enable, CUpti_SubscriberHandle,
                                        CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  const CUptiResult r = SetEnable(s, s.self, enable, domain, cbid);
  if (r == CUPTI_SUCCESS && enable != 0 && s.probe_domain == CUPTI_CB_DOMAIN_INVALID) {
    s.probe_domain = domain;
    s.probe_id = cbid;
  }
  return r;
}

CUptiResult CUPTIAPI SelfEnableDomain(uint32_t enable, CUpti_SubscriberHandle,
                                      CUpti_CallbackDomain domain) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  return SetDomain(s, s.self, enable, domain);
}

}  // namespace

namespace internal {
CUptiResult CUPTIAPI SelfActivityRegister(CUpti_BuffersCallbackRequestFunc request,
                                          CUpti_BuffersCallbackCompleteFunc complete);
CUptiResult CUPTIAPI SelfActivityEnable(CUpti_ActivityKind kind);
}  // namespace internal

const CuptiApi* Real(const std::string& explicit_path, std::string* error) {
  static std::once_flag once;
  static std::string load_error;
  State& s = S();
  std::call_once(once, [&] {
    auto* api = new CuptiApi();  // never destroyed, as the state
    if (LoadCupti(explicit_path, api, &load_error)) {
      s.real = api;
    } else {
      delete api;
    }
  });
  if (s.real == nullptr && error != nullptr) *error = load_error;
  return s.real;
}

CuptiApi SelfView(const CuptiApi& real) {
  CuptiApi view = real;
  view.Subscribe = SelfSubscribe;
  view.SubscribeV2 = real.SubscribeV2 != nullptr ? SelfSubscribeV2 : nullptr;
  view.Unsubscribe = SelfUnsubscribe;
  view.EnableCallback = SelfEnableCallback;
  view.EnableDomain = SelfEnableDomain;
  if (real.ActivityRegisterCallbacks != nullptr) {
    view.ActivityRegisterCallbacks = internal::SelfActivityRegister;
  }
  if (real.ActivityEnable != nullptr) view.ActivityEnable = internal::SelfActivityEnable;
  return view;
}

namespace {

// CUpti_CallbackData::correlationData is one 64-bit slot per subscriber and
// API call, from ENTER to EXIT: each client gets its own. Per thread, a
// stack of the calls in flight (nesting: a runtime call's driver call),
// keyed by CUPTI's slot for the call. Made on the thread's first API
// callback that reaches a client, freed with the thread.
struct CorrelationSlots {
  static constexpr int kDepth = 16;
  struct Call {
    const uint64_t* key = nullptr;
    uint64_t slot[kMaxClients] = {};
  };
  Call calls[kDepth];
  int depth = 0;
  Call spare;  // an EXIT whose ENTER was not seen, or nesting past kDepth
};
thread_local CorrelationSlots* t_slots __attribute__((tls_model("initial-exec"))) = nullptr;

CorrelationSlots* Slots() {
  if (t_slots != nullptr) return t_slots;
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, [](void* slots) {
      t_slots = nullptr;
      delete static_cast<CorrelationSlots*>(slots);
    });
    return k;
  }();
  t_slots = new CorrelationSlots();
  pthread_setspecific(key, t_slots);
  return t_slots;
}

// The slots of one API call for the clients: pushed at ENTER; found at EXIT
// (calls above it whose EXIT never came are dropped), and popped once every
// client had its EXIT (EndCall): a client's callback may make CUDA calls.
CorrelationSlots::Call& CallSlots(const CUpti_CallbackData* d, int* index) {
  CorrelationSlots& s = *Slots();
  *index = -1;
  if (d->callbackSite == CUPTI_API_ENTER) {
    if (s.depth == CorrelationSlots::kDepth) return s.spare;
    *index = s.depth++;
    CorrelationSlots::Call& call = s.calls[*index];
    call = CorrelationSlots::Call{};
    call.key = d->correlationData;
    return call;
  }
  for (int k = s.depth - 1; k >= 0; --k) {
    if (s.calls[k].key == d->correlationData) {
      *index = k;
      return s.calls[k];
    }
  }
  s.spare = CorrelationSlots::Call{};
  return s.spare;
}

void EndCall(const CUpti_CallbackData* d, int index) {
  if (d->callbackSite == CUPTI_API_EXIT && index >= 0) t_slots->depth = index;
}

}  // namespace

void Dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  // What gpuwatch's own work causes is nobody's (guard.h): a client alone
  // would never have seen it.
  if (InsideGpuwatch() || domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE ||
      cbid >= kMaxCbid) {
    return;
  }
  State& s = S();
  if (s.self.Get(domain, cbid)) GpuwatchCallback(domain, cbid, data);
  const bool api = domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API;
  CorrelationSlots::Call* slots = nullptr;
  int index = -1;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  for (int i = 0; i < kMaxClients; ++i) {
    const Client& c = s.clients[i];
    const Target* t = c.target.load(std::memory_order_acquire);
    if (t == nullptr || !c.enabled.Get(domain, cbid)) continue;
    if (!api || data == nullptr) {
      t->callback(t->userdata, domain, cbid, data);
      continue;
    }
    if (slots == nullptr) slots = &CallSlots(d, &index);
    CUpti_CallbackData own = *d;
    own.correlationData = &slots->slot[i];
    t->callback(t->userdata, domain, cbid, &own);
  }
  if (slots != nullptr) EndCall(d, index);
}

bool SelfDetached() {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  if (!s.self_subscribed || s.real_subscriber == nullptr || s.real->GetCallbackState == nullptr ||
      s.probe_domain == CUPTI_CB_DOMAIN_INVALID) {
    return false;
  }
  uint32_t on = 0;
  const CUptiResult r =
      s.real->GetCallbackState(&on, s.real_subscriber, s.probe_domain, s.probe_id);
  return r != CUPTI_SUCCESS || on == 0;
}

void LockForFork() {
  S().mu.lock();
  internal::LockActivityForFork();
}

void UnlockAfterFork() {
  internal::UnlockActivityAfterFork();
  S().mu.unlock();
}

// --- The other clients -------------------------------------------------------

const CuptiApi* RealForClients() {
  const char* path = std::getenv("GPUWATCH_CUPTI_LIBRARY");  // NOLINT(concurrency-mt-unsafe)
  return Real(path != nullptr ? path : "", nullptr);
}

CUptiResult ClientSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                            void* userdata, CUpti_SubscriberParams* params) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (RealForClients() == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  if (const CUptiResult r = SubscribeReal(s, params); r != CUPTI_SUCCESS) return r;
  for (Client& c : s.clients) {
    if (c.target.load(std::memory_order_relaxed) != nullptr) continue;
    for (auto& domain : c.enabled.on) {
      for (auto& flag : domain) flag.store(0, std::memory_order_relaxed);
    }
    c.target.store(new Target{callback, userdata}, std::memory_order_release);
    g_active.store(true, std::memory_order_relaxed);
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&c);
    return CUPTI_SUCCESS;
  }
  CopyName(params, "CUPTI for gpuwatch");
  return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

CUptiResult ClientUnsubscribe(CUpti_SubscriberHandle subscriber) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  Client* c = ClientOf(subscriber);
  if (c == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  c->target.store(nullptr, std::memory_order_release);
  ClearView(s, c->enabled);
  if (!AnyClient(s)) g_active.store(false, std::memory_order_relaxed);
  UnsubscribeRealIfUnused(s);
  return CUPTI_SUCCESS;
}

CUptiResult ClientEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                 CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  Client* c = ClientOf(subscriber);
  if (c == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return SetEnable(s, c->enabled, enable, domain, cbid);
}

CUptiResult ClientEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                               CUpti_CallbackDomain domain) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  Client* c = ClientOf(subscriber);
  if (c == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return SetDomain(s, c->enabled, enable, domain);
}

CUptiResult ClientEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  Client* c = ClientOf(subscriber);
  if (c == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    const CUptiResult r = SetDomain(s, c->enabled, enable, static_cast<CUpti_CallbackDomain>(d));
    if (r != CUPTI_SUCCESS) return r;
  }
  return CUPTI_SUCCESS;
}

CUptiResult ClientGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                   CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = S();
  std::lock_guard<Mutex> lock(s.mu);
  Client* c = ClientOf(subscriber);
  if (enable == nullptr || c == nullptr || cbid >= DomainSize(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *enable = c->enabled.Get(domain, cbid) ? 1 : 0;
  return CUPTI_SUCCESS;
}

CUptiResult ClientFinalize() {
  if (RealForClients() == nullptr) return CUPTI_SUCCESS;
  {
    State& s = S();
    std::lock_guard<Mutex> lock(s.mu);
    for (Client& c : s.clients) {
      if (c.target.exchange(nullptr, std::memory_order_acq_rel) != nullptr) ClearView(s, c.enabled);
    }
    g_active.store(false, std::memory_order_relaxed);
    UnsubscribeRealIfUnused(s);
  }
  internal::FinalizeClientActivity();
  return CUPTI_SUCCESS;
}

}  // namespace gpuwatch::mux
