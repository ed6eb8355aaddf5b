// Native stack capture for the calling thread.
//
// gpuwatch records a stack on every allocation, so capture must be cheap and
// must not disturb the host. The fast path is libunwind's unw_backtrace, which
// caches unwind information per thread (about 250 ns for 32 frames here).
//
// Hazard: Debian's libunwind.so.8 exports the whole `_Unwind_*` family and a
// weak `backtrace`. Linked as a normal dependency of a preloaded library it
// would take over C++ exception unwinding of the entire host process, and
// Debian's libunwind.a is not PIC. So libunwind is never a link dependency:
// it is loaded with dlopen(RTLD_LOCAL) on first use and only `unw_backtrace`
// is looked up with dlsym. RTLD_LOCAL keeps every libunwind symbol out of the
// global scope, so symbol resolution of the host is unchanged.
//
// When libunwind.so.8 cannot be loaded, capture falls back to libgcc's
// `_Unwind_Backtrace` (the unwinder the process already uses for exceptions).
// It is correct on code without frame pointers (Debian libraries, CPython, the
// CUDA libraries) but roughly 10x slower; one warning line says so. A
// frame-pointer walk would be faster still, but it produces wrong or truncated
// stacks through exactly those libraries and can fault on a bad frame pointer,
// so it is not used.
//
// Every pc returned is a return address (the instruction after a call),
// including pcs[0]. Symbolizers must look up `pc - 1` to find the line of the
// call itself; Symbolizer does so.
#ifndef GPUWATCH_LIBGPUWATCH_UNWIND_H_
#define GPUWATCH_LIBGPUWATCH_UNWIND_H_

#include <cstdint>

namespace gpuwatch {

// Upper bound on max_depth + skip for one capture; larger requests are
// clamped. The capture works on a stack buffer of this many entries.
inline constexpr int kMaxCaptureDepth = 256;

enum class UnwindMethod : int {
  kNone = 0,       // no unwinder could be found; CaptureStack returns 0
  kLibunwind = 1,  // unw_backtrace from a dlopen'ed libunwind.so.8 (fast)
  kGccUnwind = 2,  // _Unwind_Backtrace from libgcc_s (correct, slow)
};

// A stable lower-case name for logs and reports: "none", "libunwind",
// "gcc_unwind". Thread-safe, async-signal-safe.
const char* UnwindMethodName(UnwindMethod method);

// Loads libunwind once (dlopen + dlsym) and picks the method. Prints one
// warning line when libunwind is missing. Thread-safe; every call after the
// first is a single atomic load. Call it at gpuwatch start-up so that the
// dlopen does not happen inside the first CUDA callback; CaptureStack calls it
// itself otherwise. Not async-signal-safe (dlopen).
void InitUnwinder();

// The method CaptureStack uses. Initialises the unwinder if needed.
// Thread-safe.
UnwindMethod ActiveUnwindMethod();

// True when CaptureStack can return stacks at all (any method but kNone).
// Whether the fast path is active is ActiveUnwindMethod() == kLibunwind.
// Thread-safe.
bool UnwinderAvailable();

// Captures the calling thread's stack into pcs[0..return value).
//
// pcs[0] is the return address inside the function that called CaptureStack
// (unless that function tail-called it); `skip` drops that many further
// frames from the top, e.g. skip = 1 starts at the caller's caller. At most
// `max_depth` pcs are written. Returns the number written, 0 when max_depth
// <= 0 or no unwinder is available.
//
// Thread-safe. No heap allocation per call after initialisation, with one
// exception outside our control: the first capture on each thread touches
// libunwind's thread-local trace cache, and glibc allocates the dynamic TLS
// block of a dlopen'ed library with malloc on first touch. libunwind's own
// caches are mmap-based. Not async-signal-safe: on a cache miss libunwind
// walks the loaded modules under the dynamic loader's lock, so never call it
// from a signal handler or from inside a dl_iterate_phdr callback.
int CaptureStack(uintptr_t* pcs, int max_depth, int skip);

// As CaptureStack, with an explicit method (benchmarks and tests). Returns 0
// when that method is not available. Same thread-safety.
int CaptureStackWith(UnwindMethod method, uintptr_t* pcs, int max_depth, int skip);

namespace internal {

// Backtrace entry points found by LoadUnwinder.
struct UnwinderFns {
  UnwindMethod method = UnwindMethod::kNone;
  // unw_backtrace from libunwind, or nullptr.
  int (*unw_backtrace)(void** buffer, int size) = nullptr;
};

// Does the work of InitUnwinder for a given soname, without caching: dlopens
// `libunwind_soname` with RTLD_LOCAL | RTLD_NOW (the handle is never closed)
// and falls back to _Unwind_Backtrace with one warning line. Exposed so tests
// can exercise the fallback with a name that does not exist.
UnwinderFns LoadUnwinder(const char* libunwind_soname);

}  // namespace internal

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_UNWIND_H_
