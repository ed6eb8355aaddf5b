// Allocates, forks, allocates in the child (which exits), then allocates again
// in the parent: a forked child (a DataLoader worker, say) must report only
// what it allocated itself. Prints "parent PID" and "child PID" on stdout.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "fork_child: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  void* before = nullptr;
  Check(cudaMalloc(&before, 1 << 20), "cudaMalloc(before)");  // FORK:before
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    void* mine = nullptr;
    Check(cudaMalloc(&mine, 256 << 10), "cudaMalloc(child)");  // FORK:child
    std::printf("child %d\n", static_cast<int>(getpid()));
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  void* after = nullptr;
  Check(cudaMalloc(&after, 512 << 10), "cudaMalloc(after)");  // FORK:after
  std::printf("parent %d\n", static_cast<int>(getpid()));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}
