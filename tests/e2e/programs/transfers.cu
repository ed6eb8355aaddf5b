// Copies with known sizes, host memory kinds and patterns, and kernels with
// known launch counts. Lines the test checks carry "// AT:<name>" markers.
// Keep the expectations in transfers_test.cc in step with this file.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;

void Rt(cudaError_t err) {
  if (err != cudaSuccess) std::exit(10);
}

template <int N>
__global__ void Fill(float* p) {
  p[threadIdx.x] = N;
}

__global__ void Other(float* p) { p[threadIdx.x] += 1; }

}  // namespace

int main() {
  std::vector<char> pageable(kMiB, 1);
  char* pinned = nullptr;
  Rt(cudaMallocHost(&pinned, kMiB));
  char* dev = nullptr;
  Rt(cudaMalloc(&dev, kMiB));
  cudaStream_t stream = nullptr;
  Rt(cudaStreamCreate(&stream));

  for (int i = 0; i < 4; ++i) {
    Rt(cudaMemcpy(dev, pageable.data(), kMiB, cudaMemcpyHostToDevice));  // AT:pageable
  }
  for (int i = 0; i < 4; ++i) {
    Rt(cudaMemcpyAsync(dev, pinned, kMiB, cudaMemcpyHostToDevice, stream));  // AT:pinned
  }
  for (int i = 0; i < 200; ++i) {
    Rt(cudaMemcpyAsync(dev + i * 4096, pinned, 4096, cudaMemcpyHostToDevice, stream));  // AT:small
  }
  Rt(cudaStreamSynchronize(stream));
  for (int i = 0; i < 20; ++i) {
    Rt(cudaMemcpy(pageable.data(), dev, 256 << 10, cudaMemcpyDeviceToHost));  // AT:sync_d2h
  }
  const auto dptr = reinterpret_cast<CUdeviceptr>(dev);
  for (int i = 0; i < 2; ++i) {
    const CUresult r = cuMemcpyHtoD(dptr, pageable.data(), kMiB);  // AT:driver
    if (r != CUDA_SUCCESS) return 11;
  }
  for (int i = 0; i < 7; ++i) Fill<4><<<1, 32, 0, stream>>>(reinterpret_cast<float*>(dev));
  for (int i = 0; i < 3; ++i) Other<<<1, 32, 0, stream>>>(reinterpret_cast<float*>(dev));
  Rt(cudaDeviceSynchronize());
  Rt(cudaFree(dev));
  Rt(cudaFreeHost(pinned));
  std::printf("transfers: done\n");
  return 0;
}
