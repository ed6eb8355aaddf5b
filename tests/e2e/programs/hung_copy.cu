// A program hung in a CUDA call, for `gpuwatch why`, `top` and the exporter
// (tests/e2e/why_test.cc): it allocates 512 KiB, launches a kernel that
// never finishes when run with GWSIM_HANG_KERNEL=never_ends (the simulator's,
// tests/sim/README.md), prints "hung_copy: copying" and copies the buffer back,
// a copy that waits for that kernel for ever. With the argument "sync" it
// synchronizes the device there instead of copying.
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime_program.h"

using runtime_program::Check;

__global__ void never_ends(char* p) {
  while (p[0] == 0) {
  }
}

int main(int argc, char** argv) {
  const bool sync = argc > 1 && std::strcmp(argv[1], "sync") == 0;
  constexpr size_t kBytes = 512 << 10;
  char* device = nullptr;
  Check(cudaMalloc(&device, kBytes));  // HUNG:alloc
  Check(cudaMemset(device, 0, kBytes));
  never_ends<<<1, 1>>>(device);
  Check(cudaGetLastError());
  std::vector<char> host(kBytes);
  std::printf("hung_copy: copying\n");
  std::fflush(stdout);
  if (sync) {
    Check(cudaDeviceSynchronize());  // HUNG:sync
  } else {
    Check(cudaMemcpy(host.data(), device, kBytes, cudaMemcpyDeviceToHost));  // HUNG:copy
  }
  std::printf("hung_copy: copied\n");
  return 0;
}
