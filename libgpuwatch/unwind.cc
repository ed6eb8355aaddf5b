#include "libgpuwatch/unwind.h"

#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "libgpuwatch/log.h"

namespace gpuwatch {

namespace {

using UnwBacktraceFn = int (*)(void** buffer, int size);

constexpr const char kLibunwindSoname[] = "libunwind.so.8";

// How many of the first raw frames may belong to gpuwatch (and the unwinder)
// before the caller's return address shows up. Two are expected today
// (CaptureRaw and the public entry point); the rest is slack. Frames beyond
// what we ask for cost about 7 ns each, so the slack is small.
constexpr int kMaxOwnFrames = 4;

// Published once by InitUnwinder. -1: not initialised yet. The function
// pointer is stored before the method (release), so a reader that sees the
// method (acquire) also sees the pointer.
constinit std::atomic<int> g_method{-1};
constinit std::atomic<UnwBacktraceFn> g_unw_backtrace{nullptr};
constinit std::once_flag g_init_once;

struct GccUnwindState {
  uintptr_t* pcs;
  int count;
  int max;
};

_Unwind_Reason_Code GccUnwindCallback(_Unwind_Context* context, void* arg) {
  auto* state = static_cast<GccUnwindState*>(arg);
  if (state->count >= state->max) return _URC_END_OF_STACK;
  const uintptr_t ip = _Unwind_GetIP(context);
  if (ip == 0) return _URC_END_OF_STACK;
  state->pcs[state->count++] = ip;
  return _URC_NO_REASON;
}

// Fills `buffer` with raw frames, our own frames included. Kept out of line
// so that the frames above it are predictable; the caller finds where its own
// caller starts by matching __builtin_return_address, not by counting.
__attribute__((noinline)) int CaptureRaw(UnwindMethod method, UnwBacktraceFn unw_backtrace,
                                         uintptr_t* buffer, int size) {
  int n = 0;
  switch (method) {
    case UnwindMethod::kLibunwind:
      if (unw_backtrace != nullptr) n = unw_backtrace(reinterpret_cast<void**>(buffer), size);
      break;
    case UnwindMethod::kGccUnwind: {
      GccUnwindState state{buffer, 0, size};
      _Unwind_Backtrace(&GccUnwindCallback, &state);
      n = state.count;
      break;
    }
    case UnwindMethod::kNone:
      break;
  }
  // Keeps this from being a sibling call, so our frame layout stays simple.
  asm volatile("" ::: "memory");
  return std::clamp(n, 0, size);
}

// Captures with `method` and copies the frames that start at `caller_ra`
// (plus `skip`) into pcs.
int CaptureFrom(uintptr_t caller_ra, UnwindMethod method, UnwBacktraceFn unw_backtrace,
                uintptr_t* pcs, int max_depth, int skip) {
  if (max_depth <= 0 || method == UnwindMethod::kNone) return 0;
  // Clamped first so that the sum below cannot overflow.
  skip = std::clamp(skip, 0, kMaxCaptureDepth);
  max_depth = std::min(max_depth, kMaxCaptureDepth);
  uintptr_t buffer[kMaxCaptureDepth];
  const int want = std::min(kMaxOwnFrames + skip + max_depth, kMaxCaptureDepth);
  const int n = CaptureRaw(method, unw_backtrace, buffer, want);
  // Find the caller's frame. Matching the return address rather than counting
  // our own frames stays right whether the compiler inlined or sibling-called
  // anything between the entry point and the unwinder.
  int first = -1;
  for (int i = 0; i < std::min(n, kMaxOwnFrames); ++i) {
    if (buffer[i] == caller_ra) {
      first = i;
      break;
    }
  }
  if (first < 0) return 0;  // not expected; an empty stack beats a wrong one
  const int begin = first + skip;
  if (begin >= n) return 0;
  const int count = std::min(n - begin, max_depth);
  std::memcpy(pcs, buffer + begin, static_cast<size_t>(count) * sizeof(uintptr_t));
  return count;
}

}  // namespace

const char* UnwindMethodName(UnwindMethod method) {
  switch (method) {
    case UnwindMethod::kLibunwind:
      return "libunwind";
    case UnwindMethod::kGccUnwind:
      return "gcc_unwind";
    case UnwindMethod::kNone:
      break;
  }
  return "none";
}

namespace internal {

UnwinderFns LoadUnwinder(const char* libunwind_soname) {
  UnwinderFns fns;
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer builds: libunwind (not instrumented) frees a thread's
  // trace cache from a thread-specific-data destructor that locks a mutex
  // after TSan has finished the thread, and the exiting thread crashes inside
  // TSan. So they unwind with libgcc.
  (void)libunwind_soname;
  fns.method = UnwindMethod::kGccUnwind;
  return fns;
#endif
  // RTLD_LOCAL: see the header. The handle is deliberately never closed; the
  // function pointer must stay valid for the life of the process.
  void* handle = dlopen(libunwind_soname, RTLD_LOCAL | RTLD_NOW);
  if (handle != nullptr) {
    // unw_backtrace is a macro in <libunwind.h>; the exported name in
    // Debian's 1.6.2 is the plain `unw_backtrace`.
    fns.unw_backtrace = reinterpret_cast<UnwBacktraceFn>(dlsym(handle, "unw_backtrace"));
  }
  if (fns.unw_backtrace != nullptr) {
    fns.method = UnwindMethod::kLibunwind;
    return fns;
  }
  const char* why = handle == nullptr ? dlerror() : "unw_backtrace not found in it";
  Warn("cannot use %s (%s); capturing stacks with _Unwind_Backtrace, about 10x slower",
       libunwind_soname, why != nullptr ? why : "unknown error");
  fns.method = UnwindMethod::kGccUnwind;
  return fns;
}

}  // namespace internal

void InitUnwinder() {
  if (g_method.load(std::memory_order_acquire) >= 0) return;
  std::call_once(g_init_once, [] {
    const internal::UnwinderFns fns = internal::LoadUnwinder(kLibunwindSoname);
    g_unw_backtrace.store(fns.unw_backtrace, std::memory_order_relaxed);
    g_method.store(static_cast<int>(fns.method), std::memory_order_release);
  });
}

UnwindMethod ActiveUnwindMethod() {
  InitUnwinder();
  return static_cast<UnwindMethod>(g_method.load(std::memory_order_acquire));
}

bool UnwinderAvailable() { return ActiveUnwindMethod() != UnwindMethod::kNone; }

__attribute__((noinline)) int CaptureStack(uintptr_t* pcs, int max_depth, int skip) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  int method = g_method.load(std::memory_order_acquire);
  if (method < 0) {
    InitUnwinder();
    method = g_method.load(std::memory_order_acquire);
  }
  const int n = CaptureFrom(caller_ra, static_cast<UnwindMethod>(method),
                            g_unw_backtrace.load(std::memory_order_relaxed), pcs, max_depth, skip);
  asm volatile("" ::: "memory");
  return n;
}

__attribute__((noinline)) int CaptureStackWith(UnwindMethod method, uintptr_t* pcs, int max_depth,
                                               int skip) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  InitUnwinder();
  UnwBacktraceFn unw_backtrace = g_unw_backtrace.load(std::memory_order_relaxed);
  if (method == UnwindMethod::kLibunwind && unw_backtrace == nullptr) return 0;
  const int n = CaptureFrom(caller_ra, method, unw_backtrace, pcs, max_depth, skip);
  asm volatile("" ::: "memory");
  return n;
}

}  // namespace gpuwatch
