// Allocates, forks, allocates in the child (which exits), then allocates again
// in the parent: a forked child (a DataLoader worker, say) must report only
// what it allocated itself. Prints "parent PID" and "child PID" on stdout.
//
//   fork_child          as above
//   fork_child busy     another thread allocates and frees 20,000 times while
//                       the fork happens (inside gpuwatch at that moment); the
//                       child makes no CUDA call (as a DataLoader worker: CUDA
//                       does not work in the child of an initialised parent)
//                       and exits through exit(), running gpuwatch's handlers
//   fork_child exec     the child execs this program again ("exec-child"),
//                       which allocates 256 KiB and exits
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "fork_child: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

constexpr int kBusyPairs = 20000;

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "exec-child") == 0) {
    void* mine = nullptr;
    Check(cudaMalloc(&mine, 256 << 10), "cudaMalloc(exec child)");  // FORK:exec
    std::printf("child %d\n", static_cast<int>(getpid()));
    return 0;
  }
  void* before = nullptr;
  Check(cudaMalloc(&before, 1 << 20), "cudaMalloc(before)");  // FORK:before
  std::atomic<int> busy_done{0};
  std::thread busy;
  if (std::strcmp(mode, "busy") == 0) {
    busy = std::thread([&busy_done] {
      for (int i = 0; i < kBusyPairs; ++i) {
        void* p = nullptr;
        Check(cudaMalloc(&p, 4096), "cudaMalloc(busy)");
        Check(cudaFree(p), "cudaFree(busy)");
        busy_done.store(i + 1, std::memory_order_release);
      }
    });
    // Fork once the thread is well into its loop, not before it started.
    while (busy_done.load(std::memory_order_acquire) < 100) std::this_thread::yield();
  }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    if (std::strcmp(mode, "exec") == 0) {
      execl("/proc/self/exe", argv[0], "exec-child", static_cast<char*>(nullptr));
      std::_Exit(126);
    }
    if (std::strcmp(mode, "busy") == 0) {
      std::printf("child %d\n", static_cast<int>(getpid()));
      std::exit(0);
    }
    void* mine = nullptr;
    Check(cudaMalloc(&mine, 256 << 10), "cudaMalloc(child)");  // FORK:child
    std::printf("child %d\n", static_cast<int>(getpid()));
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (busy.joinable()) busy.join();
  void* after = nullptr;
  Check(cudaMalloc(&after, 512 << 10), "cudaMalloc(after)");  // FORK:after
  std::printf("parent %d\n", static_cast<int>(getpid()));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}
