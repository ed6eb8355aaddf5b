// A CUDA_INJECTION64_PATH library that writes down what CUPTI delivers, so
// that the simulator (tests/sim) can be compared with NVIDIA's CUPTI on a GPU:
// tests/gpu/run.sh runs the same programs under it on both and
// tests/gpu/compare_sequences.py diffs the two files.
//
// It enables the runtime, driver and resource callback domains whole, and the
// MEMCPY, MEMCPY2, MEMORY2 and CONCURRENT_KERNEL activity kinds. One line per
// callback, tab-separated, written with one write(2) as it happens (so the
// runtime's teardown after exit is recorded too):
//
//   cb  THREAD DEPTH DOMAIN SITE CBID NAME GW CORR RET SYMBOL CORRID
//
//   THREAD  ordinal of the thread (first callback seen = 0)
//   DEPTH   API calls of this thread enclosing this one (0 = top level)
//   DOMAIN  rt, drv or res
//   SITE    enter, exit, or - (resource)
//   CBID    the callback id; NAME CUPTI's functionName (resource: cuptiGetCallbackName)
//   GW      1 when gpuwatch enables this callback id (interpose/callbacks/callbacks.cc), else 0
//   CORR    top (depth 0), same (the enclosing call's correlation id) or new
//   RET     the return value at exit, else -
//   SYMBOL  symbolName when CUPTI gives one, else -
//   CORRID  the raw correlation id (0 for resource callbacks)
//
// and one line per activity record, at flush:
//
//   act memcpy COPYKIND SRCKIND DSTKIND BYTES FLAGS RUNTIME_CORR(0|set)
//   ids memcpy CORRID RUNTIME_CORRID GRAPH_NODE_ID   (the raw ids of the record above)
//   act memcpy2 COPYKIND SRCKIND DSTKIND BYTES FLAGS
//   act memory2 OPERATION MEMORYKIND BYTES ISASYNC
//   act kernel NAME
//
// Attach with CUDA_INJECTION64_PATH (the driver calls InitializeInjection in
// cuInit, within the program's first CUDA call) or with LD_PRELOAD (subscribes
// from a constructor, before main).
//
// Output: $GWREC_OUTPUT (default gwrec.PID.txt in the working directory).
// libcupti.so.13 is found as gpuwatch finds it: $GWREC_CUPTI, the soname,
// $CUDA_HOME, /usr/local/cuda.
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bench/cupti_injection.h"
#include "interpose/calls/calls.h"

namespace {

struct Cupti : cupti_injection::ActivityApi {
  decltype(&cuptiEnableDomain) EnableDomain = nullptr;
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
};

Cupti g_cupti;
int g_fd = -1;
std::mutex g_mu;
int g_threads = 0;  // guarded by g_mu

thread_local int t_thread = -1;
thread_local int t_depth = 0;
constexpr int kMaxDepth = 64;
thread_local uint32_t t_corr[kMaxDepth];

bool InGpuwatchSet(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  // The ids gpuwatch enables: its own registry (interpose/calls/calls.h).
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto ids = gpuwatch::ResourceCallbacks();
    return std::find(ids.begin(), ids.end(), cbid) != ids.end();
  }
  return gpuwatch::FindSpec(domain, cbid) != nullptr;
}

void WriteLine(const char* line) {
  if (g_fd < 0) return;
  const size_t n = std::strlen(line);
  (void)!write(g_fd, line, n);  // O_APPEND: one write is one line, whatever the thread
}

int ThreadOrdinal() {
  if (t_thread < 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    t_thread = g_threads++;
  }
  return t_thread;
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  const int thread = ThreadOrdinal();
  const int gw = InGpuwatchSet(domain, cbid) ? 1 : 0;
  char line[1024];
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    const bool enter = d->callbackSite == CUPTI_API_ENTER;
    const char* corr = "top";
    int depth = t_depth;
    if (enter) {
      if (depth > 0 && depth <= kMaxDepth) {
        corr = t_corr[depth - 1] == d->correlationId ? "same" : "new";
      }
      if (depth < kMaxDepth) t_corr[depth] = d->correlationId;
      ++t_depth;
    } else {
      // EXIT without ENTER (the first call under injection): clamp at zero.
      if (t_depth > 0) --t_depth;
      depth = t_depth;
      if (depth > 0 && depth <= kMaxDepth) {
        corr = t_corr[depth - 1] == d->correlationId ? "same" : "new";
      }
    }
    char ret[32] = "-";
    if (!enter && d->functionReturnValue != nullptr) {
      std::snprintf(ret, sizeof(ret), "%d", *static_cast<const int*>(d->functionReturnValue));
    }
    std::snprintf(line, sizeof(line), "cb\t%d\t%d\t%s\t%s\t%u\t%s\t%d\t%s\t%s\t%s\t%u\n", thread,
                  depth, domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "rt" : "drv",
                  enter ? "enter" : "exit", cbid,
                  d->functionName != nullptr ? d->functionName : "?", gw, corr, ret,
                  d->symbolName != nullptr && d->symbolName[0] != '\0' ? d->symbolName : "-",
                  d->correlationId);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const char* name = nullptr;
    if (g_cupti.GetCallbackName == nullptr ||
        g_cupti.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
      name = "?";
    }
    std::snprintf(line, sizeof(line), "cb\t%d\t%d\tres\t-\t%u\t%s\t%d\t-\t-\t-\t0\n", thread,
                  t_depth, cbid, name, gw);
  } else {
    return;
  }
  WriteLine(line);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = size_t{4} << 20;
  cupti_injection::AllocateActivityBuffer(kBytes, buffer, size, max_records);
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  char line[1024];
  while (g_cupti.ActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    line[0] = '\0';
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        const int n = std::snprintf(line, sizeof(line), "act\tmemcpy\t%u\t%u\t%u\t%llu\t%u\t%s\n",
                                    r->copyKind, r->srcKind, r->dstKind,
                                    static_cast<unsigned long long>(r->bytes), r->flags,
                                    r->runtimeCorrelationId != 0 ? "set" : "0");
        // The raw ids on a line of their own: they differ between the GPU and
        // the simulator, so the sequence comparison does not read them.
        std::snprintf(line + n, sizeof(line) - n, "ids\tmemcpy\t%u\t%u\t%llu\n", r->correlationId,
                      r->runtimeCorrelationId, static_cast<unsigned long long>(r->graphNodeId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
        std::snprintf(line, sizeof(line), "act\tmemcpy2\t%u\t%u\t%u\t%llu\t%u\n", r->copyKind,
                      r->srcKind, r->dstKind, static_cast<unsigned long long>(r->bytes), r->flags);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const auto* r = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        std::snprintf(line, sizeof(line), "act\tmemory2\t%u\t%u\t%llu\t%u\n",
                      static_cast<unsigned>(r->memoryOperationType),
                      static_cast<unsigned>(r->memoryKind),
                      static_cast<unsigned long long>(r->bytes), static_cast<unsigned>(r->isAsync));
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* r = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        std::snprintf(line, sizeof(line), "act\tkernel\t%s\n", r->name != nullptr ? r->name : "?");
        break;
      }
      default:
        break;
    }
    if (line[0] != '\0') WriteLine(line);
  }
  std::free(buffer);
}

void OnExit() {
  if (g_cupti.ActivityFlushAll != nullptr) {
    g_cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  WriteLine("end\tatexit\n");
}

void* LoadCupti() {
  std::string candidates[6];
  int n = 0;
  if (const char* explicit_path = std::getenv("GWREC_CUPTI")) candidates[n++] = explicit_path;
  candidates[n++] = "libcupti.so.13";
  if (const char* home = std::getenv("CUDA_HOME")) {
    candidates[n++] = std::string(home) + "/lib64/libcupti.so.13";
    candidates[n++] = std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13";
  }
  candidates[n++] = "/usr/local/cuda/lib64/libcupti.so.13";
  candidates[n++] = "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13";
  for (int i = 0; i < n; ++i) {
    if (void* h = dlopen(candidates[i].c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

bool Attach() {
  const char* out = std::getenv("GWREC_OUTPUT");
  std::string path =
      out != nullptr && *out != '\0' ? out : "gwrec." + std::to_string(getpid()) + ".txt";
  g_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (g_fd < 0) {
    std::fprintf(stderr, "gwrec: cannot open %s\n", path.c_str());
    return false;
  }
  void* h = LoadCupti();
  if (h == nullptr) {
    std::fprintf(stderr, "gwrec: cannot load libcupti.so.13 (set GWREC_CUPTI)\n");
    WriteLine("error\tno libcupti\n");
    return false;
  }
  Cupti c;
  if (!cupti_injection::ResolveActivityApi(h, &c) ||
      !cupti_injection::Resolve(h, "cuptiEnableDomain", &c.EnableDomain)) {
    WriteLine("error\tlibcupti lacks a function\n");
    return false;
  }
  cupti_injection::Resolve(h, "cuptiGetCallbackName", &c.GetCallbackName);
  g_cupti = c;
  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult r =
      c.Subscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  if (r != CUPTI_SUCCESS) {
    char line[64];
    std::snprintf(line, sizeof(line), "error\tcuptiSubscribe %d\n", static_cast<int>(r));
    WriteLine(line);
    return false;
  }
  c.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  for (const CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMORY2,
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}) {
    c.ActivityEnable(kind);
  }
  for (const CUpti_CallbackDomain domain :
       {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RESOURCE}) {
    c.EnableDomain(1, subscriber, domain);
  }
  WriteLine("begin\tInitializeInjection\n");
  std::atexit(OnExit);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  return cupti_injection::AttachOnce(Attach);
}

// Also usable through LD_PRELOAD (programs linked with the shared cudart): it
// then subscribes before main, so that multi-threaded programs do not race
// with an attach inside their first CUDA call.
__attribute__((constructor)) static void PreloadConstructor() {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "libgwgpu_recorder") != nullptr) {
    InitializeInjection();
  }
}
