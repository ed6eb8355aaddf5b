// A CUPTI client as profilers embedded in training jobs are: PyTorch's Kineto
// (linked against libcupti: this file as `cupti_client`) or XLA's tracer and
// ctypes tools (libcupti dlopened, each function looked up with dlsym on the
// handle: `cupti_client_dlsym`, built with CUPTI_CLIENT_DLSYM).
//
//   cupti_client MODE [late]
//
// MODE says what it uses of CUPTI:
//   none       nothing (the same CUDA work, for gpuwatch's report to compare)
//   callbacks  cuptiSubscribe_v2, the whole runtime domain and a few driver ids
//   activity   the activity API alone: MEMCPY, CONCURRENT_KERNEL and MEMORY2
//              records, then disabled before more work that it must not see
//   both       callbacks and activity, as Kineto does
//   finalize   both, then cuptiFinalize() in the middle of the CUDA work
//   two        callbacks, and a second subscriber of its own (CUPTI alone
//              refuses it; beside gpuwatch each keeps its correlationData)
// `late`: CUDA is initialised (cudaFree(NULL)) before CUPTI is touched;
// otherwise CUPTI comes first.
//
// It prints what it saw: per callback id ENTER and EXIT counts (and whether
// correlationData came back as written), per activity kind the records and
// their bytes, the buffers it handed out and got back. The same lines must
// come out with and without gpuwatch in the process. Exit status 0, 1 when a
// CUDA or CUPTI call failed, 2 on a usage or loader error.
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;

// The CUPTI functions used, linked or looked up.
struct Cupti {
  decltype(&cuptiSubscribe_v2) subscribe_v2;
  decltype(&cuptiUnsubscribe) unsubscribe;
  decltype(&cuptiEnableCallback) enable_callback;
  decltype(&cuptiEnableDomain) enable_domain;
  decltype(&cuptiGetCallbackState) callback_state;
  decltype(&cuptiFinalize) finalize;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks;
  decltype(&cuptiActivityEnable) activity_enable;
  decltype(&cuptiActivityDisable) activity_disable;
  decltype(&cuptiActivityFlushAll) flush_all;
  decltype(&cuptiActivityGetNextRecord) next_record;
  decltype(&cuptiActivitySetAttribute) set_attribute;
  decltype(&cuptiActivityGetAttribute) get_attribute;
};

#if defined(CUPTI_CLIENT_DLSYM)
template <typename T>
bool Find(void* lib, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(lib, name));
  if (*out == nullptr) std::fprintf(stderr, "cupti_client: no %s\n", name);
  return *out != nullptr;
}

bool Load(Cupti* c) {
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cupti_client: %s\n", dlerror());
    return false;
  }
  return Find(lib, "cuptiSubscribe_v2", &c->subscribe_v2) &&
         Find(lib, "cuptiUnsubscribe", &c->unsubscribe) &&
         Find(lib, "cuptiEnableCallback", &c->enable_callback) &&
         Find(lib, "cuptiEnableDomain", &c->enable_domain) &&
         Find(lib, "cuptiGetCallbackState", &c->callback_state) &&
         Find(lib, "cuptiFinalize", &c->finalize) &&
         Find(lib, "cuptiActivityRegisterCallbacks", &c->register_callbacks) &&
         Find(lib, "cuptiActivityEnable", &c->activity_enable) &&
         Find(lib, "cuptiActivityDisable", &c->activity_disable) &&
         Find(lib, "cuptiActivityFlushAll", &c->flush_all) &&
         Find(lib, "cuptiActivityGetNextRecord", &c->next_record) &&
         Find(lib, "cuptiActivitySetAttribute", &c->set_attribute) &&
         Find(lib, "cuptiActivityGetAttribute", &c->get_attribute);
}
#else
bool Load(Cupti* c) {
  *c = Cupti{cuptiSubscribe_v2,
             cuptiUnsubscribe,
             cuptiEnableCallback,
             cuptiEnableDomain,
             cuptiGetCallbackState,
             cuptiFinalize,
             cuptiActivityRegisterCallbacks,
             cuptiActivityEnable,
             cuptiActivityDisable,
             cuptiActivityFlushAll,
             cuptiActivityGetNextRecord,
             cuptiActivitySetAttribute,
             cuptiActivityGetAttribute};
  return true;
}
#endif

Cupti g_cupti;
int g_failures = 0;

void Check(const char* what, CUptiResult r) {
  if (r == CUPTI_SUCCESS) return;
  std::printf("%s: CUPTI error %d\n", what, static_cast<int>(r));
  ++g_failures;
}

void Rt(cudaError_t err) {
  if (err != cudaSuccess) {
    std::printf("CUDA error %d\n", static_cast<int>(err));
    ++g_failures;
  }
}

// --- callbacks ---------------------------------------------------------------

std::mutex g_mu;
std::map<std::string, int> g_calls;  // "domain cbid site" -> count
int g_correlation_mismatches = 0;
std::set<uint32_t> g_domains_seen;

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_domains_seen.insert(domain);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool enter = cb->callbackSite == CUPTI_API_ENTER;
  const uint64_t mark = 0xc11e0000ull + cbid;
  if (enter) {
    *cb->correlationData = mark;
  } else if (*cb->correlationData != mark) {
    ++g_correlation_mismatches;
  }
  ++g_calls[std::string(domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime " : "driver ") +
            cb->functionName + (enter ? " enter" : " exit")];
}

CUpti_SubscriberHandle g_subscriber = nullptr;

// A second subscriber ("two"): marks correlationData its own way.
int g_second_calls = 0;
int g_second_mismatches = 0;

void CUPTIAPI OnSecondCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const uint64_t mark = 0xb0b00000ull + cbid;
  std::lock_guard<std::mutex> lock(g_mu);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    *cb->correlationData = mark;
    ++g_second_calls;
  } else if (*cb->correlationData != mark) {
    ++g_second_mismatches;
  }
}

// Subscribes `callback` by cuptiSubscribe_v2 under `name`, printing
// "<what>subscribe: <result>"; whether it succeeded.
template <typename Callback>
bool Subscribe(CUpti_SubscriberHandle* handle, Callback callback, const char* name,
               const char* what) {
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = name;
  const CUptiResult r = g_cupti.subscribe_v2(handle, reinterpret_cast<CUpti_CallbackFunc>(callback),
                                             nullptr, &params);
  std::printf("%ssubscribe: %d\n", what, static_cast<int>(r));
  return r == CUPTI_SUCCESS;
}

void StartSecond() {
  CUpti_SubscriberHandle second = nullptr;
  if (!Subscribe(&second, OnSecondCallback, "cupti_client second", "second ")) return;
  for (const CUpti_CallbackId id :
       {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020}) {
    Check("second enable", g_cupti.enable_callback(1, second, CUPTI_CB_DOMAIN_RUNTIME_API, id));
  }
}

void StartCallbacks() {
  if (!Subscribe(&g_subscriber, OnCallback, "cupti_client", "")) return;
  Check("enable runtime domain",
        g_cupti.enable_domain(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
  // Off again: the client's own state, not gpuwatch's.
  Check("disable cudaGetLastError",
        g_cupti.enable_callback(0, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020));
  for (const CUpti_CallbackId id :
       {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
        CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize}) {
    Check("enable driver id",
          g_cupti.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id));
  }
  uint32_t state = 9;
  Check("callback state", g_cupti.callback_state(&state, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                                 CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020));
  std::printf("cudaGetLastError enabled: %u\n", state);
  const CUptiResult bad = g_cupti.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                                  CUPTI_RUNTIME_TRACE_CBID_SIZE + 7);
  std::printf("enable a cbid out of range: %d\n", static_cast<int>(bad));
}

void PrintCallbacks() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& [name, count] : g_calls) std::printf("callback %s: %d\n", name.c_str(), count);
  std::printf("correlationData mismatches: %d\n", g_correlation_mismatches);
  std::printf("domains seen:");
  for (const uint32_t d : g_domains_seen) std::printf(" %u", d);
  std::printf("\n");
}

// --- activity ----------------------------------------------------------------

std::set<uint8_t*> g_outstanding;  // buffers handed to CUPTI, not yet back
int g_buffers_requested = 0;
int g_buffers_completed = 0;
int g_unknown_buffers = 0;
std::map<int, int> g_records;            // kind -> records
std::map<int, uint64_t> g_memcpy_bytes;  // copyKind -> bytes
std::map<std::string, int> g_kernels;    // name -> records
uint64_t g_memory_bytes = 0;             // MEMORY2 allocation bytes
int g_memory_records = 0;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 4096;  // small: several buffers per run
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
  std::lock_guard<std::mutex> lock(g_mu);
  g_outstanding.insert(*buffer);
  ++g_buffers_requested;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_outstanding.erase(buffer) == 0) {
    ++g_unknown_buffers;  // as Kineto: "bufferCompleted called with unknown buffer"
    return;
  }
  ++g_buffers_completed;
  CUpti_Activity* record = nullptr;
  while (g_cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    ++g_records[record->kind];
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        g_memcpy_bytes[r->copyKind] += r->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* r = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        ++g_kernels[r->name != nullptr ? r->name : "?"];
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
          g_memory_bytes += r->bytes;
          ++g_memory_records;
        }
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMORY2};

void StartActivity() {
  Check("register", g_cupti.register_callbacks(BufferRequested, BufferCompleted));
  size_t value = 64 * kMiB;
  size_t size = sizeof(value);
  Check("set device buffer size",
        g_cupti.set_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value));
  value = 0;
  size = sizeof(value);
  Check("get device buffer size",
        g_cupti.get_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value));
  std::printf("device buffer size: %zu MiB\n", value / kMiB);
  for (const CUpti_ActivityKind kind : kKinds)
    Check("activity enable", g_cupti.activity_enable(kind));
}

void StopActivity() {
  for (const CUpti_ActivityKind kind : kKinds)
    Check("activity disable", g_cupti.activity_disable(kind));
  Check("flush", g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

void PrintActivity() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::printf("buffers: requested %d, completed %d, unknown %d, outstanding %zu\n",
              g_buffers_requested, g_buffers_completed, g_unknown_buffers, g_outstanding.size());
  for (const auto& [kind, n] : g_records) std::printf("records of kind %d: %d\n", kind, n);
  for (const auto& [kind, bytes] : g_memcpy_bytes) {
    std::printf("memcpy kind %d: %llu bytes\n", kind, static_cast<unsigned long long>(bytes));
  }
  for (const auto& [name, n] : g_kernels) std::printf("kernel %s: %d\n", name.c_str(), n);
  std::printf("memory allocations: %d, %llu bytes\n", g_memory_records,
              static_cast<unsigned long long>(g_memory_bytes));
}

// --- the CUDA work -------------------------------------------------------------

__global__ void Touch(char* p) { p[threadIdx.x] += 1; }

// 3 x 1 MiB allocated, one freed; 1 MiB each way; two kernel launches.
void FirstWork(char** keep, char** later) {
  char* d[3] = {};
  for (char*& p : d) Rt(cudaMalloc(&p, kMiB));
  Rt(cudaFree(d[1]));
  std::vector<char> host(kMiB, 1);
  Rt(cudaMemcpy(d[0], host.data(), kMiB, cudaMemcpyHostToDevice));
  Touch<<<1, 32>>>(d[0]);
  Touch<<<1, 32>>>(d[0]);
  Rt(cudaGetLastError());
  Rt(cudaMemcpy(host.data(), d[0], kMiB, cudaMemcpyDeviceToHost));
  Rt(cudaDeviceSynchronize());
  *keep = d[0];
  *later = d[2];
}

// One free of FirstWork's, 512 KiB allocated and freed, one more copy.
void SecondWork(char* later) {
  Rt(cudaFree(later));
  char* p = nullptr;
  Rt(cudaMalloc(&p, kMiB / 2));
  std::vector<char> host(kMiB / 2, 2);
  Rt(cudaMemcpy(p, host.data(), kMiB / 2, cudaMemcpyHostToDevice));
  Rt(cudaFree(p));
  Rt(cudaDeviceSynchronize());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  const bool late = argc >= 3 && std::strcmp(argv[2], "late") == 0;
  const bool callbacks =
      mode == "callbacks" || mode == "both" || mode == "finalize" || mode == "two";
  const bool activity = mode == "activity" || mode == "both" || mode == "finalize";
  if (!callbacks && !activity && mode != "none") {
    std::fprintf(stderr, "usage: cupti_client none|callbacks|activity|both|finalize|two [late]\n");
    return 2;
  }
  if (!Load(&g_cupti)) return 2;
  if (late) Rt(cudaFree(nullptr));
  if (callbacks) StartCallbacks();
  if (mode == "two") StartSecond();
  if (activity) StartActivity();
  char* keep = nullptr;
  char* later = nullptr;
  FirstWork(&keep, &later);
  if (mode == "finalize") {
    Check("flush", g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    Check("finalize", g_cupti.finalize());
    std::printf("finalized\n");
  } else if (activity) {
    StopActivity();  // what follows is outside its window
  }
  SecondWork(later);
  if (activity && mode != "finalize")
    Check("flush", g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (callbacks) PrintCallbacks();
  if (mode == "two") {
    std::printf("second: %d calls, %d correlationData mismatches\n", g_second_calls,
                g_second_mismatches);
  }
  if (activity) PrintActivity();
  if (callbacks && mode != "finalize") Check("unsubscribe", g_cupti.unsubscribe(g_subscriber));
  std::printf("cupti_client: done (%d failures)\n", g_failures);
  (void)keep;  // 1 MiB stays allocated: the leak gpuwatch must report
  return g_failures == 0 ? 0 : 1;
}
