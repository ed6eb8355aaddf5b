// gpuwatch's mutex: a std::mutex that counts, per thread, how many of
// gpuwatch's locks the thread holds.
//
// A signal can interrupt an application thread while it is inside gpuwatch
// (a CUPTI callback, a C API call). If that thread holds one of these locks,
// no report may be built on it or waited for by it: the report would need the
// lock, which only this thread can release. The signal handler and the exit
// report ask HoldsGpuwatchLock() and give that report up with one line;
// otherwise (the common case: the thread is unwinding its stack, say) they
// go on as usual. Costs one thread-local increment and decrement per lock.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_MUTEX_H_
#define GPUWATCH_LIBGPUWATCH_BASE_MUTEX_H_

#include <atomic>
#include <mutex>

namespace gpuwatch {

// Plain data with a constant initializer: no TLS wrapper and no allocation on
// access, so a signal handler may read it.
inline thread_local constinit int t_gpuwatch_locks_held __attribute__((tls_model("initial-exec"))) =
    0;

// Meets the Lockable requirements: use it with std::lock_guard and std::unique_lock.
class Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // The count covers the lock from before it is taken until after it is
  // released, so that a signal at any point in between sees it: a handler may
  // then give up a report that could have been written, never wait forever.
  void lock() {
    ++t_gpuwatch_locks_held;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    mu_.lock();
  }
  bool try_lock() {
    ++t_gpuwatch_locks_held;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (mu_.try_lock()) return true;
    --t_gpuwatch_locks_held;
    return false;
  }
  void unlock() {
    mu_.unlock();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    --t_gpuwatch_locks_held;
  }

 private:
  std::mutex mu_;
};

// True when the calling thread holds one of gpuwatch's locks.
inline bool HoldsGpuwatchLock() { return t_gpuwatch_locks_held != 0; }

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_MUTEX_H_
