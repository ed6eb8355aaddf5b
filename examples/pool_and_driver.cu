// Leaks through stream-ordered pools and the driver API, the paths that
// frameworks with their own allocators take (PyTorch's cudaMallocAsync
// backend, JAX/XLA's driver allocations, expandable segments' VMM mappings).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace {

__attribute__((noinline)) void* PoolBuffer(cudaStream_t stream) {
  void* p = nullptr;
  cudaMallocAsync(&p, 8 << 20, stream);  // leaked: never cudaFreeAsync'ed
  return p;
}

__attribute__((noinline)) CUdeviceptr DriverBuffer() {
  CUdeviceptr p = 0;
  cuMemAlloc(&p, 2 << 20);  // leaked: never cuMemFree'd
  return p;
}

}  // namespace

int main() {
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  for (int i = 0; i < 4; ++i) {
    void* tmp = nullptr;
    cudaMallocAsync(&tmp, 1 << 20, stream);  // balanced
    cudaFreeAsync(tmp, stream);
    PoolBuffer(stream);
  }
  DriverBuffer();
  cudaStreamSynchronize(stream);
  std::printf("pool_and_driver: done\n");
  return 0;
}
