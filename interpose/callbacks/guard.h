// Which threads are inside gpuwatch now, as heaptrack's RecursionGuard: set
// for the length of every CUPTI callback, activity buffer and C API call that
// takes gpuwatch's locks. A CUPTI callback that comes while its thread is
// already inside gpuwatch was caused by gpuwatch itself (a CUDA call it makes,
// a library it loads whose constructor uses CUDA): it is not the
// application's, and it must not take the locks gpuwatch may already hold. It
// is ignored. (Whether a thread holds one of those locks is
// HoldsGpuwatchLock(), libgpuwatch/base/mutex.h.)
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_GUARD_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_GUARD_H_

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

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_GUARD_H_
