#include "libgpuwatch/stacks/stack_bounds.h"

#include <pthread.h>

#include <atomic>
#include <cstddef>

#include "libgpuwatch/base/own_stack.h"
#include "libgpuwatch/stacks/cfi_unwind.h"

namespace gpuwatch {

namespace internal {

thread_local constinit StackBounds t_stack __attribute__((tls_model("initial-exec")));

namespace {

StackBounds BoundsOf(pthread_t thread) {
  StackBounds bounds{0, 1};
  // The main thread's, without glibc's read of all of /proc/self/maps where
  // the kernel can say.
  const char here = 0;
  if (pthread_equal(thread, pthread_self()) != 0 &&
      MainThreadStack(reinterpret_cast<uintptr_t>(&here), &bounds)) {
    return bounds;
  }
  pthread_attr_t attr;
  if (pthread_getattr_np(thread, &attr) != 0) return bounds;
  void* addr = nullptr;
  size_t size = 0;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size != 0) {
    bounds.lo = reinterpret_cast<uintptr_t>(addr);
    bounds.hi = bounds.lo + size;
  }
  pthread_attr_destroy(&attr);
  return bounds;
}

// One thread's bounds found ahead of its first walk (PrimeStackBounds):
// published with a release store of `ready`.
struct PrimedBounds {
  pthread_t thread{};
  StackBounds bounds;
  std::atomic<bool> ready{false};
};
PrimedBounds g_primed;
std::atomic<bool> g_priming{false};

}  // namespace

__attribute__((noinline)) const StackBounds& FindThreadStack() {
  if (g_primed.ready.load(std::memory_order_acquire) &&
      pthread_equal(g_primed.thread, pthread_self()) != 0) {
    t_stack = g_primed.bounds;
    return t_stack;
  }
  t_stack = BoundsOf(pthread_self());
  return t_stack;
}

}  // namespace internal

void PrimeStackBounds(pthread_t thread) {
  using internal::g_primed;
  if (internal::g_priming.exchange(true)) return;  // one thread only: written once
  g_primed.thread = thread;
  g_primed.bounds = internal::BoundsOf(thread);
  g_primed.ready.store(true, std::memory_order_release);
}

}  // namespace gpuwatch
