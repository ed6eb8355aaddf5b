// Allocation sites across memory kinds and both APIs, some balanced by frees.
// Lines that leak carry a "// LEAK:<name>" marker; the test finds each
// marker's line number in this file and expects the report to name it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

void Rt(cudaError_t err) {
  if (err != cudaSuccess) std::exit(10);
}
void Drv(CUresult err) {
  if (err != CUDA_SUCCESS) std::exit(11);
}

__attribute__((noinline)) void* LeakDevice() {
  void* p = nullptr;
  Rt(cudaMalloc(&p, 3 << 20));  // LEAK:device
  return p;
}

__attribute__((noinline)) void Balanced() {
  void* p = nullptr;
  Rt(cudaMalloc(&p, 5 << 20));  // balanced: freed below
  Rt(cudaFree(p));
}

__attribute__((noinline)) void* LeakAsync(cudaStream_t stream) {
  void* p = nullptr;
  Rt(cudaMallocAsync(&p, 1 << 20, stream));  // LEAK:pool
  return p;
}

__attribute__((noinline)) void* LeakManaged() {
  void* p = nullptr;
  Rt(cudaMallocManaged(&p, 2 << 20));  // LEAK:managed
  return p;
}

__attribute__((noinline)) CUdeviceptr LeakDriver() {
  CUdeviceptr p = 0;
  Drv(cuMemAlloc(&p, 768 << 10));  // LEAK:driver
  return p;
}

__attribute__((noinline)) void LeakVmm() {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  const size_t size = 4 << 20;
  CUdeviceptr base = 0;
  Drv(cuMemAddressReserve(&base, size, 0, 0, 0));
  CUmemGenericAllocationHandle handle;
  Drv(cuMemCreate(&handle, size, &prop, 0));  // LEAK:vmm
  Drv(cuMemMap(base, size, 0, handle, 0));
}

__attribute__((noinline)) void* LeakPinned() {
  void* p = nullptr;
  Rt(cudaMallocHost(&p, 96 << 10));  // LEAK:pinned
  return p;
}

}  // namespace

int main() {
  cudaStream_t stream = nullptr;
  Rt(cudaStreamCreate(&stream));
  for (int i = 0; i < 2; ++i) LeakDevice();
  for (int i = 0; i < 3; ++i) Balanced();
  LeakAsync(stream);
  LeakManaged();
  LeakDriver();
  LeakVmm();
  LeakPinned();
  Rt(cudaStreamSynchronize(stream));
  std::printf("leak_sites: done\n");
  return 0;
}
