// The smallest CUDA process worth watching, for gpuwatch's fixed cost per
// process (bench/fixed_cost.py): one device allocation, a copy to it and a
// copy back, a free, exit 0. What gpuwatch adds to it is start-up (attach,
// CUPTI subscription), the exit report and its teardown: a test suite that
// starts many such processes pays it each time.
//
// Built like the e2e test programs (nvcc, shared cudart, no RPATH), so it runs
// on the simulator with LD_LIBRARY_PATH and unchanged on a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

int main() {
  constexpr size_t kBytes = 1 << 20;
  static char host[kBytes];
  std::memset(host, 1, sizeof(host));
  void* device = nullptr;
  if (cudaMalloc(&device, kBytes) != cudaSuccess ||
      cudaMemcpy(device, host, kBytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(host, device, kBytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaFree(device) != cudaSuccess) {
    std::fprintf(stderr, "tiny_process: a CUDA call failed\n");
    return 1;
  }
  return host[kBytes - 1] == 1 ? 0 : 1;
}
