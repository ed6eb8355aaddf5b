// Copies that the findings must describe right: device-to-host copies into
// pageable memory ("to pageable memory", not "from"), many small copies made
// by two instances of one template at the same line (two findings that must
// not read as the same line twice), and one lone copy.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime_program.h"

namespace {

using runtime_program::Check;

template <typename T>
void SmallCopies(T* device, const std::vector<T>& host, int times) {
  for (int i = 0; i < times; ++i) {
    Check(cudaMemcpy(device, host.data(), host.size() * sizeof(T),  // AT:template
                     cudaMemcpyHostToDevice));
  }
}

}  // namespace

int main() {
  constexpr size_t kLarge = 2 << 20;
  void* device = nullptr;
  Check(cudaMalloc(&device, kLarge));
  std::vector<char> pageable(kLarge);
  for (int i = 0; i < 3; ++i) {
    Check(cudaMemcpy(pageable.data(), device, kLarge, cudaMemcpyDeviceToHost));  // AT:to_pageable
  }
  SmallCopies(static_cast<float*>(device), std::vector<float>(256, 1.0f), 120);
  SmallCopies(static_cast<double*>(device), std::vector<double>(128, 1.0), 110);
  Check(cudaMemcpy(device, pageable.data(), kLarge / 2, cudaMemcpyHostToDevice));  // AT:lone
  Check(cudaFree(device));
  std::printf("copy_findings: done\n");
  return 0;
}
