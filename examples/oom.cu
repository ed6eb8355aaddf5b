// Runs out of device memory the way a training job does: a cache that keeps
// growing until cudaMalloc fails. gpuwatch writes an OOM report at the moment
// of the failure, naming the failed request and everything live by site.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

constexpr size_t kChunk = size_t{256} << 20;  // 256 MiB

__attribute__((noinline)) void* GrowCache() {
  void* chunk = nullptr;
  const cudaError_t err = cudaMalloc(&chunk, kChunk);  // fails when the device is full
  return err == cudaSuccess ? chunk : nullptr;
}

}  // namespace

int main() {
  std::vector<void*> cache;
  for (;;) {
    void* chunk = GrowCache();
    if (chunk == nullptr) break;
    cache.push_back(chunk);
    if (cache.size() > 4096) break;  // 1 TiB: no device is that large
  }
  std::printf("oom: cudaMalloc failed after %zu chunks of 256 MiB (%s)\n", cache.size(),
              cudaGetErrorString(cudaGetLastError()));
  for (void* chunk : cache) cudaFree(chunk);
  return 0;
}
