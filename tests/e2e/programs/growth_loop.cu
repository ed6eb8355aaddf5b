// A training-loop-shaped program for growth detection. Each iteration
// allocates and frees a scratch buffer (balanced), keeps LEAK_BYTES more
// (the growth), and calls gpuwatch_mark("step") when gpuwatch is loaded.
//
// Usage: growth_loop ITERATIONS [LEAK_BYTES (default 256 KiB)] [free-at-end|pause|timed|threads]
//   free-at-end: free what was kept before exiting (growth without a leak)
//   timed:       no marks; each iteration lasts at least 2 ms (steady growth
//                over time, for periodic sampling)
//   pause:       in the first iteration, recording is paused while the
//                scratch buffer is freed and 4 MiB more are allocated and kept
//   threads:     the loop runs on 4 threads at once, each marking its steps
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using MarkFn = int (*)(const char*);
using PauseFn = int (*)();

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "growth_loop: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// gpuwatch's API when it is loaded (LD_PRELOAD), else null: the program runs
// the same without it.
template <typename Fn>
Fn Api(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// ITERATIONS steps; what is kept goes into *kept.
void Loop(int iterations, size_t leak, const char* mode, std::vector<void*>* kept) {
  const auto mark = Api<MarkFn>("gpuwatch_mark");
  const auto pause = Api<PauseFn>("gpuwatch_pause");
  const auto resume = Api<PauseFn>("gpuwatch_resume");
  for (int i = 0; i < iterations; ++i) {
    const bool paused = i == 0 && std::strcmp(mode, "pause") == 0 && pause && resume;
    void* scratch = nullptr;
    Check(cudaMalloc(&scratch, 1 << 20), "cudaMalloc(scratch)");  // GROWTH:scratch
    if (paused) pause();
    Check(cudaFree(scratch), "cudaFree(scratch)");  // recorded even while paused
    if (paused) {
      void* hidden = nullptr;
      Check(cudaMalloc(&hidden, 4 << 20), "cudaMalloc(hidden)");  // not recorded
      resume();
    }
    if (leak > 0) {
      void* p = nullptr;
      Check(cudaMalloc(&p, leak), "cudaMalloc(kept)");  // GROWTH:leak
      kept->push_back(p);
    }
    if (std::strcmp(mode, "timed") == 0) {
      // Busy, not asleep: the iteration's length is the workload here.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (std::chrono::steady_clock::now() < until) {
      }
    } else if (mark != nullptr) {
      mark("step");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 10;
  const size_t leak = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t{256} << 10;
  const char* mode = argc > 3 ? argv[3] : "";
  std::vector<std::vector<void*>> kept(1);
  if (std::strcmp(mode, "threads") == 0) {
    kept.resize(4);
    std::vector<std::thread> threads;
    for (auto& k : kept) threads.emplace_back(Loop, iterations, leak, mode, &k);
    for (auto& t : threads) t.join();
  } else {
    Loop(iterations, leak, mode, &kept[0]);
  }
  if (std::strcmp(mode, "free-at-end") == 0) {
    for (void* p : kept[0]) Check(cudaFree(p), "cudaFree(kept)");
  }
  std::printf("growth_loop: %d iterations, %zu bytes kept per iteration\n", iterations, leak);
  return 0;
}
