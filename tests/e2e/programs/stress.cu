// 8 threads x 100,000 cudaMalloc/cudaFree pairs while another thread asks
// gpuwatch for snapshots through its C API: totals must be exact, nothing may
// deadlock, and every snapshot must be a complete report.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  const int pairs = argc > 2 ? std::atoi(argv[2]) : 100000;
  using SnapshotFn = int (*)(const char*);
  auto snapshot = reinterpret_cast<SnapshotFn>(dlsym(RTLD_DEFAULT, "gpuwatch_snapshot"));
  std::atomic<int> running{threads};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&running, pairs] {
      for (int i = 0; i < pairs; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 256 + (i % 7) * 64) != cudaSuccess || cudaFree(p) != cudaSuccess) {
          std::abort();
        }
      }
      running.fetch_sub(1);
    });
  }
  int snapshots = 0;
  while (running.load() > 0 && snapshot != nullptr && snapshots < 50) {
    if (snapshot("stress") == 0) ++snapshots;
  }
  for (auto& w : workers) w.join();
  std::printf("stress: %d threads x %d pairs, %d snapshots\n", threads, pairs, snapshots);
  return 0;
}
