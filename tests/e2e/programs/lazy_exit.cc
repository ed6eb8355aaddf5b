// Uses CUDA (1 MiB left live), waits until gpuwatch has written a checkpoint
// (argv[1], the report path), then calls a function whose library needs a
// symbol nobody defines: the dynamic loader resolves it lazily, fails, and
// ends the process with status 127, running no exit handler.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lazy_exit REPORT_PATH LIBRARY\n");
    return 2;
  }
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;  // LEAK:lazy
  // The checkpoint comes from gpuwatch's own thread: wait for its file.
  struct stat st {};
  for (int waited_ms = 0; stat(argv[1], &st) != 0; waited_ms += 10) {
    if (waited_ms > 20000) {
      std::fprintf(stderr, "lazy_exit: no checkpoint after 20 s\n");
      return 3;
    }
    poll(nullptr, 0, 10);
  }
  void* lib = dlopen(argv[2], RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "lazy_exit: %s\n", dlerror());
    return 4;
  }
  auto call = reinterpret_cast<void (*)()>(dlsym(lib, "lazy_exit_call_missing"));
  if (call == nullptr) return 5;
  std::fflush(stdout);
  call();  // ends the process with status 127
  return 0;
}
