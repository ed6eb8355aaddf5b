// Allocates device memory, prints a line on stdout and one on stderr, and
// exits with the status given as argv[1]: checks that gpuwatch leaves output
// and exit status alone. `exit_with N quick` ends with quick_exit(N), which
// runs at_quick_exit handlers only; `exit_with N exec PROGRAM ARGS...` runs
// PROGRAM in its place (execv) instead of exiting.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, 1 << 20);
  std::printf("exit_with: cudaMalloc -> %s\n", cudaGetErrorName(err));
  std::fprintf(stderr, "exit_with: stderr line\n");
  const int status = argc > 1 ? std::atoi(argv[1]) : 0;
  if (argc > 2 && std::strcmp(argv[2], "quick") == 0) {
    std::fflush(nullptr);  // quick_exit does not flush stdio
    std::quick_exit(status);
  }
  if (argc > 3 && std::strcmp(argv[2], "exec") == 0) {
    std::fflush(nullptr);
    execv(argv[3], argv + 3);
    return 126;
  }
  return status;
}
