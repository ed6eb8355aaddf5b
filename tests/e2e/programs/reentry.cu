// gpuwatch inside a program that is not gpuwatch's: reports that callbacks
// cause, and signals that come while gpuwatch is at work (reentry_test.cc).
//   reentry oom     allocates 256 MiB chunks until the device is full
//   reentry reset   leaks 1 MiB, then cudaDeviceReset destroys the context
//   reentry signal locked SKIP | unlocked
//                   a SIGTERM handler that calls exit(3), installed before
//                   the first CUDA call; SIGTERM then arrives inside gpuwatch
//                   in the second cudaMalloc, while it holds its lock after
//                   SKIP others, or right after it released one
//                   (thread_probe.c raises it)
//   reentry snapshot_term
//                   takes a snapshot (gpuwatch_snapshot) on its main thread;
//                   SIGTERM, with its default action, arrives once the
//                   report's temporary file is written, before its rename
//                   (thread_probe.c raises it)
// After the failure or the reset, the program waits until the report the
// call caused is on disk (GPUWATCH_OUTPUT.oom-1 or .context-1), so that it is
// not written by the exit instead: the test sees which thread wrote it.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void ExitOnTerm(int) { std::exit(3); }  // as many programs do: exit handlers run

// Waits up to 60 s for GPUWATCH_OUTPUT + suffix to exist.
bool WaitForReport(const char* suffix) {
  const char* output = std::getenv("GPUWATCH_OUTPUT");
  if (output == nullptr) return false;
  const std::string path = std::string(output) + suffix;
  for (int i = 0; i < 6000; ++i) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) return true;
    poll(nullptr, 0, 10);
  }
  std::fprintf(stderr, "reentry: %s was not written\n", path.c_str());
  return false;
}

int Oom() {
  std::vector<void*> chunks;
  for (;;) {
    void* chunk = nullptr;
    if (cudaMalloc(&chunk, size_t{256} << 20) != cudaSuccess) break;  // AT:oom
    chunks.push_back(chunk);
  }
  const bool written = WaitForReport(".oom-1");
  for (void* chunk : chunks) cudaFree(chunk);
  return written ? 0 : 1;
}

int Reset() {
  void* kept = nullptr;
  if (cudaMalloc(&kept, 1 << 20) != cudaSuccess) return 1;  // AT:reset_leak
  if (cudaDeviceReset() != cudaSuccess) return 1;
  return WaitForReport(".context-1") ? 0 : 1;
}

int Signal(const char* when, const char* skip) {
  struct sigaction action {};
  action.sa_handler = ExitOnTerm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  void* first = nullptr;
  if (cudaMalloc(&first, 1 << 20) != cudaSuccess) return 1;
  auto* locked = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "gwtest_interrupt_locked"));
  auto* unlocked = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gwtest_interrupt_unlocked"));
  if (locked == nullptr || unlocked == nullptr) {
    std::fprintf(stderr, "reentry: thread_probe is not preloaded\n");
    return 2;
  }
  if (std::strcmp(when, "locked") == 0) {
    locked(skip != nullptr ? std::atoi(skip) : 0);
  } else {
    unlocked();
  }
  void* second = nullptr;
  cudaMalloc(&second, 1 << 20);  // SIGTERM inside gpuwatch: exit(3) from the handler
  std::fprintf(stderr, "reentry: SIGTERM was not raised inside gpuwatch\n");
  return 4;
}

int SnapshotTerm() {
  void* kept = nullptr;
  if (cudaMalloc(&kept, 1 << 20) != cudaSuccess) return 1;
  auto* interrupt = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gwtest_interrupt_rename"));
  auto* snapshot = reinterpret_cast<int (*)(const char*)>(dlsym(RTLD_DEFAULT, "gpuwatch_snapshot"));
  if (interrupt == nullptr || snapshot == nullptr) {
    std::fprintf(stderr, "reentry: thread_probe or gpuwatch is not preloaded\n");
    return 2;
  }
  interrupt();
  snapshot("interrupted");  // SIGTERM before its rename: the process ends there
  std::fprintf(stderr, "reentry: SIGTERM was not raised inside the snapshot\n");
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (std::strcmp(argv[1], "oom") == 0) return Oom();
  if (std::strcmp(argv[1], "reset") == 0) return Reset();
  if (std::strcmp(argv[1], "snapshot_term") == 0) return SnapshotTerm();
  if (std::strcmp(argv[1], "signal") == 0 && argc >= 3) {
    return Signal(argv[2], argc >= 4 ? argv[3] : nullptr);
  }
  return 2;
}
