// Prints how many descriptors the process has open after its first CUDA
// call ("fds N"), so that a test can tell how many gpuwatch keeps.
#include <cuda_runtime.h>
#include <dirent.h>

#include <cstdio>

int main() {
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 2;
  int open_fds = -1;  // the directory's own descriptor is listed too
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++open_fds;
  }
  closedir(dir);
  std::printf("fds %d\n", open_fds);
  return cudaFree(p) == cudaSuccess ? 0 : 3;
}
