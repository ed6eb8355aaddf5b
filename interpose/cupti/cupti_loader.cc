#include "interpose/cupti/cupti_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace gpuwatch {

namespace {

constexpr const char* kSoname = "libcupti.so.13";

// Directories of loaded objects whose name contains `needle` (e.g. the
// directory of libpython3.11.so or of torch's libc10.so).
std::vector<std::string> LoadedObjectDirs(const char* needle) {
  struct Ctx {
    const char* needle;
    std::vector<std::string> dirs;
  } ctx{needle, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Ctx*>(data);
        if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, c->needle) == nullptr) {
          return 0;
        }
        std::string_view name(info->dlpi_name);
        const size_t slash = name.rfind('/');
        if (slash != std::string_view::npos) c->dirs.emplace_back(name.substr(0, slash));
        return 0;
      },
      &ctx);
  return ctx.dirs;
}

template <typename T>
bool Resolve(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(RealDlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  using Dlsym = void* (*)(void*, const char*);
  static std::atomic<Dlsym> real{nullptr};
  Dlsym fn = real.load(std::memory_order_acquire);
  if (fn == nullptr) {
    // dlvsym is not interposed: the next dlsym after gpuwatch's.
    void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    fn = reinterpret_cast<Dlsym>(found);
    if (fn == nullptr) return nullptr;
    real.store(fn, std::memory_order_release);
  }
  return fn(handle, name);
}

std::vector<std::string> CuptiSearchList(const std::string& explicit_path) {
  // A library the user named is the only one tried: silently profiling with
  // another CUPTI than the one asked for would be worse than not at all.
  if (!explicit_path.empty()) return {explicit_path};
  std::vector<std::string> list;
  list.emplace_back(kSoname);  // already loaded, LD_LIBRARY_PATH, ldconfig
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);  // NOLINT(concurrency-mt-unsafe): init only
    if (root == nullptr || *root == '\0') continue;
    list.push_back(std::string(root) + "/lib64/" + kSoname);
    list.push_back(std::string(root) + "/extras/CUPTI/lib64/" + kSoname);
  }
  list.push_back(std::string("/usr/local/cuda/lib64/") + kSoname);
  list.push_back(std::string("/usr/local/cuda/extras/CUPTI/lib64/") + kSoname);
  // pip wheels: torch ships next to nvidia/cuda_cupti (CUDA 12 layout) or
  // nvidia/cu13 (CUDA 13 layout) in the same site-packages.
  for (const std::string& dir : LoadedObjectDirs("/torch/lib/")) {
    const std::string site = dir.substr(0, dir.rfind("/torch/lib"));
    list.push_back(site + "/nvidia/cu13/lib/" + kSoname);
    list.push_back(site + "/nvidia/cuda_cupti/lib/" + kSoname);
  }
  return list;
}

bool LoadCupti(const std::string& explicit_path, CuptiApi* api, std::string* error) {
  std::string tried;
  for (const std::string& candidate : CuptiSearchList(explicit_path)) {
    // RTLD_LOCAL: CUPTI's symbols must not become visible to the host.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      if (!explicit_path.empty()) {
        const char* why = dlerror();
        *error = "cannot load " + explicit_path + " named by GPUWATCH_CUPTI_LIBRARY (" +
                 (why != nullptr ? why : "?") + ")";
        return false;
      }
      continue;
    }
    CuptiApi found;
    found.handle = handle;
    found.path = candidate;
    const bool ok = Resolve(handle, "cuptiSubscribe", &found.Subscribe) &&
                    Resolve(handle, "cuptiUnsubscribe", &found.Unsubscribe) &&
                    Resolve(handle, "cuptiEnableCallback", &found.EnableCallback) &&
                    Resolve(handle, "cuptiEnableDomain", &found.EnableDomain) &&
                    Resolve(handle, "cuptiGetResultString", &found.GetResultString);
    Resolve(handle, "cuptiSubscribe_v2", &found.SubscribeV2);
    Resolve(handle, "cuptiGetCallbackState", &found.GetCallbackState);
    Resolve(handle, "cuptiActivityRegisterCallbacks", &found.ActivityRegisterCallbacks);
    Resolve(handle, "cuptiActivityEnable", &found.ActivityEnable);
    Resolve(handle, "cuptiActivityFlushAll", &found.ActivityFlushAll);
    Resolve(handle, "cuptiActivityGetNextRecord", &found.ActivityGetNextRecord);
    Resolve(handle, "cuptiActivityDisable", &found.ActivityDisable);
    Resolve(handle, "cuptiActivityGetNumDroppedRecords", &found.ActivityGetNumDroppedRecords);
    Resolve(handle, "cuptiActivityGetAttribute", &found.ActivityGetAttribute);
    Resolve(handle, "cuptiActivitySetAttribute", &found.ActivitySetAttribute);
    Resolve(handle, "cuptiGetTimestamp", &found.GetTimestamp);
    Resolve(handle, "cuptiGetDeviceId", &found.GetDeviceId);
    Resolve(handle, "cuptiGetGraphNodeId", &found.GetGraphNodeId);
    Resolve(handle, "cuptiGetVersion", &found.GetVersion);
    if (!ok) {
      tried += candidate + " (missing CUPTI functions); ";
      continue;  // keep it loaded: unloading a half-initialised library is riskier
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(found.Subscribe), &info) != 0 && info.dli_fname) {
      found.path = info.dli_fname;
    }
    *api = found;
    return true;
  }
  *error = "cannot load " + std::string(kSoname) + " (" + tried +
           "set GPUWATCH_CUPTI_LIBRARY or CUDA_HOME)";
  return false;
}

}  // namespace gpuwatch
