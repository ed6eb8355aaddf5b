// Functions of the program's own named as CUDA's are (the CUDA samples'
// cudaGraphsManual, cudaGraphsUsingStreamCapture): their allocations and
// copies belong to their own lines, not to their callers'.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;

void Rt(cudaError_t err) {
  if (err != cudaSuccess) std::exit(10);
}

}  // namespace

// Not static, not in a namespace: named exactly as the samples name theirs.
void cudaGraphsManual(char** p) {
  Rt(cudaMalloc(p, kMiB));  // AT:manual
}

void cudaGraphsUsingStreamCapture(char* p) {
  std::vector<char> host(kMiB, 1);
  Rt(cudaMemcpy(p, host.data(), kMiB, cudaMemcpyHostToDevice));  // AT:capture
}

int main() {
  char* p = nullptr;
  cudaGraphsManual(&p);  // AT:call
  cudaGraphsUsingStreamCapture(p);
  std::printf("cuda_named: done\n");
  return 0;
}
