// CUDA calls that returned an error, the first sticky error of each context
// (a kernel's fault: every later call on the context returns it), and the
// kernels launched on each context since its last successful
// synchronization, which is where a user starts looking.
//
// The launch path (OnLaunch) and the synchronization path (OnSynced) are a
// few relaxed stores into a fixed ring per context: no lock, no allocation.
// A kernel's launch site is the stack of its first launch (one capture per
// kernel name: KernelTable::NeedsSite/SetSite), not of each launch. The error path
// (OnError) runs only for a call whose return value is not success, and
// takes a mutex.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_CUDA_ERRORS_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_CUDA_ERRORS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/kernels.h"

namespace gpuwatch {

// Which API a call and its error code belong to (cudaError_t or CUresult).
enum class ApiDomain : uint8_t { kRuntime, kDriver };

// "cudaErrorIllegalAddress" / "CUDA_ERROR_ILLEGAL_ADDRESS"; "" for a code
// not named here.
const char* CudaErrorName(ApiDomain domain, int code);
// An error that leaves the context unusable until the process ends (a
// kernel's fault: illegal address, launch failure, ...). The runtime's and
// the driver's codes of these are the same numbers.
bool IsStickyCudaError(int code);
// A failure a program expects and handles, not counted as an error: out of
// memory (the OOM report has it), not ready (queries), peer access already
// enabled or not enabled, host memory already registered or not registered.
bool IsExpectedCudaError(int code);

// A call that failed: with what, where and when.
struct CudaErrorEvent {
  ApiDomain domain = ApiDomain::kRuntime;
  int code = 0;
  uint32_t context_uid = 0;
  int32_t device = 0;
  uint32_t stack_id = 0;
  uint64_t now_ns = 0;
  const char* api = nullptr;  // CUPTI's function name; copied when kept (null in snapshots)
};

// A kernel launched before the error (report order: oldest first).
struct KernelBeforeError {
  std::string name;  // mangled, as the driver knows it
  uint32_t stack_id = 0;
  uint64_t stream = 0;
  uint64_t launch_ns = 0;
};

// A (call, code) that failed `count` times, `first` the first time.
struct CudaErrorCall {
  CudaErrorEvent first;
  std::string api;
  uint64_t count = 0;
  uint64_t last_ns = 0;
};

// A context's first sticky error, at the call where it surfaced.
struct StickyCudaError {
  CudaErrorEvent error;
  std::string api;
  std::vector<KernelBeforeError> kernels;  // since the last successful synchronization
  uint64_t kernels_not_kept = 0;           // launched since then, beyond the ring
};

struct CudaErrorsSnapshot {
  std::vector<CudaErrorCall> calls;  // first seen first
  uint64_t calls_not_kept = 0;       // failed calls of (call, code) pairs beyond the table
  std::vector<StickyCudaError> sticky;
  bool empty() const { return calls.empty() && sticky.empty(); }
};

class CudaErrors {
 public:
  static constexpr int kContexts = 8;   // contexts with a launch ring
  static constexpr int kRing = 16;      // launches kept per context
  static constexpr int kMaxCalls = 64;  // distinct (call, code) pairs
  static constexpr size_t kApiBytes = 64;

  CudaErrors();
  CudaErrors(const CudaErrors&) = delete;
  CudaErrors& operator=(const CudaErrors&) = delete;

  // A kernel (its KernelTable name id) launched on a context's stream, at
  // `ticks` (base/clock.h's Ticks(): converted to the tracker's clock only
  // when an error keeps the launch).
  void OnLaunch(uint32_t context_uid, uint32_t name_id, uint64_t stream, uint64_t ticks) {
    if (Ring* ring = RingOf(context_uid); ring != nullptr) Queue(ring, name_id, stream, ticks);
  }
  // Whether the context's ring is the first (that of the first context
  // that launched: in a process with one context, every launch's). Then
  // OnLaunchInFirstRing is its OnLaunch, without a search.
  bool FirstRingIs(uint32_t context_uid) const {
    return context_uid != 0 && rings_[0].context_uid.load(std::memory_order_relaxed) == context_uid;
  }
  void OnLaunchInFirstRing(uint32_t name_id, uint64_t stream, uint64_t ticks) {
    Queue(&rings_[0], name_id, stream, ticks);
  }
  // A successful synchronization on the context: the launches before it
  // completed without error.
  void OnSynced(uint32_t context_uid) {
    Ring* ring = FindRing(context_uid);
    if (ring != nullptr) {
      ring->synced.store(ring->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
  }
  // Whether a synchronization of the context may wait for a kernel: one was
  // launched on it since its last successful synchronization (or the rings
  // are all taken by other contexts, and nothing is known). A few loads.
  bool KernelsQueued(uint32_t context_uid) const {
    for (const Ring& r : rings_) {
      const uint32_t uid = r.context_uid.load(std::memory_order_relaxed);
      if (uid == 0) return false;  // no launch on the context yet
      if (uid == context_uid) {
        return r.next.load(std::memory_order_relaxed) != r.synced.load(std::memory_order_relaxed);
      }
    }
    return true;
  }
  // A call returned `e.code`, not success. Expected failures are not kept.
  // Returns whether it kept something new (a (call, code) not counted yet,
  // or a context's first sticky error): then e's stack, captured by the
  // caller outside the lock, goes to SetFirstStack. A failure repeated in a
  // loop is counted under one lock, without capturing its stack again.
  bool OnError(const CudaErrorEvent& e);
  // The stack of what OnError(e) kept new, where it has none yet.
  void SetFirstStack(const CudaErrorEvent& e, uint32_t stack_id);
  // Whether OnError(e) would keep something new (a query: OnError says it too).
  bool KeepsNew(const CudaErrorEvent& e) const;
  // Whether a context has had a sticky error: the run failed.
  bool failed() const { return sticky_count_.load(std::memory_order_relaxed) != 0; }

  // What was recorded, kernels named by `kernels` (their name ids', and
  // their launch sites).
  CudaErrorsSnapshot Snapshot(const KernelTable& kernels) const;

  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

 private:
  struct Launch {
    std::atomic<uint32_t> name_id{0};
    std::atomic<uint64_t> stream{0};
    std::atomic<uint64_t> ticks{0};  // when it was launched; in a Sticky, on the tracker's clock
  };
  struct Ring {
    std::atomic<uint32_t> context_uid{0};  // 0: free
    std::atomic<uint64_t> next{0};         // launches so far
    std::atomic<uint64_t> synced{0};       // `next` at the last successful synchronization
    Launch launches[kRing];
  };
  struct Call {
    CudaErrorEvent first;
    char api[kApiBytes] = {};
    uint64_t count = 0;
    uint64_t last_ns = 0;
  };
  struct Sticky {
    CudaErrorEvent error;
    char api[kApiBytes] = {};
    Launch kernels[kRing];  // copied from the ring at the error
    int kernel_count = 0;
    uint64_t kernels_not_kept = 0;
  };

  // The index of e's (call, code) in calls_; -1 when none. Under mu_.
  int IndexOfCall(const CudaErrorEvent& e, const char* api) const;
  // Whether e's context has its sticky error kept already.
  bool HasSticky(uint32_t context_uid) const;
  Ring* FindRing(uint32_t context_uid) {
    for (Ring& r : rings_) {
      const uint32_t uid = r.context_uid.load(std::memory_order_relaxed);
      if (uid == context_uid) return &r;
      if (uid == 0) return nullptr;
    }
    return nullptr;
  }
  Ring* RingOf(uint32_t context_uid) {
    if (context_uid == 0) return nullptr;
    if (Ring* r = &rings_[0]; r->context_uid.load(std::memory_order_relaxed) == context_uid) {
      return r;
    }
    return ClaimRing(context_uid);
  }
  Ring* ClaimRing(uint32_t context_uid);
  static void Queue(Ring* ring, uint32_t name_id, uint64_t stream, uint64_t ticks) {
    const uint64_t n = ring->next.load(std::memory_order_relaxed);
    Launch& slot = ring->launches[n % kRing];
    slot.name_id.store(name_id, std::memory_order_relaxed);
    slot.stream.store(stream, std::memory_order_relaxed);
    slot.ticks.store(ticks, std::memory_order_relaxed);
    ring->next.store(n + 1, std::memory_order_release);
  }

  // When the table was made, on both clocks: the rate of Ticks().
  uint64_t start_ticks_;
  uint64_t start_mono_ns_;
  Ring rings_[kContexts];
  mutable Mutex mu_;  // the tables below
  Call calls_[kMaxCalls];
  int call_count_ = 0;
  uint64_t calls_not_kept_ = 0;
  Sticky sticky_[kContexts];
  std::atomic<int> sticky_count_{0};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_CUDA_ERRORS_H_
