#include "libgpuwatch/symbolize/libdw.h"

#include <dlfcn.h>

#include <type_traits>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

using internal::LibdwApi;

const LibdwApi* LoadLibdw(const char* soname) {
  // Lazily bound: of the ~280 calls libdw, libelf and libz make to each
  // other and to libc, a report reaches a few dozen, so binding all of them
  // when it loads costs a tiny process's exit more than it ever uses. Only
  // reports call libdw (never a CUDA callback), and each first call binds
  // through a library it lists as needed: no loader lock is taken there.
  void* handle = dlopen(soname, RTLD_LOCAL | RTLD_LAZY);
  if (handle == nullptr) {
    const char* why = dlerror();
    Warn("cannot load %s (%s); reports show functions and modules without file:line", soname,
         why != nullptr ? why : "unknown error");
    return nullptr;
  }
  auto* api = new LibdwApi{};
  const char* missing = nullptr;
  auto lookup = [&](const char* name, auto* fn) {
    if (missing != nullptr) return;
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(handle, name));
    if (*fn == nullptr) missing = name;
  };
#define GPUWATCH_LIBDW_LOOKUP(name) lookup(#name, &api->name);
  GPUWATCH_LIBDW_FUNCTIONS(GPUWATCH_LIBDW_LOOKUP)
#undef GPUWATCH_LIBDW_LOOKUP
  if (missing != nullptr) {
    Warn("%s lacks %s; reports show functions and modules without file:line", soname, missing);
    delete api;
    return nullptr;  // the handle stays open; harmless, and closing could race
  }
  return api;
}

const LibdwApi* DefaultLibdw() {
  static const LibdwApi* const api = LoadLibdw("libdw.so.1");
  return api;
}

Mutex& LibdwMutex() {
  static auto* const mu = new Mutex;  // leaked: exit order cannot bite
  return *mu;
}

}  // namespace gpuwatch
