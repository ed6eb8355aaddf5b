// Zero-copy: a kernel reads mapped pinned host memory; no device memory is
// allocated. Three pinned host buffers stay live at exit: cudaHostAlloc
// (mapped), cudaMallocHost and malloc + cudaHostRegister, 4 MiB each.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "runtime_program.h"

namespace {

using runtime_program::Check;

__global__ void Touch(float* data, size_t n) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.0f;
}

}  // namespace

int main() {
  constexpr size_t kBytes = 4 << 20;
  Check(cudaSetDeviceFlags(cudaDeviceMapHost));
  float* mapped = nullptr;
  Check(cudaHostAlloc(&mapped, kBytes, cudaHostAllocMapped));
  void* pinned = nullptr;
  Check(cudaMallocHost(&pinned, kBytes));
  void* registered = std::malloc(kBytes);
  Check(cudaHostRegister(registered, kBytes, cudaHostRegisterMapped));
  float* device_view = nullptr;
  Check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_view), mapped, 0));
  Touch<<<16, 256>>>(device_view, kBytes / sizeof(float));
  Check(cudaDeviceSynchronize());
  std::printf("zero_copy: done\n");
  return 0;
}
