// The fake CUPTI callback API: one subscriber, per-cbid enable state, resource callbacks, and
// the small query functions (timestamps, ids, names).
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/leaked.h"
#include "cupti/internal.h"

namespace gwsim::cupti {
namespace {

constexpr uint32_t kMaxCbid = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCbid, "driver cbids exceed the enable table");
static_assert(CUPTI_RUNTIME_TRACE_CBID_SIZE <= kMaxCbid, "runtime cbids exceed the enable table");

struct Subscriber {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  std::string name;
};

// Leaked singletons: callbacks can arrive while the process exits.
struct CallbackState {
  std::mutex mu;  // serialises subscribe/unsubscribe
  std::atomic<Subscriber*> subscriber{nullptr};
  std::vector<Subscriber*> retired;  // unsubscribed; kept, a callback may still be running
  std::atomic<uint8_t> enabled[CUPTI_CB_DOMAIN_SIZE][kMaxCbid];  // zeroed (C++20)
};
CallbackState& S() { return Leaked<CallbackState>(); }

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

// Delivers one callback if a subscriber wants it. Runs on the thread making the CUDA call,
// with no lock held, so the subscriber may call CUDA (and CUPTI) from inside.
void Deliver(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  CallbackState& s = S();
  Subscriber* sub = s.subscriber.load(std::memory_order_acquire);
  if (sub == nullptr || sub->callback == nullptr || cbid >= kMaxCbid ||
      s.enabled[domain][cbid].load(std::memory_order_relaxed) == 0) {
    return;
  }
  sub->callback(sub->userdata, domain, cbid, data);
}

void OnApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  if (data->callbackSite == CUPTI_API_ENTER) ActivityExternalCorrelation(data->correlationId);
  Deliver(domain, cbid, data);
}

void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  Deliver(CUPTI_CB_DOMAIN_RESOURCE, cbid, data);
}

const gwsim_cupti_hooks kHooks = {GWSIM_ABI_VERSION, OnApi, OnResource, ActivityKindEnabled,
                                  ActivityRecord};

DriverLink* Connect() {
  auto* link = new DriverLink();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return link;  // no driver: every subscribe fails with CUPTI_ERROR_UNKNOWN
  auto get_config = reinterpret_cast<gwsim_get_config_fn>(dlsym(lib, "gwsim_get_config"));
  auto register_cupti =
      reinterpret_cast<gwsim_register_cupti_fn>(dlsym(lib, "gwsim_register_cupti"));
  link->now_ns = reinterpret_cast<gwsim_now_ns_fn>(dlsym(lib, "gwsim_now_ns"));
  link->context_ids = reinterpret_cast<gwsim_context_ids_fn>(dlsym(lib, "gwsim_context_ids"));
  link->stream_id = reinterpret_cast<gwsim_stream_id_fn>(dlsym(lib, "gwsim_stream_id"));
  if (get_config == nullptr || register_cupti == nullptr || link->now_ns == nullptr ||
      link->context_ids == nullptr || link->stream_id == nullptr) {
    return link;  // not the simulator's driver
  }
  gwsim_config_info info{};
  get_config(&info);
  link->fail_mode = info.fail_mode;
  link->cupti_version = info.cupti_version;
  if (info.fail_mode == GWSIM_FAIL_NO_DRIVER) return link;
  link->present = register_cupti(&kHooks) == 0;
  return link;
}

void ClearEnables() {
  CallbackState& s = S();
  for (auto& domain : s.enabled) {
    for (auto& flag : domain) flag.store(0, std::memory_order_relaxed);
  }
}

void CopyName(CUpti_SubscriberParams* params, const std::string& name) {
  if (params == nullptr || params->structSize < CUpti_SubscriberParams_STRUCT_SIZE ||
      params->oldSubscriberName == nullptr || params->oldSubscriberSize == 0) {
    return;
  }
  std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", name.c_str());
}

CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                      void* userdata, CUpti_SubscriberParams* params) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const DriverLink& link = Link();
  if (link.fail_mode == GWSIM_FAIL_OTHER_SUBSCRIBER) {
    const char* other = std::getenv("GWSIM_OTHER_SUBSCRIBER");
    CopyName(params, other != nullptr ? other : "Nsight Systems");
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  if (!link.present) return CUPTI_ERROR_UNKNOWN;  // what the real CUPTI says without a driver
  CallbackState& s = S();
  std::lock_guard lock(s.mu);
  if (Subscriber* current = s.subscriber.load(); current != nullptr) {
    CopyName(params, current->name.empty() ? "CUPTI" : "CUPTI for " + current->name);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  // Never freed: after unsubscribe a callback may still be running on another thread.
  auto* sub = new Subscriber();
  sub->callback = callback;
  sub->userdata = userdata;
  if (params != nullptr && params->subscriberName != nullptr) {
    sub->name.assign(params->subscriberName,
                     strnlen(params->subscriberName, CUPTI_SUBSCRIBER_NAME_MAX_LEN));
  }
  ClearEnables();
  s.subscriber.store(sub, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(sub);
  return CUPTI_SUCCESS;
}

bool IsCurrent(CUpti_SubscriberHandle subscriber) {
  return subscriber != nullptr && reinterpret_cast<Subscriber*>(subscriber) ==
                                      S().subscriber.load(std::memory_order_acquire);
}

}  // namespace

const DriverLink& Link() {
  static const DriverLink* const link = Connect();
  return *link;
}

namespace {

// cuptiGetContextId / cuptiGetDeviceId: the one of the two ids asked for (the other is null).
CUptiResult ContextIds(CUcontext context, uint32_t* context_id, uint32_t* device_id) {
  const DriverLink& link = Link();
  if (context_id == nullptr && device_id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!link.present) return CUPTI_ERROR_NOT_INITIALIZED;
  return link.context_ids(context, context_id, device_id) == 0 ? CUPTI_SUCCESS
                                                               : CUPTI_ERROR_INVALID_CONTEXT;
}

}  // namespace
}  // namespace gwsim::cupti

using namespace gwsim::cupti;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                                 CUpti_CallbackFunc callback, void* userdata) {
  return Subscribe(subscriber, callback, userdata, nullptr);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                                    CUpti_CallbackFunc callback, void* userdata,
                                                    CUpti_SubscriberParams* pParams) {
  return Subscribe(subscriber, callback, userdata, pParams);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  CallbackState& s = S();
  std::lock_guard lock(s.mu);
  if (!IsCurrent(subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  ClearEnables();
  s.retired.push_back(s.subscriber.exchange(nullptr, std::memory_order_acq_rel));
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable,
                                                      CUpti_SubscriberHandle subscriber,
                                                      CUpti_CallbackDomain domain,
                                                      CUpti_CallbackId cbid) {
  if (!IsCurrent(subscriber) || cbid >= DomainSize(domain)) return CUPTI_ERROR_INVALID_PARAMETER;
  S().enabled[domain][cbid].store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable,
                                                    CUpti_SubscriberHandle subscriber,
                                                    CUpti_CallbackDomain domain) {
  const uint32_t size = DomainSize(domain);
  if (!IsCurrent(subscriber) || size == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  for (uint32_t cbid = 0; cbid < size; ++cbid) {
    S().enabled[domain][cbid].store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  }
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable,
                                                        CUpti_SubscriberHandle subscriber) {
  if (!IsCurrent(subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    cuptiEnableDomain(enable, subscriber, static_cast<CUpti_CallbackDomain>(d));
  }
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t* enable,
                                                        CUpti_SubscriberHandle subscriber,
                                                        CUpti_CallbackDomain domain,
                                                        CUpti_CallbackId cbid) {
  if (enable == nullptr || !IsCurrent(subscriber) || cbid >= DomainSize(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *enable = S().enabled[domain][cbid].load(std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiSupportedDomains(size_t* domainCount,
                                                        CUpti_DomainTable* domainTable) {
  static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_CB_DOMAIN_RESOURCE};
  if (domainCount == nullptr || domainTable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *domainCount = sizeof(domains) / sizeof(domains[0]);
  *domainTable = domains;
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                                       const char** name) {
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      *name = RuntimeCallbackName(cbid);
      break;
    case CUPTI_CB_DOMAIN_DRIVER_API:
      *name = DriverCallbackName(cbid);
      break;
    default:
      *name = nullptr;  // names exist for the driver and runtime domains only
      break;
  }
  return *name != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *str = ResultName(result);
  return *str != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetErrorMessage(CUptiResult result, const char** str) {
  return cuptiGetResultString(result, str);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = Link().cupti_version;
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const DriverLink& link = Link();
  if (link.now_ns != nullptr) {
    *timestamp = link.now_ns();  // the simulated clock, the one activity records use
    return CUPTI_SUCCESS;
  }
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  *timestamp = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return CUPTI_SUCCESS;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t* contextId) {
  return ContextIds(context, contextId, nullptr);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  return ContextIds(context, nullptr, deviceId);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream,
                                                     uint8_t perThreadStream, uint32_t* streamId) {
  const DriverLink& link = Link();
  if (streamId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!link.present) return CUPTI_ERROR_NOT_INITIALIZED;
  return link.stream_id(context, stream, perThreadStream, streamId) == 0
             ? CUPTI_SUCCESS
             : CUPTI_ERROR_INVALID_STREAM;
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetStreamId(CUcontext context, CUstream stream,
                                                   uint32_t* streamId) {
  return cuptiGetStreamIdEx(context, stream, 0, streamId);
}

GWSIM_EXPORT CUptiResult CUPTIAPI cuptiGetLastError(void) { return CUPTI_SUCCESS; }

// Detaches the subscriber and stops all activity kinds; buffered records stay for a later flush.
GWSIM_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) {
  CallbackState& s = S();
  {
    std::lock_guard lock(s.mu);
    ClearEnables();
    if (Subscriber* sub = s.subscriber.exchange(nullptr, std::memory_order_acq_rel)) {
      s.retired.push_back(sub);
    }
  }
  ActivityDisableAll();
  return CUPTI_SUCCESS;
}
