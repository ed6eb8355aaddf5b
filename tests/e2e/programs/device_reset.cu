// cudaDeviceReset with memory live: the driver frees what the runtime's
// header says it destroys (cudaMalloc, cudaMallocHost, cudaMallocManaged,
// cudaMallocPitch) and keeps stream-ordered memory (cudaMallocAsync). Then
// more memory is allocated, the stream-ordered block freed, and 8 MiB left
// live at exit. Prints "device_reset: done".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMiB = 1 << 20;

void Rt(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::printf("device_reset: %s: %s\n", what, cudaGetErrorName(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  void* device = nullptr;
  void* pinned = nullptr;
  void* managed = nullptr;
  void* pitched = nullptr;
  void* ordered = nullptr;
  size_t pitch = 0;
  Rt(cudaMalloc(&device, 4 * kMiB), "cudaMalloc");                       // AT:device
  Rt(cudaMallocHost(&pinned, 2 * kMiB), "cudaMallocHost");               // AT:pinned
  Rt(cudaMallocManaged(&managed, 1 * kMiB), "cudaMallocManaged");        // AT:managed
  Rt(cudaMallocPitch(&pitched, &pitch, 1024, 2048), "cudaMallocPitch");  // AT:pitched
  Rt(cudaMallocAsync(&ordered, 3 * kMiB, nullptr), "cudaMallocAsync");   // AT:ordered
  Rt(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  std::printf("device_reset: pitch %zu\n", pitch);
  Rt(cudaDeviceReset(), "cudaDeviceReset");
  void* after = nullptr;
  Rt(cudaMalloc(&after, 8 * kMiB), "cudaMalloc after the reset");  // AT:after
  Rt(cudaFreeAsync(ordered, nullptr), "cudaFreeAsync");            // it survived the reset
  Rt(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  std::printf("device_reset: done\n");
  return 0;
}
