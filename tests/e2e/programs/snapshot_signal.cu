// Takes a snapshot by signal while running: allocates, raises the snapshot
// signal, waits until the snapshot file exists (gpuwatch renames it into
// place, so existence means complete), then frees and exits.
#include <cuda_runtime.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

int main() {
  void* p = nullptr;
  if (cudaMalloc(&p, 6 << 20) != cudaSuccess) return 10;
  const char* out = std::getenv("GPUWATCH_OUTPUT");
  if (out == nullptr) return 11;
  const std::string snapshot = std::string(out) + ".snapshot-1";
  raise(SIGUSR2);
  // Wait for the condition (bounded at 30 s), not for a fixed time.
  for (int i = 0; i < 30000; ++i) {
    struct stat st {};
    if (stat(snapshot.c_str(), &st) == 0) {
      cudaFree(p);
      std::printf("snapshot_signal: snapshot seen\n");
      return 0;
    }
    const timespec ms = {0, 1000000};
    nanosleep(&ms, nullptr);
  }
  std::printf("snapshot_signal: no snapshot\n");
  return 12;
}
