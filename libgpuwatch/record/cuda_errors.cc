#include "libgpuwatch/record/cuda_errors.h"

#include <cstring>
#include <mutex>

#include "libgpuwatch/base/clock.h"

namespace gpuwatch {

namespace {

struct ErrorNames {
  int code;
  const char* runtime;
  const char* driver;
};

// The codes a report names: those a failing program most often meets. The
// runtime's and the driver's numbers agree for each.
constexpr ErrorNames kErrorNames[] = {
    {1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE"},
    {2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED"},
    {100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE"},
    {101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"},
    {201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT"},
    {214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE"},
    {400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE"},
    {500, "cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND"},
    {600, "cudaErrorNotReady", "CUDA_ERROR_NOT_READY"},
    {700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {701, "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {702, "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
    {705, "cudaErrorPeerAccessNotEnabled", "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
    {709, "cudaErrorContextIsDestroyed", "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {710, "cudaErrorAssert", "CUDA_ERROR_ASSERT"},
    {712, "cudaErrorHostMemoryAlreadyRegistered", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
    {713, "cudaErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
    {714, "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR"},
    {715, "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
    {716, "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {717, "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE"},
    {718, "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC"},
    {719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"},
    {800, "cudaErrorNotPermitted", "CUDA_ERROR_NOT_PERMITTED"},
    {801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED"},
    {999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN"},
};

void CopyName(char* to, const char* from) {
  if (from == nullptr) from = "";
  std::strncpy(to, from, CudaErrors::kApiBytes - 1);
  to[CudaErrors::kApiBytes - 1] = '\0';
}

}  // namespace

const char* CudaErrorName(ApiDomain domain, int code) {
  for (const ErrorNames& e : kErrorNames) {
    if (e.code == code) return domain == ApiDomain::kRuntime ? e.runtime : e.driver;
  }
  return "";
}

bool IsStickyCudaError(int code) {
  switch (code) {
    case 214:  // ECC uncorrectable
    case 700:  // illegal address
    case 702:  // launch timeout
    case 710:  // device-side assert
    case 714:  // hardware stack error
    case 715:  // illegal instruction
    case 716:  // misaligned address
    case 717:  // invalid address space
    case 718:  // invalid pc
    case 719:  // launch failure
      return true;
    default:
      return false;
  }
}

bool IsExpectedCudaError(int code) {
  switch (code) {
    case 2:    // out of memory: the OOM report
    case 600:  // not ready: a query's answer
    case 704:  // peer access already enabled
    case 705:  // peer access not enabled
    case 712:  // host memory already registered
    case 713:  // host memory not registered
      return true;
    default:
      return false;
  }
}

CudaErrors::CudaErrors() : start_ticks_(Ticks()), start_mono_ns_(MonotonicNs()) {}

CudaErrors::Ring* CudaErrors::ClaimRing(uint32_t context_uid) {
  for (Ring& r : rings_) {
    uint32_t uid = r.context_uid.load(std::memory_order_relaxed);
    if (uid == 0 && r.context_uid.compare_exchange_strong(uid, context_uid)) return &r;
    if (uid == context_uid) return &r;
  }
  return nullptr;  // more contexts than rings: their launches are not kept
}

int CudaErrors::IndexOfCall(const CudaErrorEvent& e, const char* api) const {
  for (int i = 0; i < call_count_; ++i) {
    const Call& c = calls_[i];
    if (c.first.domain == e.domain && c.first.code == e.code &&
        std::strncmp(c.api, api, kApiBytes - 1) == 0) {
      return i;
    }
  }
  return -1;
}

bool CudaErrors::HasSticky(uint32_t context_uid) const {
  const int n = sticky_count_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    if (sticky_[i].error.context_uid == context_uid) return true;
  }
  return false;
}

bool CudaErrors::KeepsNew(const CudaErrorEvent& e) const {
  if (IsExpectedCudaError(e.code)) return false;
  const std::lock_guard<Mutex> lock(mu_);
  if (call_count_ < kMaxCalls && IndexOfCall(e, e.api != nullptr ? e.api : "") < 0) {
    return true;
  }
  return IsStickyCudaError(e.code) && sticky_count_.load(std::memory_order_relaxed) < kContexts &&
         !HasSticky(e.context_uid);
}

void CudaErrors::SetFirstStack(const CudaErrorEvent& e, uint32_t stack_id) {
  const std::lock_guard<Mutex> lock(mu_);
  if (const int i = IndexOfCall(e, e.api != nullptr ? e.api : ""); i >= 0) {
    if (calls_[i].first.stack_id == 0) calls_[i].first.stack_id = stack_id;
  }
  const int n = sticky_count_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    CudaErrorEvent& kept = sticky_[i].error;
    if (kept.context_uid == e.context_uid && kept.stack_id == 0) kept.stack_id = stack_id;
  }
}

bool CudaErrors::OnError(const CudaErrorEvent& e) {
  if (IsExpectedCudaError(e.code)) return false;
  const char* api = e.api != nullptr ? e.api : "";
  const std::lock_guard<Mutex> lock(mu_);
  const int found = IndexOfCall(e, api);
  Call* call = found >= 0 ? &calls_[found] : nullptr;
  bool kept_new = false;
  if (call == nullptr && call_count_ < kMaxCalls) {
    call = &calls_[call_count_++];
    call->first = e;
    call->first.api = nullptr;
    CopyName(call->api, api);
    kept_new = true;
  }
  if (call != nullptr) {
    ++call->count;
    call->last_ns = e.now_ns;
  } else {
    ++calls_not_kept_;
  }
  if (!IsStickyCudaError(e.code)) return kept_new;
  if (HasSticky(e.context_uid)) return kept_new;  // its first is kept
  const int n = sticky_count_.load(std::memory_order_relaxed);
  if (n == kContexts) return kept_new;
  Sticky& s = sticky_[n];
  s.error = e;
  s.error.api = nullptr;
  CopyName(s.api, api);
  // The launches since the last successful synchronization, oldest first,
  // their ticks turned into the tracker's clock: each is `now_ns` less its
  // age, at the rate Ticks() advanced since the table was made.
  const uint64_t ticks_now = Ticks();
  const uint64_t mono_now = MonotonicNs();
  const double ns_per_tick = ticks_now > start_ticks_
                                 ? static_cast<double>(mono_now - start_mono_ns_) /
                                       static_cast<double>(ticks_now - start_ticks_)
                                 : 1.0;
  if (Ring* ring = FindRing(e.context_uid); ring != nullptr) {
    const uint64_t next = ring->next.load(std::memory_order_acquire);
    const uint64_t synced = ring->synced.load(std::memory_order_relaxed);
    uint64_t from = synced < next ? synced : next;
    if (next - from > kRing) {
      s.kernels_not_kept = next - from - kRing;
      from = next - kRing;
    }
    for (uint64_t i = from; i < next; ++i) {
      const Launch& l = ring->launches[i % kRing];
      Launch& kept = s.kernels[s.kernel_count++];
      kept.name_id.store(l.name_id.load(std::memory_order_relaxed), std::memory_order_relaxed);
      kept.stream.store(l.stream.load(std::memory_order_relaxed), std::memory_order_relaxed);
      const uint64_t ticks = l.ticks.load(std::memory_order_relaxed);
      const auto age = static_cast<uint64_t>(
          static_cast<double>(ticks_now > ticks ? ticks_now - ticks : 0) * ns_per_tick);
      kept.ticks.store(e.now_ns > age ? e.now_ns - age : 0, std::memory_order_relaxed);
    }
  }
  sticky_count_.store(n + 1, std::memory_order_release);
  return true;
}

CudaErrorsSnapshot CudaErrors::Snapshot(const KernelTable& kernels) const {
  CudaErrorsSnapshot out;
  const std::lock_guard<Mutex> lock(mu_);
  for (int i = 0; i < call_count_; ++i) {
    const Call& c = calls_[i];
    out.calls.push_back({c.first, c.api, c.count, c.last_ns});
  }
  out.calls_not_kept = calls_not_kept_;
  const int n = sticky_count_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const Sticky& s = sticky_[i];
    StickyCudaError& e = out.sticky.emplace_back();
    e.error = s.error;
    e.api = s.api;
    e.kernels_not_kept = s.kernels_not_kept;
    for (int k = 0; k < s.kernel_count; ++k) {
      const Launch& launch = s.kernels[k];
      const uint32_t id = launch.name_id.load(std::memory_order_relaxed);
      const char* name = kernels.NameOf(id);
      e.kernels.push_back({name != nullptr ? name : "", kernels.SiteOf(id),
                           launch.stream.load(std::memory_order_relaxed),
                           launch.ticks.load(std::memory_order_relaxed)});
    }
  }
  return out;
}

}  // namespace gpuwatch
