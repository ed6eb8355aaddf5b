// A host that throws and catches C++ exceptions, optionally after using CUDA.
// Under LD_PRELOAD gpuwatch must not change how _Unwind_RaiseException and
// friends resolve, so every throw still lands in its catch.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#ifdef WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

int Deep(int depth) {
  if (depth == 0) throw std::runtime_error("bottom");
  return Deep(depth - 1) + 1;
}

}  // namespace

int main() {
#ifdef WITH_CUDA
  void* p = nullptr;
  if (cudaMalloc(&p, 1024) != cudaSuccess) std::printf("cudaMalloc failed\n");
#endif
  int caught = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      Deep(i % 50);
    } catch (const std::runtime_error& e) {
      if (std::strcmp(e.what(), "bottom") == 0) ++caught;
    }
  }
#ifdef WITH_CUDA
  cudaFree(p);
#endif
  std::printf("caught %d\n", caught);
  return caught == 1000 ? 0 : 1;
}
