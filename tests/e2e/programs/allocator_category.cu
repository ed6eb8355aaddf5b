// Memory allocated through a function named like PyTorch's caching allocator
// (c10::cuda::CUDACachingAllocator::...), left live at exit: kept on purpose
// by default, a leak in PyTorch's per-tensor modes.
#include <cuda_runtime.h>

#include <cstdio>

namespace c10::cuda::CUDACachingAllocator {

__attribute__((noinline)) void* Malloc(size_t bytes) {
  void* p = nullptr;
  return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;  // AT:malloc
}

}  // namespace c10::cuda::CUDACachingAllocator

int main() {
  if (c10::cuda::CUDACachingAllocator::Malloc(3 << 20) == nullptr) return 1;
  std::printf("allocator_category: done\n");
  return 0;
}
