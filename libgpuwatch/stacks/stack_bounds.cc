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

// The calling thread's bounds; hi == 1 when they cannot be found.
StackBounds CallerBounds() {
  StackBounds bounds{0, 1};
  CallerStack(&bounds);
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
  t_stack = CallerBounds();
  return t_stack;
}

}  // namespace internal

void PrimeStackBounds() {
  using internal::g_primed;
  if (internal::g_priming.exchange(true)) return;  // one thread only: written once
  g_primed.thread = pthread_self();
  g_primed.bounds = internal::CallerBounds();
  g_primed.ready.store(true, std::memory_order_release);
}

}  // namespace gpuwatch
