// A host that uses CUPTI itself, as one embedding a profiler (Kineto, Nsight)
// does. Neither CUDA nor CUPTI is linked: both are dlopened (argv[2], argv[3])
// so the order of events is the program's.
//
//   own_cupti first  LIBCUDART LIBCUPTI   subscribes before any CUDA call,
//       then allocates 3 x 256 KiB and frees 2; prints what its own callbacks
//       saw (cudaMalloc and cudaFree, ENTER and EXIT).
//   own_cupti second LIBCUDART LIBCUPTI   initialises CUDA first (cudaFree(0)),
//       then subscribes and prints the result, then allocates 2 x 1 MiB and
//       frees 1.
//   own_cupti second-v2 LIBCUDART LIBCUPTI   the same through cuptiSubscribe_v2
//       (as current Kineto does), naming itself "own_cupti"; on failure it
//       also prints the name of the subscriber that holds the subscription.
//
// Exit status 0 whatever cuptiSubscribe returned (the host carries on without
// its profiler, as real ones do); 1 when a CUDA call failed; 2 on a loader
// error. tests/e2e/host_cuda_test.cc runs it with and without gpuwatch.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace {

using Malloc = int (*)(void**, size_t);
using Free = int (*)(void*);
using Subscribe = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using SubscribeV2 = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                    CUpti_SubscriberParams*);
using Unsubscribe = CUptiResult (*)(CUpti_SubscriberHandle);
using EnableCallback = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                       CUpti_CallbackId);
using ResultString = CUptiResult (*)(CUptiResult, const char**);

std::atomic<int> g_seen[2][2];  // [malloc, free][enter, exit]

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const int site = cb->callbackSite == CUPTI_API_ENTER ? 0 : 1;
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) g_seen[0][site].fetch_add(1);
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) g_seen[1][site].fetch_add(1);
}

void* Open(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) std::fprintf(stderr, "own_cupti: %s\n", dlerror());
  return handle;
}

template <typename T>
T Sym(void* handle, const char* name) {
  return reinterpret_cast<T>(dlsym(handle, name));
}

}  // namespace

int main(int argc, char** argv) {
  const bool v2 = argc == 4 && std::strcmp(argv[1], "second-v2") == 0;
  if (argc != 4 ||
      (std::strcmp(argv[1], "first") != 0 && std::strcmp(argv[1], "second") != 0 && !v2)) {
    std::fprintf(stderr, "usage: own_cupti first|second|second-v2 LIBCUDART LIBCUPTI\n");
    return 2;
  }
  const bool first = std::strcmp(argv[1], "first") == 0;
  void* cudart = nullptr;
  Malloc cuda_malloc = nullptr;
  Free cuda_free = nullptr;
  int failures = 0;
  auto load_cudart = [&] {
    cudart = Open(argv[2]);
    if (cudart == nullptr) return false;
    cuda_malloc = Sym<Malloc>(cudart, "cudaMalloc");
    cuda_free = Sym<Free>(cudart, "cudaFree");
    return cuda_malloc != nullptr && cuda_free != nullptr;
  };
  if (!first) {
    if (!load_cudart()) return 2;
    const int status = cuda_free(nullptr);
    std::printf("cudaFree(NULL): %d\n", status);
    if (status != 0) ++failures;
  }

  void* cupti = Open(argv[3]);
  if (cupti == nullptr) return 2;
  auto subscribe = Sym<Subscribe>(cupti, "cuptiSubscribe");
  auto unsubscribe = Sym<Unsubscribe>(cupti, "cuptiUnsubscribe");
  auto enable = Sym<EnableCallback>(cupti, "cuptiEnableCallback");
  auto result_string = Sym<ResultString>(cupti, "cuptiGetResultString");
  if (subscribe == nullptr || unsubscribe == nullptr || enable == nullptr ||
      result_string == nullptr) {
    std::fprintf(stderr, "own_cupti: %s lacks the CUPTI callback API\n", argv[3]);
    return 2;
  }
  CUpti_SubscriberHandle handle = nullptr;
  CUptiResult r = CUPTI_SUCCESS;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  if (v2) {
    auto subscribe_v2 = Sym<SubscribeV2>(cupti, "cuptiSubscribe_v2");
    if (subscribe_v2 == nullptr) {
      std::fprintf(stderr, "own_cupti: %s lacks cuptiSubscribe_v2\n", argv[3]);
      return 2;
    }
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "own_cupti";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof(holder);
    r = subscribe_v2(&handle, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr, &params);
  } else {
    r = subscribe(&handle, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  }
  const char* text = nullptr;
  result_string(r, &text);
  std::printf("cuptiSubscribe: %d %s\n", static_cast<int>(r), text != nullptr ? text : "?");
  if (v2 && r != CUPTI_SUCCESS) std::printf("held by: %s\n", holder[0] != '\0' ? holder : "?");
  if (r == CUPTI_SUCCESS) {
    const CUptiResult e1 =
        enable(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
    const CUptiResult e2 =
        enable(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
    std::printf("cuptiEnableCallback: %d %d\n", static_cast<int>(e1), static_cast<int>(e2));
  }

  if (first && !load_cudart()) return 2;
  const size_t size = first ? 256 << 10 : 1 << 20;
  const int count = first ? 3 : 2;
  void* p[3] = {};
  for (int i = 0; i < count; ++i) {
    const int status = cuda_malloc(&p[i], size);
    std::printf("cudaMalloc %zu: %d\n", size, status);
    if (status != 0) ++failures;
  }
  for (int i = 1; i < count; ++i) {  // p[0] stays allocated
    const int status = cuda_free(p[i]);
    std::printf("cudaFree: %d\n", status);
    if (status != 0) ++failures;
  }
  if (r == CUPTI_SUCCESS) {
    std::printf("own callbacks: cudaMalloc enter %d exit %d, cudaFree enter %d exit %d\n",
                g_seen[0][0].load(), g_seen[0][1].load(), g_seen[1][0].load(), g_seen[1][1].load());
    std::printf("cuptiUnsubscribe: %d\n", static_cast<int>(unsubscribe(handle)));
  }
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
