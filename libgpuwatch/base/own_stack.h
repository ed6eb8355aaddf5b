// Running gpuwatch's heavy work on a stack that is large enough.
//
// Writing a report needs far more stack than a callback (libdw's line
// tables: ~160 KiB), and the exit report runs on whichever thread calls
// exit(): a host thread made with a 128 KiB stack, or a main thread under
// `ulimit -s 128`, would overflow. RunWithStack runs the work here when the
// calling thread has enough stack left, and otherwise on a thread of its own
// with kWorkStackBytes of stack and every signal blocked, waiting for it;
// the caller's locks stay held and the work must not take them.
//
// Thread-safety: any thread; not async-signal-safe (it may create a thread).
#ifndef GPUWATCH_LIBGPUWATCH_BASE_OWN_STACK_H_
#define GPUWATCH_LIBGPUWATCH_BASE_OWN_STACK_H_

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpuwatch {

// The stack of gpuwatch's own threads and of the work RunOnOwnStack runs.
inline constexpr size_t kWorkStackBytes = size_t{2} << 20;

// Sets `attr` (initialized by the caller) to kWorkStackBytes of stack, so
// that a thread's stack does not follow RLIMIT_STACK. False when refused.
bool SetWorkStack(pthread_attr_t* attr);

// Runs `work` and returns once it has finished: here when the calling
// thread has at least `needed` bytes of stack left, else on a thread with
// kWorkStackBytes of stack. False, without running it, when neither can be.
bool RunWithStack(const std::function<void()>& work, size_t needed);

// Bytes of stack left below the caller's frame, by glibc's bounds; SIZE_MAX
// when unknown.
size_t StackLeft();

// StackLeft() >= needed, from CallerStack's bounds.
bool StackHasRoom(size_t needed);

// A thread's stack, [lo, hi).
struct StackBounds {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};

// The main thread's stack as pthread_getattr_np gives it, when `sp` lies in
// it: from PROCMAP_QUERY ioctls (Linux 6.11 and later) where glibc reads and
// parses all of /proc/self/maps. False, leaving *bounds, when the kernel
// cannot say so, RLIMIT_STACK is unlimited, or `sp` is not on that stack
// (another thread's, a signal's alternate stack): ask glibc then.
bool MainThreadStack(uintptr_t sp, StackBounds* bounds);

// The calling thread's stack as pthread_getattr_np gives it: MainThreadStack
// where it answers, else glibc. False, leaving *bounds, when neither can say.
bool CallerStack(StackBounds* bounds);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_OWN_STACK_H_
