// Native stack capture for the calling thread.
//
// gpuwatch records a stack on every allocation, so capture must be cheap and
// must not disturb the host. The fast path is gpuwatch's own walk of the
// modules' `.eh_frame` rules, cached per pc (cfi_unwind.h: about 1.5 ns a
// frame where the thread's last walk went, 7 ns elsewhere, once the pcs are
// known). For a stack that walk declines (a signal frame,
// code without unwind tables) the whole stack is unwound again with
// libunwind's unw_backtrace, which caches unwind information per thread
// (about 8 ns a frame here).
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
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_UNWIND_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_UNWIND_H_

#include <cstdint>

namespace gpuwatch {

// Upper bound on max_depth + skip for one capture; larger requests are
// clamped. The capture works on a stack buffer of this many entries.
inline constexpr int kMaxCaptureDepth = 256;

enum class UnwindMethod : int {
  kNone = 0,       // no unwinder could be found; CaptureStack returns 0
  kLibunwind = 1,  // unw_backtrace from a dlopen'ed libunwind.so.8 (fast)
  kGccUnwind = 2,  // _Unwind_Backtrace from libgcc_s (correct, slow)
  kCfi = 3,        // CfiBacktrace (cfi_unwind.h), falling back to one of the above
};

// A stable lower-case name for logs and reports: "none", "libunwind",
// "gcc_unwind", "cfi". Thread-safe, async-signal-safe.
const char* UnwindMethodName(UnwindMethod method);

// Loads libunwind once (dlopen + dlsym) and picks the method. Prints one
// warning line when libunwind is missing. Thread-safe; every call after the
// first is a single atomic load. Call it at gpuwatch start-up so that the
// dlopen does not happen inside the first CUDA callback; CaptureStack calls it
// itself otherwise. Not async-signal-safe (dlopen).
void InitUnwinder();

// The method CaptureStack uses: kCfi unless UseCfiUnwinder(false) was called
// (or the machine is not x86-64), else FallbackUnwindMethod(). Initialises
// the unwinder if needed. Thread-safe.
UnwindMethod ActiveUnwindMethod();

// The unwinder that was loaded (kLibunwind, else kGccUnwind, else kNone):
// what CaptureStack uses for a stack the CFI walker declines, or for every
// stack when the walker is off. Thread-safe.
UnwindMethod FallbackUnwindMethod();

// Turns the CFI walker on (the default) or off (GPUWATCH_UNWIND=libunwind).
// Thread-safe; captures already running finish with the method they began.
void UseCfiUnwinder(bool on);

// How many captures the CFI walker declined and handed to the fallback
// unwinder (the report's `unwind_fallbacks`). Thread-safe.
uint64_t CfiFallbacks();

// True when CaptureStack can return stacks at all (any method but kNone).
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
// Thread-safe. No heap allocation per call after initialisation, with
// exceptions on a thread's first capture: the CFI walker maps a page for the
// thread's last walk and asks glibc for the thread's stack bounds (for the
// main thread glibc reads /proc/self/maps), and glibc allocates libunwind's
// dynamic TLS block with malloc on first touch. libunwind's own caches are mmap-based. Not
// async-signal-safe: on a cache miss both unwinders walk the loaded modules
// under the dynamic loader's lock, so never call it from a signal handler or
// from inside a dl_iterate_phdr callback.
int CaptureStack(uintptr_t* pcs, int max_depth, int skip);

// As CaptureStack, with an explicit method (benchmarks and tests). Returns 0
// when that method is not available; kCfi falls back to
// FallbackUnwindMethod() as CaptureStack does. Same thread-safety.
int CaptureStackWith(UnwindMethod method, uintptr_t* pcs, int max_depth, int skip);

// --- The frames above the user's call -------------------------------------
//
// A stack captured inside a CUDA callback starts with gpuwatch's frames, then
// CUPTI's, the driver's and the runtime's, and only then reaches the line that
// called the CUDA API: 6 to 12 frames that the report trims anyway
// (symbolizer.h, IsToolFrame). Capturing `depth` user frames therefore means
// unwinding depth plus that many, and storing them costs 8 bytes each per
// interned stack. CaptureUserStack counts them by module: a pc inside the code
// of a module named in kToolModulePrefixes is a tool frame.

// Basename prefixes of the modules whose frames sit above the user's call:
// gpuwatch itself, CUPTI, the driver and the shared runtime. (A static runtime
// lives in the user's executable; its frames are recognised by name at report
// time.)
inline constexpr const char* kToolModulePrefixes[] = {"libgpuwatch.so", "libcupti.so", "libcuda.so",
                                                      "libcudart.so"};

// Finds the code ranges of the loaded tool modules (dl_iterate_phdr) and
// publishes them for CaptureUserStack. Call at start-up and when modules may
// have been loaded (a new CUDA context); cheap when nothing changed. Takes the
// dynamic loader's lock: not async-signal-safe, not inside dl_iterate_phdr.
// Thread-safe.
void RefreshToolModules();

// How many of pcs[0..n) from the front lie in a tool module's code, as of the
// last RefreshToolModules. Lock-free; async-signal-safe.
int LeadingToolFrames(const uintptr_t* pcs, int n);

// Captures the caller's stack without the leading tool frames: pcs[0] is the
// first frame outside them (the user's call, or a static runtime's frame), and
// up to `depth` pcs follow from there. A stack that is all tool frames keeps
// its outermost one. The number of tool frames to unwind besides `depth` is
// learnt from the captures (the most seen so far), so a capture unwinds about
// depth + that many frames; a capture that finds more than were expected, and
// may have been cut short, is taken once more. Each thread remembers its last
// count with the frames it was found from, so a capture under the same tool
// frames tests only the frames after them. Same thread-safety as
// CaptureStack (the memo is one more page mapped on a thread's first capture).
int CaptureUserStack(uintptr_t* pcs, int depth);

// CaptureUserStack without the copy: captures with buffer[0,
// kMaxCaptureDepth) as scratch and returns how many user frames there are,
// (*first)[0, return value): in `buffer`, or in the CFI walker's record of
// the thread's last walk when the walk took them from there
// (CfiBacktraceInPlace), valid until the thread's next capture. For a caller
// that uses the frames where they lie (CaptureSite interns them there).
int CaptureUserStackInPlace(uintptr_t* buffer, int depth, const uintptr_t** first);

// The most leading tool frames one CaptureUserStack has found so far (what it
// unwinds besides `depth`). Thread-safe.
int ToolFramesSeen();

namespace internal {

// RefreshToolModules for other module names (tests).
void RefreshToolModulesNamed(const char* const* prefixes, int count);

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

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_UNWIND_H_
