// For test programs on the driver API alone: a check that ends the program
// on a failed call, and the primary context made current.
#ifndef GPUWATCH_TESTS_E2E_PROGRAMS_DRIVER_PROGRAM_H_
#define GPUWATCH_TESTS_E2E_PROGRAMS_DRIVER_PROGRAM_H_

#include <cuda.h>
#include <errno.h>

#include <cstdio>
#include <cstdlib>

namespace driver_program {

// Exits 1, naming the program and the call, unless `r` is CUDA_SUCCESS.
inline void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s: %s failed (%d)\n", program_invocation_short_name, what,
                 static_cast<int>(r));
    std::exit(1);
  }
}

// Initialises the driver and makes device `ordinal`'s primary context
// current on this thread: every call after it runs on that context.
inline void UsePrimaryContext(int ordinal) {
  Check(cuInit(0), "cuInit");
  CUdevice dev = 0;
  Check(cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  CUcontext ctx = nullptr;
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

}  // namespace driver_program

#endif  // GPUWATCH_TESTS_E2E_PROGRAMS_DRIVER_PROGRAM_H_
