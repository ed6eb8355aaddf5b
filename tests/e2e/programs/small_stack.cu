// A host whose threads have small stacks. `thread`: a thread made with a
// 128 KiB stack allocates 1 MiB and calls exit(8) itself, so the exit
// handlers (gpuwatch's exit report among them) run on that stack. `main`:
// main allocates 1 MiB and returns 0; run it under `ulimit -s 128`.
#include <cuda_runtime.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void* Leak(void*) {
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) {  // LEAK:thread
    std::fprintf(stderr, "small_stack: cudaMalloc failed\n");
    std::exit(1);
  }
  std::printf("small_stack: thread exits\n");
  std::fflush(stdout);
  std::exit(8);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "thread") == 0) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 << 10);
    pthread_t thread;
    if (pthread_create(&thread, &attr, Leak, nullptr) != 0) return 1;
    pthread_join(thread, nullptr);  // never returns: the thread exits the process
    return 1;
  }
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;  // LEAK:main
  std::printf("small_stack: main returns\n");
  return 0;
}
