// The program tests/html/check_html.py renders (keep the two in step).
//
// `html_steps` (no argument): 64 MiB of weights at once, then 12 steps each
// allocating a 4 MiB scratch buffer, holding it about 4 ms and freeing it,
// then a mark "step N"; then leaks through one helper line, Leak(), from
// three callers: 3 x 512 B from CallerA, 2 x 64 KiB from CallerB and 1 MiB
// from CallerC. The weights are freed at the end.
//
// `html_steps paths`: 1,000 call paths (Path<0> ... Path<999>) through the
// same helper line, each leaking 4 KiB: a large report whose sites differ
// only below their top frame.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// Exits 1 naming the call when it failed.
void Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "html_steps: %s failed: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

constexpr size_t kMiB = size_t{1} << 20;

__attribute__((noinline)) void* Leak(size_t size) {
  void* p = nullptr;
  Check(cudaMalloc(&p, size), "cudaMalloc(leak)");  // HTML:leak
  return p;
}

__attribute__((noinline)) void CallerA(std::vector<void*>* kept) {
  for (int i = 0; i < 3; ++i) kept->push_back(Leak(512));
}
__attribute__((noinline)) void CallerB(std::vector<void*>* kept) {
  for (int i = 0; i < 2; ++i) kept->push_back(Leak(64 << 10));
}
__attribute__((noinline)) void CallerC(std::vector<void*>* kept) { kept->push_back(Leak(kMiB)); }

template <int N>
__attribute__((noinline)) void Path(std::vector<void*>* kept) {
  kept->push_back(Leak(4096));
}
template <int... N>
void AllPaths(std::integer_sequence<int, N...> /*paths*/, std::vector<void*>* kept) {
  (Path<N>(kept), ...);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<void*> kept;
  if (argc > 1 && std::strcmp(argv[1], "paths") == 0) {
    AllPaths(std::make_integer_sequence<int, 1000>{}, &kept);
    std::printf("html_steps: %zu paths\n", kept.size());
    return 0;
  }
  using MarkFn = int (*)(const char*);
  const auto mark = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "gpuwatch_mark"));
  void* weights = nullptr;
  Check(cudaMalloc(&weights, 64 * kMiB), "cudaMalloc(weights)");  // HTML:weights
  for (int i = 1; i <= 12; ++i) {
    void* scratch = nullptr;
    Check(cudaMalloc(&scratch, 4 * kMiB), "cudaMalloc(scratch)");  // HTML:scratch
    Check(cudaMemset(scratch, 0, 4 * kMiB), "cudaMemset");
    usleep(4000);  // the step's work: keeps the steps apart on the chart's time axis
    Check(cudaFree(scratch), "cudaFree(scratch)");
    usleep(1000);
    if (mark != nullptr) mark(("step " + std::to_string(i)).c_str());
  }
  CallerA(&kept);
  CallerB(&kept);
  CallerC(&kept);
  Check(cudaFree(weights), "cudaFree(weights)");
  std::printf("html_steps: done\n");
  return 0;
}
