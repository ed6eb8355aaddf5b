// A daemon started with stdin, stdout and stderr closed. After its first CUDA
// call (gpuwatch attached and made its pipes and sockets by then) it checks
// that descriptors 0-2 are still closed, as its parent left them, and writes
// to them bytes gpuwatch's pipes would take for requests. The exit status is
// the mask of the descriptors among 0-2 that something opened: 0 when none.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

int main() {
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 64;  // LEAK:closed
  int opened = 0;
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) opened |= 1 << fd;
  }
  const char requests[] = "ssss rrrr \x8f\x8f";
  for (int fd = 0; fd < 3; ++fd) (void)!write(fd, requests, sizeof(requests) - 1);
  return opened;
}
