// 4 threads x 10,000 cudaMalloc/cudaFree pairs, each thread keeping its last
// allocation: the totals must come out exact.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main() {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::vector<std::thread> threads;
  std::vector<void*> kept(kThreads, nullptr);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &kept] {
      for (int i = 0; i < kPerThread; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 4096 + t) != cudaSuccess) std::abort();
        if (i + 1 == kPerThread) {
          kept[t] = p;
        } else if (cudaFree(p) != cudaSuccess) {
          std::abort();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::printf("threads: done\n");
  return 0;
}
