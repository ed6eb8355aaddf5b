// A server that makes a CUDA context per request: each of 4 requests
// allocates, launches a kernel, copies back, frees and resets the device
// (cudaDeviceReset destroys the primary context; the next call makes it
// again). Prints "context_churn: done".
#include <cuda_runtime.h>

#include <cstdio>

#include "runtime_program.h"

namespace {

constexpr int kRequests = 4;

__global__ void Serve(int* out) { *out = 1; }

}  // namespace

int main() {
  using runtime_program::Check;
  for (int i = 0; i < kRequests; ++i) {
    int* out = nullptr;
    int answer = 0;
    Check(cudaMalloc(&out, sizeof(int)));
    Serve<<<1, 1>>>(out);
    Check(cudaGetLastError());
    Check(cudaMemcpy(&answer, out, sizeof(int), cudaMemcpyDeviceToHost));
    Check(cudaFree(out));
    Check(cudaDeviceReset());  // the context ends with the request
  }
  std::printf("context_churn: done\n");
  return 0;
}
