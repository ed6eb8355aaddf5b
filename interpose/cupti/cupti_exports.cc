// CUPTI's entry points as libgpuwatch.so exports them, and its dlsym: how the
// other CUPTI clients of a process reach the multiplexer (cupti_mux.h).
//
// Preloaded, libgpuwatch.so comes before libcupti in the process's symbol
// lookup, so a client linked against libcupti (PyTorch's Kineto) calls these.
// A client that dlopens libcupti and looks each function up with dlsym on
// that handle (XLA, ctypes) gets them from gpuwatch's dlsym; every other
// lookup goes to the real dlsym untouched, by a tail jump that keeps the
// caller's return address, which RTLD_NEXT lookups depend on. Loaded by the
// driver alone (CUDA_INJECTION64_PATH) none of this is reached: libcupti
// comes first.
//
// With GPUWATCH_SHARE_CUPTI=0 or GPUWATCH_DISABLE=1 each entry point calls
// CUPTI's own, and dlsym hands out CUPTI's.
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>

#include "interpose/cupti/cupti_loader.h"
#include "interpose/cupti/cupti_mux.h"
#include "libgpuwatch/base/config.h"

namespace gpuwatch {

// Whether the other clients share CUPTI through gpuwatch (read once).
bool Shared() {
  static const bool shared = !SharedCuptiOff(std::getenv("GPUWATCH_SHARE_CUPTI"),  // NOLINT
                                             std::getenv("GPUWATCH_DISABLE"));     // NOLINT
  return shared;
}

// CUPTI's own function `name`, for the pass-through.
template <typename Fn>
Fn RealFn(const char* name) {
  const CuptiApi* api = mux::RealForClients();
  return api != nullptr ? reinterpret_cast<Fn>(RealDlsym(api->handle, name)) : nullptr;
}

}  // namespace gpuwatch

// Calls CUPTI's own `name` with the arguments when sharing is off.
#define GPUWATCH_PASS_THROUGH(name, ...)                                      \
  if (!gpuwatch::Shared()) {                                                  \
    static const auto real = gpuwatch::RealFn<decltype(&name)>(#name);        \
    return real != nullptr ? real(__VA_ARGS__) : CUPTI_ERROR_NOT_INITIALIZED; \
  }

using gpuwatch::mux::ClientActivityEnable;

extern "C" {

#define GPUWATCH_EXPORT __attribute__((visibility("default")))

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                                    CUpti_CallbackFunc callback, void* userdata) {
  GPUWATCH_PASS_THROUGH(cuptiSubscribe, subscriber, callback, userdata)
  return gpuwatch::mux::ClientSubscribe(subscriber, callback, userdata, nullptr);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                                       CUpti_CallbackFunc callback, void* userdata,
                                                       CUpti_SubscriberParams* params) {
  GPUWATCH_PASS_THROUGH(cuptiSubscribe_v2, subscriber, callback, userdata, params)
  return gpuwatch::mux::ClientSubscribe(subscriber, callback, userdata, params);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  GPUWATCH_PASS_THROUGH(cuptiUnsubscribe, subscriber)
  return gpuwatch::mux::ClientUnsubscribe(subscriber);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable,
                                                         CUpti_SubscriberHandle subscriber,
                                                         CUpti_CallbackDomain domain,
                                                         CUpti_CallbackId cbid) {
  GPUWATCH_PASS_THROUGH(cuptiEnableCallback, enable, subscriber, domain, cbid)
  return gpuwatch::mux::ClientEnableCallback(enable, subscriber, domain, cbid);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable,
                                                       CUpti_SubscriberHandle subscriber,
                                                       CUpti_CallbackDomain domain) {
  GPUWATCH_PASS_THROUGH(cuptiEnableDomain, enable, subscriber, domain)
  return gpuwatch::mux::ClientEnableDomain(enable, subscriber, domain);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable,
                                                           CUpti_SubscriberHandle subscriber) {
  GPUWATCH_PASS_THROUGH(cuptiEnableAllDomains, enable, subscriber)
  return gpuwatch::mux::ClientEnableAllDomains(enable, subscriber);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t* enable,
                                                           CUpti_SubscriberHandle subscriber,
                                                           CUpti_CallbackDomain domain,
                                                           CUpti_CallbackId cbid) {
  GPUWATCH_PASS_THROUGH(cuptiGetCallbackState, enable, subscriber, domain, cbid)
  return gpuwatch::mux::ClientGetCallbackState(enable, subscriber, domain, cbid);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) {
  GPUWATCH_PASS_THROUGH(cuptiFinalize)
  return gpuwatch::mux::ClientFinalize();
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc request, CUpti_BuffersCallbackCompleteFunc complete) {
  GPUWATCH_PASS_THROUGH(cuptiActivityRegisterCallbacks, request, complete)
  return gpuwatch::mux::ClientActivityRegisterCallbacks(request, complete);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  GPUWATCH_PASS_THROUGH(cuptiActivityEnable, kind)
  return ClientActivityEnable(kind, true);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  GPUWATCH_PASS_THROUGH(cuptiActivityDisable, kind)
  return ClientActivityEnable(kind, false);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  GPUWATCH_PASS_THROUGH(cuptiActivityFlushAll, flag)
  return gpuwatch::mux::ClientActivityFlushAll(flag);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer,
                                                                size_t validBufferSizeBytes,
                                                                CUpti_Activity** record) {
  GPUWATCH_PASS_THROUGH(cuptiActivityGetNextRecord, buffer, validBufferSizeBytes, record)
  return gpuwatch::mux::ClientActivityGetNextRecord(buffer, validBufferSizeBytes, record);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context,
                                                                       uint32_t streamId,
                                                                       size_t* dropped) {
  GPUWATCH_PASS_THROUGH(cuptiActivityGetNumDroppedRecords, context, streamId, dropped)
  return gpuwatch::mux::ClientActivityGetNumDroppedRecords(context, streamId, dropped);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr,
                                                               size_t* valueSize, void* value) {
  GPUWATCH_PASS_THROUGH(cuptiActivitySetAttribute, attr, valueSize, value)
  return gpuwatch::mux::ClientActivitySetAttribute(attr, valueSize, value);
}

GPUWATCH_EXPORT CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr,
                                                               size_t* valueSize, void* value) {
  GPUWATCH_PASS_THROUGH(cuptiActivityGetAttribute, attr, valueSize, value)
  return gpuwatch::mux::ClientActivityGetAttribute(attr, valueSize, value);
}

}  // extern "C"

namespace gpuwatch {
namespace {

struct Export {
  const char* name;
  void* function;
};

// Every CUPTI entry point above, for dlsym.
const Export kExports[] = {
    {"cuptiSubscribe", reinterpret_cast<void*>(&cuptiSubscribe)},
    {"cuptiSubscribe_v2", reinterpret_cast<void*>(&cuptiSubscribe_v2)},
    {"cuptiUnsubscribe", reinterpret_cast<void*>(&cuptiUnsubscribe)},
    {"cuptiEnableCallback", reinterpret_cast<void*>(&cuptiEnableCallback)},
    {"cuptiEnableDomain", reinterpret_cast<void*>(&cuptiEnableDomain)},
    {"cuptiEnableAllDomains", reinterpret_cast<void*>(&cuptiEnableAllDomains)},
    {"cuptiGetCallbackState", reinterpret_cast<void*>(&cuptiGetCallbackState)},
    {"cuptiFinalize", reinterpret_cast<void*>(&cuptiFinalize)},
    {"cuptiActivityRegisterCallbacks", reinterpret_cast<void*>(&cuptiActivityRegisterCallbacks)},
    {"cuptiActivityEnable", reinterpret_cast<void*>(&cuptiActivityEnable)},
    {"cuptiActivityDisable", reinterpret_cast<void*>(&cuptiActivityDisable)},
    {"cuptiActivityFlushAll", reinterpret_cast<void*>(&cuptiActivityFlushAll)},
    {"cuptiActivityGetNextRecord", reinterpret_cast<void*>(&cuptiActivityGetNextRecord)},
    {"cuptiActivityGetNumDroppedRecords",
     reinterpret_cast<void*>(&cuptiActivityGetNumDroppedRecords)},
    {"cuptiActivitySetAttribute", reinterpret_cast<void*>(&cuptiActivitySetAttribute)},
    {"cuptiActivityGetAttribute", reinterpret_cast<void*>(&cuptiActivityGetAttribute)},
};

void* ExportNamed(const char* name) {
  for (const Export& e : kExports) {
    if (std::strcmp(e.name, name) == 0) return e.function;
  }
  return nullptr;
}

// Whether `handle` (a dlopen handle: glibc's link map) is a libcupti.
bool IsCuptiHandle(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return false;
  }
  const char* base = std::strrchr(map->l_name, '/');
  base = base != nullptr ? base + 1 : map->l_name;
  return std::strncmp(base, "libcupti.so", 11) == 0;
}

}  // namespace

// A CUPTI function looked up on a libcupti handle: gpuwatch's entry point
// when it has one and sharing is on (and the library has the function).
bool RouteCuptiLookup(void* handle, const char* name, void** answer) {
  if (!Shared()) return false;
  void* ours = ExportNamed(name);
  if (ours == nullptr || !IsCuptiHandle(handle) || RealDlsym(handle, name) == nullptr) {
    return false;
  }
  *answer = ours;
  return true;
}

}  // namespace gpuwatch

// Decides one dlsym call for the stub below: returns the real dlsym for the
// stub to jump to, or null with the answer in `*answer`. A sanitizer's
// runtime looks its interceptors up through dlsym before its shadow memory
// exists: the common path touches no instrumented code and calls nothing
// but dlvsym once.
extern "C"
    __attribute__((visibility("hidden"), no_sanitize("address", "undefined", "thread"))) void*
    gpuwatch_dlsym_route(void* handle, const char* name, void** answer) {
  static void* next = nullptr;  // the dlsym after gpuwatch's
  void* real_dlsym = __atomic_load_n(&next, __ATOMIC_RELAXED);
  if (real_dlsym == nullptr) {
    real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (real_dlsym == nullptr) real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (real_dlsym == nullptr) {
      *answer = nullptr;
      return nullptr;
    }
    __atomic_store_n(&next, real_dlsym, __ATOMIC_RELAXED);
  }
  const bool cupti = name != nullptr && name[0] == 'c' && name[1] == 'u' && name[2] == 'p' &&
                     name[3] == 't' && name[4] == 'i';
  if (!cupti || handle == RTLD_DEFAULT || handle == RTLD_NEXT) return real_dlsym;
  return gpuwatch::RouteCuptiLookup(handle, name, answer) ? nullptr : real_dlsym;
}

#if defined(__x86_64__)
// dlsym: asks gpuwatch_dlsym_route, then either returns its answer or jumps
// to the real dlsym with the caller's arguments and return address intact.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $24, %rsp
  .cfi_adjust_cfa_offset 24
  leaq 8(%rsp), %rdx
  call gpuwatch_dlsym_route
  movq 8(%rsp), %rcx
  addq $24, %rsp
  .cfi_adjust_cfa_offset -24
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  jmp *%rax
1:
  movq %rcx, %rax
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#endif
