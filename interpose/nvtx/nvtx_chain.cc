// NVTX chaining (nvtx.h): the NVTX tool gpuwatch took
// NVTX_INJECTION64_PATH from, loaded once, and its entry point, which
// nvtx.cc's injection calls first; and the one gpuwatch left alone.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {

// The tool gpuwatch chains to, and one it left NVTX_INJECTION64_PATH to.
std::string& OtherNvtxTool() {
  static auto* path = new std::string();
  return *path;
}
std::string& LeftAlone() {
  static auto* path = new std::string();
  return *path;
}

// The tool gpuwatch chains to: its path, and its library, loaded once
// (null: none, or it cannot be loaded, which is said in one line).
struct ChainedTool {
  std::string path;
  void* library = nullptr;
};
const ChainedTool& Chained() {
  static const ChainedTool* const tool = [] {
    auto* t = new ChainedTool();  // never destroyed: NVTX may call in during exit
    t->path = OtherNvtxTool();
    if (t->path.empty()) {
      const char* chain = std::getenv("GPUWATCH_NVTX_CHAIN");  // NOLINT(concurrency-mt-unsafe)
      if (chain != nullptr) t->path = chain;
    }
    if (t->path.empty()) return t;
    t->library = dlopen(t->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (t->library == nullptr) {
      const char* why = dlerror();
      Warn("cannot chain NVTX to %s (%s); NVTX ranges go to gpuwatch alone", t->path.c_str(),
           why != nullptr ? why : "dlopen failed");
    }
    return t;
  }();
  return *tool;
}

// The other tool's entry point, looked up once (null: none; said in one line).
}  // namespace

namespace nvtx_internal {
NvtxEntryPoint ChainedEntryPoint() {
  static const NvtxEntryPoint entry = [] {
    void* fn = ChainedNvtxSymbol("InitializeInjectionNvtx2");
    if (fn == nullptr && Chained().library != nullptr) {
      Warn(
          "cannot chain NVTX to %s (it has no InitializeInjectionNvtx2); NVTX ranges go to "
          "gpuwatch alone",
          Chained().path.c_str());
    }
    return reinterpret_cast<NvtxEntryPoint>(fn);
  }();
  return entry;
}
}  // namespace nvtx_internal

void* ChainedNvtxSymbol(const char* name) {
  void* library = Chained().library;
  return library != nullptr ? dlsym(library, name) : nullptr;
}

void PointNvtxAtSelf(const std::string& self) {
  if (self.empty()) return;
  const char* current = std::getenv("NVTX_INJECTION64_PATH");  // NOLINT(concurrency-mt-unsafe)
  if (current == nullptr || *current == '\0') {
    setenv("NVTX_INJECTION64_PATH", self.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    return;
  }
  if (self == current) return;
  // Another tool's: chain to it when it is there to load, else leave it.
  if (access(current, R_OK) != 0) {
    LeftAlone() = current;
    return;
  }
  OtherNvtxTool() = current;
  setenv("GPUWATCH_NVTX_CHAIN", current, 1);         // NOLINT(concurrency-mt-unsafe)
  setenv("NVTX_INJECTION64_PATH", self.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
}

int InitializeNvtxChainOnly(NvtxExportTableGetter get_export_table) {
  const nvtx_internal::NvtxEntryPoint chained = nvtx_internal::ChainedEntryPoint();
  return chained != nullptr ? chained(get_export_table) : 0;
}

std::string NvtxNotice() {
  const std::string& other = LeftAlone();
  if (other.empty()) return "";
  return "NVTX_INJECTION64_PATH names " + other +
         ", which cannot be read: NVTX ranges are left to it, and this report has no NVTX phases";
}

}  // namespace gpuwatch
