// For test programs on the runtime API: a check that ends the program on a
// failed call.
#ifndef GPUWATCH_TESTS_E2E_PROGRAMS_RUNTIME_PROGRAM_H_
#define GPUWATCH_TESTS_E2E_PROGRAMS_RUNTIME_PROGRAM_H_

#include <cuda_runtime.h>
#include <errno.h>

#include <cstdio>
#include <cstdlib>

namespace runtime_program {

// Exits 1, naming the program and the error, unless `e` is cudaSuccess.
inline void Check(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace runtime_program

#endif  // GPUWATCH_TESTS_E2E_PROGRAMS_RUNTIME_PROGRAM_H_
