// A training-loop-shaped program that leaks device memory.
//
// Each iteration allocates a scratch buffer and frees it (balanced), and also
// allocates a small "history" buffer that it keeps and never frees: the kind of
// leak that grows by the same amount every step. gpuwatch's report names the
// line of the cudaMalloc that leaked and the bytes it holds.
//
// Build: part of the gpuwatch build (examples/). Run: gpuwatch run -- ./leaky_loop
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kIterations = 8;
constexpr size_t kScratchBytes = 4 << 20;    // freed every iteration
constexpr size_t kHistoryBytes = 256 << 10;  // kept every iteration: the leak

__global__ void Scale(float* data, size_t n, float factor) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] *= factor;
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "leaky_loop: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

float* AllocateHistory() {
  float* history = nullptr;
  Check(cudaMalloc(&history, kHistoryBytes), "cudaMalloc(history)");  // leaks
  return history;
}

}  // namespace

int main() {
  const size_t n = kScratchBytes / sizeof(float);
  std::vector<float> host(n, 1.0f);
  std::vector<float*> history;

  for (int step = 0; step < kIterations; ++step) {
    float* scratch = nullptr;
    Check(cudaMalloc(&scratch, kScratchBytes), "cudaMalloc(scratch)");
    Check(cudaMemcpy(scratch, host.data(), kScratchBytes, cudaMemcpyHostToDevice), "copy in");
    Scale<<<static_cast<unsigned>((n + 255) / 256), 256>>>(scratch, n, 2.0f);
    Check(cudaGetLastError(), "launch");
    Check(cudaMemcpy(host.data(), scratch, kScratchBytes, cudaMemcpyDeviceToHost), "copy out");
    Check(cudaFree(scratch), "cudaFree(scratch)");
    history.push_back(AllocateHistory());
  }
  std::printf("leaky_loop: %d steps done, %zu history buffers kept\n", kIterations, history.size());
  return 0;
}
