// Every allocation goes through the program's own helper, Alloc(), as in a
// program with its own allocator wrapper: without --alloc-fn every site is a
// line of the helper; with it, the helper's callers. The helper takes one of
// two lines by size, so that one caller's stacks differ only inside it (they
// merge when the helper is trimmed). AllocScratch() is a helper of the helper
// (a glob "Alloc*" names both). Lines the test names carry a marker.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

static void Check(cudaError_t err) {
  if (err != cudaSuccess) std::exit(10);
}

__attribute__((noinline, noclone)) static void* Alloc(size_t bytes) {
  void* p = nullptr;
  // Each call followed by code of its own, so that the compiler does not
  // merge the two calls into one.
  if (bytes >= (4u << 20)) {
    Check(cudaMalloc(&p, bytes));  // HELPER:large
    asm volatile("# large" : : : "memory");
  } else {
    Check(cudaMalloc(&p, bytes));  // HELPER:small
    asm volatile("# small" : : : "memory");
  }
  return p;
}

__attribute__((noinline, noclone)) static void* AllocScratch(size_t bytes) {
  void* p = Alloc(bytes);                  // SCRATCH:inner
  asm volatile("" : : "r"(p) : "memory");  // no tail call: its frame stays
  return p;
}

int main() {
  void* weights = Alloc(3u << 20);  // CALLER:weights
  const size_t sizes[] = {4u << 20, 1u << 20};
  void* cache[2];
  for (int i = 0; i < 2; ++i) cache[i] = Alloc(sizes[i]);  // CALLER:cache
  void* scratch = AllocScratch(1u << 20);                  // CALLER:scratch
  std::printf("alloc_helper: %p %p %p %p\n", weights, cache[0], cache[1], scratch);
  return 0;  // all of it leaks
}
