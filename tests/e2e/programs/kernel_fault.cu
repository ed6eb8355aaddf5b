// A kernel that faults, as a GPU reports it: Scatter writes through indices that are all far
// out of bounds (each int of the index buffer is 0x7f7f7f7f: 8 GiB past a 256 KiB buffer), so
// on a GPU its launch succeeds and the illegal address surfaces at a later call (the next
// synchronous copy; where a driver surfaces it is a question tests/gpu/validate.py's `triage`
// part asks); the program checks the error, says so and exits 1 (its device memory still
// allocated). The simulator does not run kernels: there Scatter faults only under
// GWSIM_FAULT_KERNEL=Scatter, and without the variable the program runs to its end and prints
// "kernel_fault: done". With the argument "unparsed" it makes one call that fails before
// anything in it can be read (cudaGraphAddNode without node parameters) and exits 0.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

constexpr size_t kCount = 64 << 10;  // floats: 256 KiB per buffer

__global__ void Fill(float* data, size_t n, float value) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = value;
}

__global__ void Scale(float* data, size_t n, float factor) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

// Writes through an index it never checks: the fault.
__global__ void Scatter(float* data, const int* index, size_t n) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[index[i]] = 1.0f;
}

bool Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "kernel_fault: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "unparsed") == 0) {
    cudaGraph_t graph = nullptr;
    if (!Check(cudaGraphCreate(&graph, 0), "cudaGraphCreate")) return 1;
    cudaGraphNode_t node = nullptr;
    cudaError_t err = cudaSuccess;
    err = cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, nullptr);  // fails unread
    std::printf("kernel_fault: unparsed call returned %d\n", static_cast<int>(err));
    cudaGraphDestroy(graph);
    return 0;
  }
  float* data = nullptr;
  int* index = nullptr;
  if (!Check(cudaMalloc(&data, kCount * sizeof(float)), "cudaMalloc")) return 1;
  if (!Check(cudaMalloc(&index, kCount * sizeof(int)), "cudaMalloc")) return 1;
  // Every index far out of bounds (cudaMalloc leaves the buffer as it was, often zeros: no fault).
  if (!Check(cudaMemset(index, 0x7f, kCount * sizeof(int)), "cudaMemset")) return 1;
  const unsigned blocks = (kCount + 255) / 256;
  Fill<<<blocks, 256>>>(data, kCount, 1.0f);
  if (!Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return 1;  // the last good sync
  cudaStream_t stream = nullptr;
  if (!Check(cudaStreamCreate(&stream), "cudaStreamCreate")) return 1;
  Scale<<<blocks, 256, 0, stream>>>(data, kCount, 2.0f);     // launches Scale
  Scatter<<<blocks, 256, 0, stream>>>(data, index, kCount);  // launches Scatter
  if (!Check(cudaGetLastError(), "launch")) return 1;        // the launch itself succeeded
  float head[16];
  if (!Check(cudaMemcpy(head, data, sizeof(head), cudaMemcpyDeviceToHost),  // surfaces here
             "cudaMemcpy")) {
    cudaFree(index);  // fails as well: the context is unusable
    return 1;
  }
  cudaStreamDestroy(stream);
  cudaFree(index);
  cudaFree(data);
  std::printf("kernel_fault: done\n");
  return 0;
}
