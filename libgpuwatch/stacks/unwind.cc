#include "libgpuwatch/stacks/unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>

#include "libgpuwatch/base/enum_names.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/base/thread_block.h"
#include "libgpuwatch/stacks/cfi_unwind.h"

namespace gpuwatch {

namespace {

using UnwBacktraceFn = int (*)(void** buffer, int size);

constexpr const char kLibunwindSoname[] = "libunwind.so.8";

// How many of the first raw frames may belong to gpuwatch (and the unwinder)
// before the caller's return address shows up. One is expected today (the
// public entry point, into which CaptureRaw is inlined); the rest is slack.
constexpr int kMaxOwnFrames = 4;
// How many the captures through CaptureFrom (CaptureStack's) and through
// CaptureUserFrames (CaptureUserStack's) have found so far (the most): what a
// capture asks the walk for besides its frames, since every frame walked
// costs (about 7 instructions where the last walk went). A capture that finds
// more, and was cut short by them, is taken once more (CaptureInto).
constinit std::atomic<int> g_own_frames_plain{1};
constinit std::atomic<int> g_own_frames_user{1};

// Published once by InitUnwinder. -1: not initialised yet. The function
// pointer is stored before the method (release), so a reader that sees the
// method (acquire) also sees the pointer.
constinit std::atomic<int> g_method{-1};
constinit std::atomic<UnwBacktraceFn> g_unw_backtrace{nullptr};
constinit std::once_flag g_init_once;
// The CFI walker in front of the loaded unwinder (UseCfiUnwinder).
#if defined(__x86_64__)
constinit std::atomic<bool> g_use_cfi{true};
#else
constinit std::atomic<bool> g_use_cfi{false};
#endif
constinit std::atomic<uint64_t> g_cfi_fallbacks{0};

// The code (executable PT_LOAD segments) of the loaded tool modules. A new
// set is published only when it differs from the current one, and the old one
// is leaked, since a concurrent capture may still read it: a few hundred bytes
// per change of the loaded CUDA libraries.
constexpr int kMaxToolRanges = 32;
struct CodeRanges {
  int count = 0;
  uintptr_t begin[kMaxToolRanges] = {};
  uintptr_t size[kMaxToolRanges] = {};
  // The hull of the ranges, [lo, lo + span): a pc outside it (the program's
  // own code, mostly) is told apart with one test.
  uintptr_t lo = 0;
  uintptr_t span = 0;
  // The set this one replaced. A capture may still be reading it, so it is
  // never freed; linking it here keeps it reachable (and leak checkers quiet).
  const CodeRanges* replaced = nullptr;
};
constinit std::atomic<const CodeRanges*> g_tool_ranges{nullptr};
constinit Mutex g_refresh_mu;  // serialises refreshes
// The most leading tool frames a capture has found so far.
constinit std::atomic<int> g_tool_frames{0};

// The calling thread's last count of leading tool frames, with the frames it
// was found from. A capture whose first `lead` pcs are those, under the same
// set of tool ranges (a set is never reused: replaced ones are leaked), has
// at least that many; only the frame after them is tested (mostly the user's
// call, which differs from one site to the next): a comparison of a few words
// instead of a range test a frame.
constexpr int kMaxLeadRemembered = 32;
struct LeadMemo {
  const CodeRanges* ranges = nullptr;  // null: nothing remembered
  int lead = 0;
  uintptr_t pcs[kMaxLeadRemembered] = {};
};

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

// Raises `value` to `to` if it is lower.
void RaiseTo(std::atomic<int>& value, int to) {
  int seen = value.load(std::memory_order_relaxed);
  while (to > seen && !value.compare_exchange_weak(seen, to, std::memory_order_relaxed)) {
  }
}

// Fills `buffer` with raw frames, our own frames included. Inlined into the
// entry points (a call and a frame fewer to walk): the caller finds where its
// own caller starts by matching __builtin_return_address, not by counting.
// `fallback` is the loaded unwinder, for a stack the CFI walker declines.
// Sets *pcs to where the frames are: `buffer`, or the CFI walker's record
// (CfiBacktraceInPlace).
__attribute__((always_inline)) inline int CaptureRaw(UnwindMethod method, UnwindMethod fallback,
                                                     UnwBacktraceFn unw_backtrace,
                                                     uintptr_t* buffer, int size,
                                                     const uintptr_t** pcs) {
  *pcs = buffer;
  int n = 0;
  if (method == UnwindMethod::kCfi) {
    n = CfiBacktraceInPlace(buffer, size, pcs);
    if (n < 0) {
      g_cfi_fallbacks.fetch_add(1, std::memory_order_relaxed);
      method = fallback;
      n = 0;
      *pcs = buffer;
    }
  }
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
    case UnwindMethod::kCfi:
    case UnwindMethod::kNone:
      break;
  }
  return std::clamp(n, 0, size);
}

// Where the caller's frame (`caller_ra`) is among the first of the walk's
// pcs, or -1. Matching the return address rather than counting our own frames
// stays right whether the compiler inlined or sibling-called anything between
// the entry point and the unwinder.
inline int FindCaller(const uintptr_t* pcs, int n, uintptr_t caller_ra) {
  for (int i = 0; i < std::min(n, kMaxOwnFrames); ++i) {
    if (pcs[i] == caller_ra) return i;
  }
  return -1;
}

// Captures with `method` (buffer[0, kMaxCaptureDepth) as scratch) and finds
// the frames that start at `caller_ra` (plus `skip`): returns how many there
// are (at most max_depth) and sets *frames to the first (in buffer or the CFI
// walker's record: CaptureRaw). Always inlined: its callers' frames are the
// ones kMaxOwnFrames counts.
__attribute__((always_inline)) inline int CaptureInto(uintptr_t caller_ra, UnwindMethod method,
                                                      UnwindMethod fallback,
                                                      UnwBacktraceFn unw_backtrace,
                                                      uintptr_t* buffer, int max_depth, int skip,
                                                      std::atomic<int>& own_frames,
                                                      const uintptr_t** frames) {
  *frames = buffer;
  if (max_depth <= 0 || method == UnwindMethod::kNone) return 0;
  // Clamped first so that the sum below cannot overflow.
  skip = std::clamp(skip, 0, kMaxCaptureDepth);
  max_depth = std::min(max_depth, kMaxCaptureDepth);
  const int own = own_frames.load(std::memory_order_relaxed);
  int want = std::min(own + skip + max_depth, kMaxCaptureDepth);
  const uintptr_t* pcs = buffer;
  int n = CaptureRaw(method, fallback, unw_backtrace, buffer, want, &pcs);
  int first = FindCaller(pcs, n, caller_ra);
  if ((first < 0 || first > own) && n == want && want < kMaxCaptureDepth) [[unlikely]] {
    // More of our own frames than expected, and the walk stopped at `want`:
    // it may have missed some of the caller's. Taken again with room for all
    // of them; the count found is remembered for the next captures.
    if (first >= 0) RaiseTo(own_frames, first);
    want = std::min(kMaxOwnFrames + skip + max_depth, kMaxCaptureDepth);
    n = CaptureRaw(method, fallback, unw_backtrace, buffer, want, &pcs);
    first = FindCaller(pcs, n, caller_ra);
  }
  if (first < 0) return 0;  // not expected; an empty stack beats a wrong one
  const int begin = first + skip;
  if (begin >= n) return 0;
  *frames = pcs + begin;
  return std::min(n - begin, max_depth);
}

// Captures with `method` and copies the frames that start at `caller_ra`
// (plus `skip`) into pcs.
int CaptureFrom(uintptr_t caller_ra, UnwindMethod method, UnwindMethod fallback,
                UnwBacktraceFn unw_backtrace, uintptr_t* pcs, int max_depth, int skip) {
  uintptr_t buffer[kMaxCaptureDepth];
  const uintptr_t* frames = buffer;
  const int count = CaptureInto(caller_ra, method, fallback, unw_backtrace, buffer, max_depth, skip,
                                g_own_frames_plain, &frames);
  std::memcpy(pcs, frames, static_cast<size_t>(count) * sizeof(uintptr_t));
  return count;
}

struct FindRangesArg {
  const char* const* prefixes;
  int prefix_count;
  CodeRanges* ranges;
};

int FindRanges(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* arg = static_cast<FindRangesArg*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;  // the executable
  const char* slash = std::strrchr(info->dlpi_name, '/');
  const char* base = slash != nullptr ? slash + 1 : info->dlpi_name;
  bool tool = false;
  for (int i = 0; i < arg->prefix_count && !tool; ++i) {
    tool = std::strncmp(base, arg->prefixes[i], std::strlen(arg->prefixes[i])) == 0;
  }
  if (!tool) return 0;
  CodeRanges* r = arg->ranges;
  for (int i = 0; i < info->dlpi_phnum && r->count < kMaxToolRanges; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    r->begin[r->count] = info->dlpi_addr + ph.p_vaddr;
    r->size[r->count] = ph.p_memsz;
    ++r->count;
  }
  return 0;
}

bool SameRanges(const CodeRanges& a, const CodeRanges& b) {
  if (a.count != b.count) return false;
  for (int i = 0; i < a.count; ++i) {
    if (a.begin[i] != b.begin[i] || a.size[i] != b.size[i]) return false;
  }
  return true;
}

// The method CaptureStack uses when `fallback` is the loaded unwinder.
UnwindMethod MethodOver(UnwindMethod fallback) {
  return g_use_cfi.load(std::memory_order_relaxed) ? UnwindMethod::kCfi : fallback;
}

// The loaded unwinder (an UnwindMethod), loading it first if needed.
int LoadedMethod() {
  const int loaded = g_method.load(std::memory_order_acquire);
  if (loaded >= 0) return loaded;
  InitUnwinder();
  return g_method.load(std::memory_order_acquire);
}

}  // namespace

void RefreshToolModules() {
  internal::RefreshToolModulesNamed(kToolModulePrefixes,
                                    static_cast<int>(std::size(kToolModulePrefixes)));
}

namespace {

int LeadingToolFramesIn(const CodeRanges* r, const uintptr_t* pcs, int n) {
  if (r == nullptr) return 0;
  int i = 0;
  int last = 0;  // neighbouring frames are mostly in the same module: test its range first
  for (; i < n; ++i) {
    // A return address may sit just past its function's last byte: test the call's own byte.
    const uintptr_t pc = pcs[i] - 1;
    if (pc - r->begin[last] < r->size[last]) continue;
    if (pc - r->lo >= r->span) break;
    int k = 0;
    while (k < r->count && pc - r->begin[k] >= r->size[k]) ++k;
    if (k == r->count) break;
    last = k;
  }
  return i;
}

// LeadingToolFramesMemo where the memo does not stand as it is: counts
// anew, or on from the remembered frames, and remembers the count.
__attribute__((noinline)) int LeadingToolFramesRecount(const CodeRanges* r, LeadMemo* memo,
                                                       const uintptr_t* pcs, int n) {
  if (memo == nullptr || r == nullptr) return LeadingToolFramesIn(r, pcs, n);
  int lead = memo->lead;
  if (memo->ranges == r && lead <= n &&
      std::memcmp(memo->pcs, pcs, static_cast<size_t>(lead) * sizeof(uintptr_t)) == 0) {
    // The rest is tested as ever: the same frames on, usually one.
    const int more = LeadingToolFramesIn(r, pcs + lead, n - lead);
    if (more == 0) return lead;  // the memo stands as it is
    lead += more;
  } else {
    lead = LeadingToolFramesIn(r, pcs, n);
  }
  memo->ranges = r;
  memo->lead = std::min(lead, kMaxLeadRemembered);
  std::memcpy(memo->pcs, pcs, static_cast<size_t>(memo->lead) * sizeof(uintptr_t));
  return lead;
}

// LeadingToolFrames, remembered per thread (LeadMemo). Inlined where the
// memo stands: the same frames on top, then a frame outside the tool
// modules' hull (the user's call, as a rule).
inline int LeadingToolFramesMemo(const uintptr_t* pcs, int n) {
  const CodeRanges* r = g_tool_ranges.load(std::memory_order_acquire);
  LeadMemo* memo = ThreadBlock<LeadMemo>::Get();
  if (memo != nullptr && r != nullptr && memo->ranges == r) {
    const int lead = memo->lead;
    if (lead < n && pcs[lead] - 1 - r->lo >= r->span &&
        std::memcmp(memo->pcs, pcs, static_cast<size_t>(lead) * sizeof(uintptr_t)) == 0) {
      return lead;
    }
  }
  return LeadingToolFramesRecount(r, memo, pcs, n);
}

}  // namespace

int LeadingToolFrames(const uintptr_t* pcs, int n) {
  return LeadingToolFramesIn(g_tool_ranges.load(std::memory_order_acquire), pcs, n);
}

namespace {

// CaptureUserStack's work for the frames from `caller_ra` on, captured with
// buffer[0, kMaxCaptureDepth) as scratch: returns how many user frames there
// are and sets *first to the first (CaptureInto). Always inlined into the
// entry points, whose frames CaptureInto looks for.
__attribute__((always_inline)) inline int CaptureUserFrames(uintptr_t caller_ra, uintptr_t* buffer,
                                                            int depth, const uintptr_t** first) {
  *first = buffer;
  if (depth <= 0) return 0;
  depth = std::min(depth, kMaxCaptureDepth);
  const auto fallback = static_cast<UnwindMethod>(LoadedMethod());
  const UnwindMethod method = MethodOver(fallback);
  const UnwBacktraceFn unw_backtrace = g_unw_backtrace.load(std::memory_order_relaxed);
  int want = std::min(depth + g_tool_frames.load(std::memory_order_relaxed), kMaxCaptureDepth);
  // The frames from our caller's frame on.
  const uintptr_t* frames = buffer;
  int n = 0;
  int lead = 0;
  for (;;) {
    n = CaptureInto(caller_ra, method, fallback, unw_backtrace, buffer, want, 0, g_own_frames_user,
                    &frames);
    lead = LeadingToolFramesMemo(frames, n);
    RaiseTo(g_tool_frames, lead);
    if (n < want || want == kMaxCaptureDepth) break;  // the whole stack was seen
    if (n - lead >= depth) break;                     // enough of the user's frames
    // Cut short: capture again, deeper. When every frame was a tool frame
    // their number is still unknown, so double. Ends: `want` grows each time.
    want = std::min(lead == n ? want * 2 : lead + depth, kMaxCaptureDepth);
  }
  lead = std::min(lead, std::max(n - 1, 0));  // keep the outermost frame of an all-tool stack
  *first = frames + lead;
  return std::max(std::min(n - lead, depth), 0);
}

}  // namespace

__attribute__((noinline)) int CaptureUserStack(uintptr_t* pcs, int depth) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  // The frames are captured once into `buffer` and copied once.
  uintptr_t buffer[kMaxCaptureDepth];
  const uintptr_t* first = buffer;
  const int count = CaptureUserFrames(caller_ra, buffer, depth, &first);
  std::memcpy(pcs, first, static_cast<size_t>(count) * sizeof(uintptr_t));
  asm volatile("" ::: "memory");  // keeps this frame the one CaptureInto looks for
  return count;
}

__attribute__((noinline)) int CaptureUserStackInPlace(uintptr_t* buffer, int depth,
                                                      const uintptr_t** first) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const int count = CaptureUserFrames(caller_ra, buffer, depth, first);
  asm volatile("" ::: "memory");  // keeps this frame the one CaptureInto looks for
  return count;
}

int ToolFramesSeen() { return g_tool_frames.load(std::memory_order_relaxed); }

const char* UnwindMethodName(UnwindMethod method) {
  static constexpr const char* kNames[] = {"none", "libunwind", "gcc_unwind", "cfi"};
  static_assert(std::size(kNames) == static_cast<size_t>(UnwindMethod::kCfi) + 1);
  return EnumName(method, kNames, "none");
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

void RefreshToolModulesNamed(const char* const* prefixes, int count) {
  // A refresh already running finds the same modules; and after a fork() the
  // lock may be held by a thread that no longer exists.
  std::unique_lock<Mutex> lock(g_refresh_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  CodeRanges found;
  FindRangesArg arg{prefixes, count, &found};
  dl_iterate_phdr(&FindRanges, &arg);
  const CodeRanges* current = g_tool_ranges.load(std::memory_order_acquire);
  if (current != nullptr && SameRanges(*current, found)) return;
  if (found.count > 0) {
    uintptr_t hi = 0;
    found.lo = UINTPTR_MAX;
    for (int i = 0; i < found.count; ++i) {
      found.lo = std::min(found.lo, found.begin[i]);
      hi = std::max(hi, found.begin[i] + found.size[i]);
    }
    found.span = hi - found.lo;
  }
  found.replaced = current;
  g_tool_ranges.store(new CodeRanges(found), std::memory_order_release);
}

}  // namespace internal

void InitUnwinder() {
  if (g_method.load(std::memory_order_acquire) >= 0) return;
  std::call_once(g_init_once, [] {
    fork_locks::AddLeaf(&g_refresh_mu, "the unwinder's refresh");
    const internal::UnwinderFns fns = internal::LoadUnwinder(kLibunwindSoname);
    g_unw_backtrace.store(fns.unw_backtrace, std::memory_order_relaxed);
    g_method.store(static_cast<int>(fns.method), std::memory_order_release);
  });
}

UnwindMethod FallbackUnwindMethod() {
  InitUnwinder();
  return static_cast<UnwindMethod>(g_method.load(std::memory_order_acquire));
}

UnwindMethod ActiveUnwindMethod() { return MethodOver(FallbackUnwindMethod()); }

void UseCfiUnwinder(bool on) {
#if defined(__x86_64__)
  g_use_cfi.store(on, std::memory_order_relaxed);
#else
  (void)on;
#endif
}

uint64_t CfiFallbacks() { return g_cfi_fallbacks.load(std::memory_order_relaxed); }

bool UnwinderAvailable() { return ActiveUnwindMethod() != UnwindMethod::kNone; }

__attribute__((noinline)) int CaptureStack(uintptr_t* pcs, int max_depth, int skip) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const auto fallback = static_cast<UnwindMethod>(LoadedMethod());
  const int n = CaptureFrom(caller_ra, MethodOver(fallback), fallback,
                            g_unw_backtrace.load(std::memory_order_relaxed), pcs, max_depth, skip);
  asm volatile("" ::: "memory");
  return n;
}

__attribute__((noinline)) int CaptureStackWith(UnwindMethod method, uintptr_t* pcs, int max_depth,
                                               int skip) {
  const auto caller_ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const UnwindMethod fallback = FallbackUnwindMethod();
  UnwBacktraceFn unw_backtrace = g_unw_backtrace.load(std::memory_order_relaxed);
  if (method == UnwindMethod::kLibunwind && unw_backtrace == nullptr) return 0;
  const int n = CaptureFrom(caller_ra, method, fallback, unw_backtrace, pcs, max_depth, skip);
  asm volatile("" ::: "memory");
  return n;
}

}  // namespace gpuwatch
