// Which threads are inside gpuwatch now, as heaptrack's RecursionGuard: set
// for the length of every CUPTI callback, activity buffer and C API call.
//
// Two things rest on it:
// - A CUPTI callback that comes while its thread is already inside gpuwatch
//   was caused by gpuwatch itself (a CUDA call it makes, a library it loads
//   whose constructor uses CUDA): it is not the application's, and it must not
//   take the locks gpuwatch may already hold. It is ignored.
// - A signal that interrupts a thread inside gpuwatch may have found it
//   holding one of gpuwatch's locks. No report may then be built on that
//   thread, or waited for by it: the report would wait forever for a lock
//   that thread holds (fatal_signals.cc, reports.cc).
#ifndef GPUWATCH_INTERPOSE_GUARD_H_
#define GPUWATCH_INTERPOSE_GUARD_H_

namespace gpuwatch {

// Plain data with a constant initializer: no TLS wrapper and no allocation on
// access, so a signal handler may read it.
extern thread_local constinit int t_inside_gpuwatch __attribute__((tls_model("initial-exec")));

class ScopedInsideGpuwatch {
 public:
  ScopedInsideGpuwatch() { ++t_inside_gpuwatch; }
  ~ScopedInsideGpuwatch() { --t_inside_gpuwatch; }
  ScopedInsideGpuwatch(const ScopedInsideGpuwatch&) = delete;
  ScopedInsideGpuwatch& operator=(const ScopedInsideGpuwatch&) = delete;
};

inline bool InsideGpuwatch() { return t_inside_gpuwatch != 0; }

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_GUARD_H_
