// A training loop driven by its test, for the live view (gpuwatch top and
// gpuwatch exporter read it while it runs). It prints "live_steps: ready"
// once CUDA is up, then reads commands from stdin, one per line:
//   step N   N steps; each allocates and frees a 4 MiB scratch buffer, keeps
//            LEAK_BYTES (default 1 MiB) more, copies 256 KiB host to device
//            from pageable memory, and calls gpuwatch_mark("step") when
//            gpuwatch is loaded; then prints "live_steps: steps TOTAL"
//   free     frees what the steps kept; prints "live_steps: freed"
//   device N cudaSetDevice(N): the next steps allocate there; prints
//            "live_steps: device N"
//   fork     forks a child that makes no CUDA call (as a DataLoader worker)
//            and prints "live_steps: child PID"; the child waits for
//            SIGUSR1 and then exits through exit()
// and exits at the end of its input, leaving what it kept.
//
// Usage: live_steps [LEAK_BYTES]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "live_steps: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

volatile sig_atomic_t g_released = 0;

void OnRelease(int) { g_released = 1; }

// The forked child: no CUDA, until SIGUSR1.
void Child() {
  sigset_t usr1;
  sigset_t old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, &old);
  std::signal(SIGUSR1, OnRelease);
  std::printf("live_steps: child %ld\n", static_cast<long>(getpid()));
  std::fflush(stdout);
  while (g_released == 0) sigsuspend(&old);
  std::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t leak = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{1} << 20;
  using MarkFn = int (*)(const char*);
  const auto mark = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "gpuwatch_mark"));
  Check(cudaFree(nullptr), "cudaFree(0)");
  std::vector<char> host(256 << 10, 1);
  void* staging = nullptr;
  Check(cudaMalloc(&staging, host.size()), "cudaMalloc(staging)");  // LIVE:staging
  std::vector<void*> kept;
  long steps = 0;
  std::printf("live_steps: ready\n");
  std::fflush(stdout);
  char line[128];
  while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    if (std::strncmp(line, "step ", 5) == 0) {
      const long n = std::strtol(line + 5, nullptr, 10);
      for (long i = 0; i < n; ++i) {
        void* scratch = nullptr;
        Check(cudaMalloc(&scratch, 4 << 20), "cudaMalloc(scratch)");  // LIVE:scratch
        Check(cudaFree(scratch), "cudaFree(scratch)");
        void* p = nullptr;
        Check(cudaMalloc(&p, leak), "cudaMalloc(leak)");  // LIVE:leak
        kept.push_back(p);
        Check(cudaMemcpy(staging, host.data(), host.size(), cudaMemcpyHostToDevice),  // LIVE:copy
              "cudaMemcpy");
        if (mark != nullptr) mark("step");
        ++steps;
      }
      std::printf("live_steps: steps %ld\n", steps);
    } else if (std::strncmp(line, "fork", 4) == 0) {
      std::fflush(stdout);
      if (fork() == 0) Child();
    } else if (std::strncmp(line, "device ", 7) == 0) {
      const int device = static_cast<int>(std::strtol(line + 7, nullptr, 10));
      Check(cudaSetDevice(device), "cudaSetDevice");
      std::printf("live_steps: device %d\n", device);
    } else if (std::strncmp(line, "free", 4) == 0) {
      for (void* p : kept) Check(cudaFree(p), "cudaFree(kept)");
      kept.clear();
      std::printf("live_steps: freed\n");
    }
    std::fflush(stdout);
  }
  return 0;
}
