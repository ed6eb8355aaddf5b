// CUDA graphs: a graph captured from a stream (an async copy in, a kernel,
// an async copy out, a stream-ordered allocation freed in the graph) and a
// graph built node by node (a memcpy node and a memory allocation node that
// is not freed in the graph), each launched several times. Copies happen and
// memory is allocated at each launch, not where the graph was recorded.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kLaunches = 3;
constexpr size_t kBytes = 1 << 20;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "graphs: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void Scale(float* data, size_t n) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.0f;
}

}  // namespace

int main() {
  float* pinned = nullptr;
  Check(cudaMallocHost(&pinned, kBytes), "cudaMallocHost");
  float* device = nullptr;
  Check(cudaMalloc(&device, kBytes), "cudaMalloc");
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  // Captured: nothing is copied or allocated while capturing.
  cudaGraph_t captured = nullptr;
  Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  Check(cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, stream),  // AT:captured_in
        "captured copy in");
  void* scratch = nullptr;
  Check(cudaMallocAsync(&scratch, 2 * kBytes, stream), "captured cudaMallocAsync");  // AT:scratch
  Scale<<<256, 1024, 0, stream>>>(device, kBytes / sizeof(float));
  Check(cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream),  // AT:captured_out
        "captured copy out");
  Check(cudaFreeAsync(scratch, stream), "captured cudaFreeAsync");
  Check(cudaStreamEndCapture(stream, &captured), "end capture");
  cudaGraphExec_t captured_exec = nullptr;
  Check(cudaGraphInstantiate(&captured_exec, captured, 0), "instantiate captured");
  for (int i = 0; i < kLaunches; ++i) Check(cudaGraphLaunch(captured_exec, stream), "launch");
  Check(cudaStreamSynchronize(stream), "sync");

  // Built node by node: a 64 KiB copy, and 4 MiB allocated at the launch and
  // not freed in the graph: live until cudaFree, leaked here.
  cudaGraph_t built = nullptr;
  Check(cudaGraphCreate(&built, 0), "cudaGraphCreate");
  cudaGraphNode_t copy_node = nullptr;
  const size_t node_bytes = 64 << 10;
  const cudaMemcpyKind h2d = cudaMemcpyHostToDevice;
  // The call on one line, so that the report's line is the marker's.
  // clang-format off
  const cudaError_t made = cudaGraphAddMemcpyNode1D(&copy_node, built, nullptr, 0, device, pinned, node_bytes, h2d);  // AT:node_copy
  // clang-format on
  Check(made, "memcpy node");
  cudaMemAllocNodeParams alloc{};
  alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  alloc.poolProps.location.type = cudaMemLocationTypeDevice;
  alloc.poolProps.location.id = 0;
  alloc.bytesize = 4 * kBytes;
  cudaGraphNode_t alloc_node = nullptr;
  Check(cudaGraphAddMemAllocNode(&alloc_node, built, &copy_node, 1, &alloc),  // LEAK:graph
        "alloc node");
  // A kernel node added explicitly: it runs once per launch of the graph.
  cudaKernelNodeParams kernel{};
  size_t count = node_bytes / sizeof(float);
  void* args[] = {&device, &count};
  kernel.func = reinterpret_cast<void*>(&Scale);
  kernel.gridDim = dim3(1);
  kernel.blockDim = dim3(256);
  kernel.kernelParams = args;
  cudaGraphNode_t kernel_node = nullptr;
  Check(cudaGraphAddKernelNode(&kernel_node, built, &copy_node, 1, &kernel), "kernel node");
  cudaGraphExec_t built_exec = nullptr;
  Check(cudaGraphInstantiate(&built_exec, built, 0), "instantiate built");
  Check(cudaGraphLaunch(built_exec, stream), "launch built");
  Check(cudaStreamSynchronize(stream), "sync built");

  Check(cudaGraphExecDestroy(captured_exec), "exec destroy");
  Check(cudaGraphDestroy(captured), "graph destroy");
  Check(cudaGraphExecDestroy(built_exec), "exec destroy");
  Check(cudaGraphDestroy(built), "graph destroy");
  Check(cudaFree(device), "cudaFree");
  Check(cudaFreeHost(pinned), "cudaFreeHost");
  std::printf("graphs: done\n");
  return 0;
}
