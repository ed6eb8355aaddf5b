// A training-loop-shaped program that leaks device memory.
//
// Each iteration allocates a scratch buffer and frees it (balanced), and also
// allocates a small "history" buffer that it keeps and never frees: the kind of
// leak that grows by the same amount every step. gpuwatch's report names the
// line of the cudaMalloc that leaked and the bytes it holds.
//
// Each step ends with gpuwatch_mark("step") when gpuwatch is loaded, so the
// report also shows the leak as growth: 256 KiB more live per mark.
//
// Build: part of the gpuwatch build (examples/).
// Run:   gpuwatch run -- ./leaky_loop [STEPS]     (8 steps by default)
#include <cuda_runtime.h>
#include <dlfcn.h>

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

// gpuwatch_mark() when gpuwatch is loaded (`gpuwatch run`, LD_PRELOAD), else
// null: the program runs the same without it.
using MarkFn = int (*)(const char* label);
MarkFn GpuwatchMark() { return reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "gpuwatch_mark")); }

float* AllocateHistory() {
  float* history = nullptr;
  Check(cudaMalloc(&history, kHistoryBytes), "cudaMalloc(history)");  // leaks
  return history;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : kIterations;
  const MarkFn mark = GpuwatchMark();
  const size_t n = kScratchBytes / sizeof(float);
  std::vector<float> host(n, 1.0f);
  std::vector<float*> history;

  for (int step = 0; step < steps; ++step) {
    float* scratch = nullptr;
    Check(cudaMalloc(&scratch, kScratchBytes), "cudaMalloc(scratch)");
    Check(cudaMemcpy(scratch, host.data(), kScratchBytes, cudaMemcpyHostToDevice), "copy in");
    Scale<<<static_cast<unsigned>((n + 255) / 256), 256>>>(scratch, n, 2.0f);
    Check(cudaGetLastError(), "launch");
    Check(cudaMemcpy(host.data(), scratch, kScratchBytes, cudaMemcpyDeviceToHost), "copy out");
    Check(cudaFree(scratch), "cudaFree(scratch)");
    history.push_back(AllocateHistory());
    if (mark != nullptr) mark("step");
  }
  std::printf("leaky_loop: %d steps done, %zu history buffers kept\n", steps, history.size());
  return 0;
}
