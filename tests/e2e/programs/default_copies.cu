// Copies with cudaMemcpyDefault: the runtime works out their direction from
// the pointers (unified addressing). One of each: host to device, device to
// host, device 0 to device 1 (peer), and one async host to device.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime_program.h"

using runtime_program::Check;

int main() {
  constexpr size_t kBytes = 1 << 20;
  std::vector<char> host(kBytes, 1);
  void* d0 = nullptr;
  void* d1 = nullptr;
  Check(cudaSetDevice(0));
  Check(cudaMalloc(&d0, kBytes));
  Check(cudaSetDevice(1));
  Check(cudaMalloc(&d1, kBytes));
  Check(cudaSetDevice(0));
  Check(cudaMemcpy(d0, host.data(), kBytes, cudaMemcpyDefault));  // AT:h2d
  Check(cudaMemcpy(host.data(), d0, kBytes, cudaMemcpyDefault));  // AT:d2h
  Check(cudaMemcpy(d1, d0, kBytes, cudaMemcpyDefault));           // AT:peer
  Check(cudaMemcpyAsync(d0, host.data(), kBytes, cudaMemcpyDefault, nullptr));
  Check(cudaDeviceSynchronize());
  Check(cudaFree(d0));
  Check(cudaFree(d1));
  std::printf("default_copies: done\n");
  return 0;
}
