// Allocates device memory, prints a line on stdout and one on stderr, and
// exits with the status given as argv[1]: checks that gpuwatch leaves output
// and exit status alone.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, 1 << 20);
  std::printf("exit_with: cudaMalloc -> %s\n", cudaGetErrorName(err));
  std::fprintf(stderr, "exit_with: stderr line\n");
  return argc > 1 ? std::atoi(argv[1]) : 0;
}
