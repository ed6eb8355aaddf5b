// The calling thread's stack bounds, for the CFI walker (cfi_unwind.cc): every
// read of the stack is checked against them. Found on the thread's first walk
// (or ahead of it, PrimeStackBounds in cfi_unwind.h) and kept in a
// thread_local.
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_STACK_BOUNDS_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_STACK_BOUNDS_H_

#include "libgpuwatch/base/own_stack.h"

namespace gpuwatch::internal {
// (Internal to libgpuwatch/stacks.)

// The calling thread's stack. hi == 1: glibc could not say; hi == 0: not
// looked for yet.
extern thread_local constinit StackBounds t_stack __attribute__((tls_model("initial-exec")));

// ThreadStack's first call on a thread: finds the bounds.
const StackBounds& FindThreadStack();

inline const StackBounds& ThreadStack() {
  if (t_stack.hi != 0) return t_stack;
  return FindThreadStack();
}

}  // namespace gpuwatch::internal

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_STACK_BOUNDS_H_
