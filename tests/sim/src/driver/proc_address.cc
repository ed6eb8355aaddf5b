// cuGetProcAddress: how the (real and fake) runtime reaches the driver.
//
// The table holds the driver's own entry points; the library is linked with
// -Bsymbolic-functions, so what it hands out are its own functions even when a preloaded
// library interposes the same cu* names, as with the real driver.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "driver/cuda_headers.h"
#include "driver/state.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

struct Entry {
  std::string_view symbol;
  std::string base;  // the name callers ask for: no _vN, _ptds or _ptsz suffix
  bool per_thread = false;
  int version = 1;
  void* fn = nullptr;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Entry MakeEntry(std::string_view symbol, void* fn) {
  Entry e;
  e.symbol = symbol;
  e.fn = fn;
  std::string_view base = symbol;
  if (EndsWith(base, "_ptds") || EndsWith(base, "_ptsz")) {
    e.per_thread = true;
    base.remove_suffix(5);
  }
  const size_t v = base.rfind("_v");
  if (v != std::string_view::npos && v + 2 < base.size() &&
      base.find_first_not_of("0123456789", v + 2) == std::string_view::npos) {
    e.version = std::stoi(std::string(base.substr(v + 2)));
    base = base.substr(0, v);
  }
  e.base = std::string(base);
  return e;
}

const std::vector<Entry>& Table() {
  static const auto* const table = [] {
    auto* t = new std::vector<Entry>();
// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is a function name, not an expression
#define X(name) t->push_back(MakeEntry(#name, reinterpret_cast<void*>(&name)));
#include "driver/exports.inc"
#undef X
    return t;
  }();
  return *table;
}

// The CUDA version from which a newer ABI is handed out under its base name (cudaTypedefs.h:
// PFN_cuGetProcAddress_v12000, PFN_cuCtxSynchronize_v13000, whose v2 takes a context,
// PFN_cuIpcOpenMemHandle_v11000); older versions get the older ABI.
int FirstCudaVersion(const Entry& e) {
  if (e.base == "cuGetProcAddress" && e.version == 2) return 12000;
  if (e.base == "cuIpcOpenMemHandle" && e.version == 2) return 11000;
  if (e.base == "cuCtxSynchronize" && e.version == 2) return 13000;
  return 0;
}

CUresult Lookup(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool want_per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Entry* best = nullptr;
  for (const Entry& e : Table()) {
    // An exact ABI name with a suffix (cuMemAlloc_v2): lenient, the real driver wants base names.
    if (e.symbol == symbol && e.symbol != e.base) {
      best = &e;
      break;
    }
    if (e.base != symbol) continue;
    // The newest version the caller's CUDA version knows.
    if (cuda_version < FirstCudaVersion(e)) continue;
    if (best == nullptr) {
      best = &e;
      continue;
    }
    const bool fits = e.per_thread == want_per_thread;
    const bool best_fits = best->per_thread == want_per_thread;
    if ((fits && !best_fits) || (fits == best_fits && e.version > best->version)) best = &e;
  }
  if (best == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = best->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                               cuuint64_t flags) {
  return TraceDriver(GWSIM_DRV(cuGetProcAddress),
                     cuGetProcAddress_params{symbol, pfn, cudaVersion, flags}, [&] {
                       if (NoDriver()) return CUDA_ERROR_NOT_INITIALIZED;
                       return Lookup(symbol, pfn, cudaVersion, flags, nullptr);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                  cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult* symbolStatus) {
  return TraceDriver(GWSIM_DRV(cuGetProcAddress_v2),
                     cuGetProcAddress_v2_params{symbol, pfn, cudaVersion, flags, symbolStatus},
                     [&] {
                       if (NoDriver()) return CUDA_ERROR_NOT_INITIALIZED;
                       return Lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
                     });
}
