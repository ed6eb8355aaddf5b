// Exercises allocation, copy and launch paths of both CUDA APIs with known
// sizes, so that tests can check gpuwatch's counts and bytes exactly.
// Keep the expectations in e2e_test.cc in step with this file.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

__global__ void Touch(char* p) { p[threadIdx.x] = 1; }

void Rt(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "api_mix: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void Drv(CUresult err, const char* what) {
  if (err != CUDA_SUCCESS) {
    std::fprintf(stderr, "api_mix: %s: CUresult %d\n", what, static_cast<int>(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  // Runtime device memory: 3 x 1 MiB, 2 freed; one pitched allocation, freed.
  void* dev[3];
  for (auto& p : dev) Rt(cudaMalloc(&p, 1 * kMiB), "cudaMalloc");
  Rt(cudaFree(dev[0]), "cudaFree");
  Rt(cudaFree(dev[1]), "cudaFree");
  void* pitched = nullptr;
  size_t pitch = 0;
  Rt(cudaMallocPitch(&pitched, &pitch, 1000, 10), "cudaMallocPitch");
  Rt(cudaFree(pitched), "cudaFree(pitched)");

  // Stream-ordered: 2 x 512 KiB, one freed.
  cudaStream_t stream = nullptr;
  Rt(cudaStreamCreate(&stream), "cudaStreamCreate");
  void* pool[2];
  for (auto& p : pool) Rt(cudaMallocAsync(&p, 512 * kKiB, stream), "cudaMallocAsync");
  Rt(cudaFreeAsync(pool[0], stream), "cudaFreeAsync");

  // Managed 2 MiB, kept. Pinned host: 64 KiB kept, 32 KiB freed.
  void* managed = nullptr;
  Rt(cudaMallocManaged(&managed, 2 * kMiB), "cudaMallocManaged");
  void* pinned = nullptr;
  Rt(cudaMallocHost(&pinned, 64 * kKiB), "cudaMallocHost");
  void* pinned2 = nullptr;
  Rt(cudaHostAlloc(&pinned2, 32 * kKiB, cudaHostAllocDefault), "cudaHostAlloc");
  Rt(cudaFreeHost(pinned2), "cudaFreeHost");

  // Driver: 2 x 256 KiB, one freed.
  CUdeviceptr d1 = 0;
  CUdeviceptr d2 = 0;
  Drv(cuMemAlloc(&d1, 256 * kKiB), "cuMemAlloc");
  Drv(cuMemAlloc(&d2, 256 * kKiB), "cuMemAlloc");
  Drv(cuMemFree(d1), "cuMemFree");

  // VMM: two 2 MiB mappings in one reservation, one unmapped and released.
  CUdevice device = 0;
  Drv(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  Drv(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "granularity");
  const size_t chunk = 2 * kMiB;
  if (granularity == 0 || chunk % granularity != 0) return 2;
  CUdeviceptr base = 0;
  Drv(cuMemAddressReserve(&base, 2 * chunk, 0, 0, 0), "cuMemAddressReserve");
  CUmemGenericAllocationHandle h[2];
  for (int i = 0; i < 2; ++i) {
    Drv(cuMemCreate(&h[i], chunk, &prop, 0), "cuMemCreate");
    Drv(cuMemMap(base + i * chunk, chunk, 0, h[i], 0), "cuMemMap");
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  Drv(cuMemSetAccess(base, 2 * chunk, &access, 1), "cuMemSetAccess");
  Drv(cuMemUnmap(base + chunk, chunk), "cuMemUnmap");
  Drv(cuMemRelease(h[1]), "cuMemRelease");

  // Copies: runtime H2D, D2H, D2D of 1 MiB; 10 async H2D of 4 KiB from
  // pinned memory; driver H2D and D2H of 256 KiB.
  std::vector<char> host(1 * kMiB, 1);
  Rt(cudaMemcpy(dev[2], host.data(), 1 * kMiB, cudaMemcpyHostToDevice), "H2D");
  Rt(cudaMemcpy(host.data(), dev[2], 1 * kMiB, cudaMemcpyDeviceToHost), "D2H");
  Rt(cudaMemcpy(managed, dev[2], 1 * kMiB, cudaMemcpyDeviceToDevice), "D2D");
  for (int i = 0; i < 10; ++i) {
    Rt(cudaMemcpyAsync(dev[2], pinned, 4 * kKiB, cudaMemcpyHostToDevice, stream), "async H2D");
  }
  Drv(cuMemcpyHtoD(d2, host.data(), 256 * kKiB), "cuMemcpyHtoD");
  Drv(cuMemcpyDtoH(host.data(), d2, 256 * kKiB), "cuMemcpyDtoH");
  Rt(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  // Five kernel launches.
  for (int i = 0; i < 5; ++i) Touch<<<1, 32, 0, stream>>>(static_cast<char*>(dev[2]));
  Rt(cudaGetLastError(), "launch");
  Rt(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  std::printf("api_mix: done\n");
  return 0;
}
