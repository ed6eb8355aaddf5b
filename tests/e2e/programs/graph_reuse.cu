// Graph memory as the driver may hand it out: a captured graph allocates
// 3 MiB, frees it, then allocates 1 MiB, which the driver may place at the
// same address (the lifetimes do not overlap); the 1 MiB is not freed in the
// graph. Launched twice, with the 1 MiB freed in between: the second launch's
// 1 MiB is live at exit. A cudaMalloc of more than the device has free
// then fails: the driver keeps the graph's freed memory for reuse until
// cudaDeviceGraphMemTrim, which comes last. Prints whether the two
// allocations shared an address.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMiB = 1 << 20;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "graph_reuse: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main() {
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t graph = nullptr;
  Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  void* first = nullptr;
  Check(cudaMallocAsync(&first, 3 * kMiB, stream), "cudaMallocAsync first");  // AT:first
  Check(cudaMemsetAsync(first, 1, 3 * kMiB, stream), "memset first");
  Check(cudaFreeAsync(first, stream), "cudaFreeAsync first");
  void* second = nullptr;
  Check(cudaMallocAsync(&second, kMiB, stream), "cudaMallocAsync second");  // LEAK:second
  Check(cudaMemsetAsync(second, 2, kMiB, stream), "memset second");
  Check(cudaStreamEndCapture(stream, &graph), "end capture");
  std::printf("graph_reuse: addresses %s\n", first == second ? "shared" : "distinct");

  cudaGraphExec_t exec = nullptr;
  Check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  Check(cudaGraphLaunch(exec, stream), "launch 1");
  Check(cudaStreamSynchronize(stream), "sync 1");
  Check(cudaFree(second), "cudaFree second");  // AT:free_second
  Check(cudaGraphLaunch(exec, stream), "launch 2");
  Check(cudaStreamSynchronize(stream), "sync 2");
  Check(cudaGraphExecDestroy(exec), "exec destroy");
  Check(cudaGraphDestroy(graph), "graph destroy");
  size_t free_bytes = 0;
  size_t total = 0;
  Check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  void* too_big = nullptr;
  if (cudaMalloc(&too_big, free_bytes + kMiB) != cudaErrorMemoryAllocation) {  // AT:oom
    std::fprintf(stderr, "graph_reuse: the oversized cudaMalloc did not fail\n");
    return 1;
  }
  (void)cudaGetLastError();
  Check(cudaDeviceGraphMemTrim(0), "trim");
  std::printf("graph_reuse: done\n");
  return 0;
}
