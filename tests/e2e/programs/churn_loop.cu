// cudaMalloc/cudaFree churn: sites that allocate and free in a loop, and
// sites that do not churn. Lines the test names carry a marker.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

static void Check(cudaError_t err) {
  if (err != cudaSuccess) std::exit(10);
}

// One buffer per step, freed before the next: a cycle per step.
__attribute__((noinline)) static void Step() {
  void* p = nullptr;
  Check(cudaMalloc(&p, 1u << 20));  // CHURN:step
  Check(cudaFree(p));
}

// Two buffers per step from one line, both freed: a cycle per step, two
// allocations. The count is read at run time so that the loop is not
// unrolled into two calls (two stacks, each with cycles of its own).
volatile int g_pair = 2;
__attribute__((noinline)) static void Pair() {
  void* p[2] = {};
  const int n = g_pair;
  for (int i = 0; i < n; ++i) Check(cudaMalloc(&p[i], 64u << 10));  // CHURN:pair
  for (int i = 0; i < n; ++i) Check(cudaFree(p[i]));
}

// Below the threshold: 9 cycles.
__attribute__((noinline)) static void Few() {
  void* p = nullptr;
  Check(cudaMalloc(&p, 4096));  // FEW
  Check(cudaFree(p));
}

// Stream-ordered: the pool reuses its memory, no churn.
__attribute__((noinline)) static void Pooled(cudaStream_t stream) {
  void* p = nullptr;
  Check(cudaMallocAsync(&p, 1u << 20, stream));  // POOLED
  Check(cudaFreeAsync(p, stream));
}

int main() {
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreate(&stream));
  void* kept = nullptr;
  Check(cudaMalloc(&kept, 2u << 20));  // KEPT: held through the loops
  for (int i = 0; i < 50; ++i) Step();
  for (int i = 0; i < 20; ++i) Pair();
  for (int i = 0; i < 9; ++i) Few();
  for (int i = 0; i < 30; ++i) Pooled(stream);
  Check(cudaStreamSynchronize(stream));
  Check(cudaFree(kept));
  std::printf("churn_loop: done\n");
  return 0;
}
