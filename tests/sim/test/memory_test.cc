// Simulated memory: real bytes move, capacity is enforced, every allocation API and VMM work.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

// A 3D copy of `extent` from `src` to `dst`.
cudaMemcpy3DParms PitchedCopy(cudaPitchedPtr src, cudaPitchedPtr dst, cudaExtent extent,
                              cudaMemcpyKind kind) {
  cudaMemcpy3DParms p{};
  p.srcPtr = src;
  p.dstPtr = dst;
  p.extent = extent;
  p.kind = kind;
  return p;
}

std::vector<int> Pattern(size_t n, int seed) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

TEST(Memory, BytesSurviveARoundTripThroughDeviceMemory) {
  InitCuda();
  const auto in = Pattern(1 << 18, 7);  // 1 MiB: an mmap-backed allocation
  const size_t bytes = in.size() * sizeof(int);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(a, in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  std::vector<int> out(in.size());
  ASSERT_EQ(cudaMemcpy(out.data(), b, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, in);
  ASSERT_EQ(cudaMemset(b, 0, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), b, bytes, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out, std::vector<int>(in.size(), 0));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  cudaFree(a);
  cudaFree(b);
}

TEST(Memory, CopiesOutsideAnAllocationOrInTheWrongDirectionFail) {
  void* d = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&d, 64));
  char host[128] = {};
  EXPECT_EQ(cudaMemcpy(d, host, 128, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host, host + 64, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host, 8, static_cast<cudaMemcpyKind>(7)),
            cudaErrorInvalidMemcpyDirection);
  cudaGetLastError();
  cudaFree(d);
}

TEST(Memory, CapacityIsEnforcedAndReported) {
  InitCuda();
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.totalGlobalMem, total);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, free_before + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  CUdeviceptr d = 0;
  EXPECT_EQ(cuMemAlloc(&d, free_before + 1), CUDA_ERROR_OUT_OF_MEMORY);
  // Fill the device in four pieces (MAP_NORESERVE: nothing is touched), then one more byte.
  const size_t piece = free_before / 4 / 512 * 512;
  std::vector<void*> pieces(4);
  for (void*& q : pieces) ASSERT_EQ(cudaMalloc(&q, piece), cudaSuccess);
  size_t free_now = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_now, &total), cudaSuccess);
  EXPECT_EQ(free_now, free_before - 4 * piece);
  EXPECT_EQ(cudaMalloc(&p, free_now + 512), cudaErrorMemoryAllocation);
  cudaGetLastError();
  for (void* q : pieces) ASSERT_EQ(cudaFree(q), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_now, &total), cudaSuccess);
  EXPECT_EQ(free_now, free_before);
}

// cudaDeviceReset destroys what cudaMalloc, cudaMallocHost, cudaMallocManaged
// and cudaMallocPitch allocated, and "will not destroy memory allocations by
// cudaMallocAsync() and cudaMallocFromPoolAsync()" (cuda_runtime_api.h).
TEST(Memory, DeviceResetKeepsStreamOrderedMemory) {
  InitCuda();
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  void* device = nullptr;
  void* ordered = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4 << 20), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&ordered, 3 << 20, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  InitCuda();
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before - (3 << 20));      // the stream-ordered block survived
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue);  // destroyed with the context
  cudaGetLastError();
  EXPECT_EQ(cudaFreeAsync(ordered, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
}

TEST(Memory, FreeingTwiceOrTheWrongKindFails) {
  void* d = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&d, 1024));
  EXPECT_EQ(cudaFree(static_cast<char*>(d) + 16), cudaErrorInvalidValue);  // not the base
  EXPECT_EQ(cudaFreeHost(d), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);
  void* h = nullptr;
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(h), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(nullptr), cudaSuccess);
  void* zero = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMalloc(&zero, 0), cudaSuccess);
  EXPECT_EQ(zero, nullptr);
  cudaGetLastError();
}

TEST(Memory, PointerAttributesKnowEveryKind) {
  InitCuda();
  void* dev = nullptr;
  void* pinned = nullptr;
  void* managed = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, 64), cudaSuccess);
  std::vector<char> registered(8192);
  ASSERT_EQ(cudaHostRegister(registered.data(), registered.size(), cudaHostRegisterDefault),
            cudaSuccess);
  int plain = 0;
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, dev), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attrs.device, 0);
  EXPECT_EQ(attrs.devicePointer, dev);
  EXPECT_EQ(attrs.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, pinned), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, managed), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeManaged);
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, registered.data() + 100), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, &plain), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeUnregistered);
  // Managed memory is host-accessible.
  static_cast<int*>(managed)[3] = 42;
  int back = 0;
  ASSERT_EQ(cudaMemcpy(&back, static_cast<int*>(managed) + 3, sizeof(int), cudaMemcpyDefault),
            cudaSuccess);
  EXPECT_EQ(back, 42);
  // Registration rules.
  EXPECT_EQ(cudaHostRegister(registered.data() + 4096, 16, 0),
            cudaErrorHostMemoryAlreadyRegistered);
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(registered.data()), cudaErrorHostMemoryNotRegistered);
  cudaGetLastError();
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaFree(managed);
}

TEST(Memory, PitchedAnd3DAllocationsAndCopies) {
  InitCuda();
  const size_t width = 100 * sizeof(int);
  const size_t height = 8;
  void* d = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&d, &pitch, width, height), cudaSuccess);
  EXPECT_GE(pitch, width);
  EXPECT_EQ(pitch % 512, 0u);
  const auto in = Pattern(100 * height, 1);
  ASSERT_EQ(cudaMemcpy2D(d, pitch, in.data(), width, width, height, cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<int> out(in.size());
  ASSERT_EQ(cudaMemcpy2D(out.data(), width, d, pitch, width, height, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);
  cudaFree(d);

  const cudaExtent extent{16 * sizeof(int), 4, 3};
  cudaPitchedPtr pitched{};
  ASSERT_EQ(cudaMalloc3D(&pitched, extent), cudaSuccess);
  const auto cube = Pattern(size_t{16} * 4 * 3, 100);
  const cudaMemcpy3DParms up =
      PitchedCopy(cudaPitchedPtr{const_cast<int*>(cube.data()), 16 * sizeof(int), 16, 4}, pitched,
                  extent, cudaMemcpyHostToDevice);
  ASSERT_EQ(cudaMemcpy3D(&up), cudaSuccess);
  std::vector<int> cube_back(cube.size());
  const cudaMemcpy3DParms down =
      PitchedCopy(pitched, cudaPitchedPtr{cube_back.data(), 16 * sizeof(int), 16, 4}, extent,
                  cudaMemcpyDeviceToHost);
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  EXPECT_EQ(cube_back, cube);
  cudaFree(pitched.ptr);
}

TEST(Memory, StreamOrderedAllocationsAndPools) {
  InitCuda();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* a = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, 1 << 20, stream), cudaSuccess);
  cudaMemPool_t default_pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, 0), cudaSuccess);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  EXPECT_NE(pool, default_pool);
  void* b = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 4096, pool, stream), cudaSuccess);
  uint64_t used = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 4096u);
  ASSERT_EQ(cudaMemPoolGetAttribute(default_pool, cudaMemPoolAttrUsedMemCurrent, &used),
            cudaSuccess);
  EXPECT_EQ(used, 1u << 20);
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, b), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaFreeAsync(b, stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(a, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 0u);
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(default_pool), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(Memory, VirtualMemoryManagementMapsRealMemory) {
  InitCuda();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  ASSERT_GT(granularity, 0u);
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cuMemGetInfo(&free_before, &total), CUDA_SUCCESS);

  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 3 * granularity, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va % granularity, 0u);
  CUmemGenericAllocationHandle h1 = 0;
  CUmemGenericAllocationHandle h2 = 0;
  ASSERT_EQ(cuMemCreate(&h1, granularity, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&h2, granularity, &prop, 0), CUDA_SUCCESS);
  size_t free_now = 0;
  ASSERT_EQ(cuMemGetInfo(&free_now, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_now, free_before - 2 * granularity);
  // Two handles back to back, and h1 a second time (aliasing the first mapping).
  ASSERT_EQ(cuMemMap(va, granularity, 0, h1, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + granularity, granularity, 0, h2, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + 2 * granularity, granularity, 0, h1, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va, granularity, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 3 * granularity, &access, 1), CUDA_SUCCESS);

  // One copy across the boundary of the first two mappings.
  const auto in = Pattern(1024, 5);
  const CUdeviceptr across = va + granularity - 2048;
  ASSERT_EQ(cuMemcpyHtoD(across, in.data(), in.size() * sizeof(int)), CUDA_SUCCESS);
  std::vector<int> out(in.size());
  ASSERT_EQ(cuMemcpyDtoH(out.data(), across, out.size() * sizeof(int)), CUDA_SUCCESS);
  EXPECT_EQ(out, in);
  // The alias sees what was written through the first mapping.
  int alias = 0;
  ASSERT_EQ(cuMemcpyDtoH(&alias, va + 2 * granularity + granularity - 2048, sizeof(int)),
            CUDA_SUCCESS);
  EXPECT_EQ(alias, in[0]);
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, reinterpret_cast<void*>(va + 8)), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeDevice);

  // Memory returns to the device only when released and unmapped.
  ASSERT_EQ(cuMemRelease(h1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(h2), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free_now, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_now, free_before - 2 * granularity);
  EXPECT_EQ(cuMemAddressFree(va, 3 * granularity), CUDA_ERROR_INVALID_VALUE);  // still mapped
  ASSERT_EQ(cuMemUnmap(va, 3 * granularity), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free_now, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_now, free_before);
  ASSERT_EQ(cuMemAddressFree(va, 3 * granularity), CUDA_SUCCESS);
}

TEST(Memory, DeviceVariablesRoundTripThroughSymbols) {
  InitCuda();
  Module();
  const auto in = Pattern(16, 9);
  ASSERT_EQ(cudaMemcpyToSymbol(g_device_var_shadow, in.data(), 8 * sizeof(int), 8 * sizeof(int)),
            cudaSuccess);
  std::vector<int> out(8);
  ASSERT_EQ(cudaMemcpyFromSymbol(out.data(), g_device_var_shadow, 8 * sizeof(int), 8 * sizeof(int)),
            cudaSuccess);
  EXPECT_EQ(out, std::vector<int>(in.begin(), in.begin() + 8));
  void* address = nullptr;
  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolAddress(&address, g_device_var_shadow), cudaSuccess);
  ASSERT_EQ(cudaGetSymbolSize(&size, g_device_var_shadow), cudaSuccess);
  EXPECT_EQ(size, sizeof(g_device_var_shadow));
  int first = 0;
  ASSERT_EQ(cudaMemcpy(&first, static_cast<char*>(address) + 8 * sizeof(int), sizeof(int),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(first, in[0]);
  EXPECT_EQ(cudaMemcpyToSymbol(g_device_var_shadow, in.data(), 65), cudaErrorInvalidValue);
  int unknown = 0;
  EXPECT_EQ(cudaMemcpyToSymbol(&unknown, in.data(), 4), cudaErrorInvalidSymbol);
  cudaGetLastError();
}

TEST(Memory, BatchedCopies) {
  void* d = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&d, 256));
  const auto in = Pattern(64, 3);
  std::vector<int> out(64);
  void* dsts[] = {d, out.data()};
  const void* srcs[] = {in.data(), d};
  const size_t sizes[] = {256, 256};
  cudaMemcpyAttributes attrs{};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attrs_idx = 0;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attrs, &attrs_idx, 1, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyBatchAsync(dsts + 1, srcs + 1, sizes + 1, 1, &attrs, &attrs_idx, 1, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(out, in);
  cudaStreamDestroy(stream);
  cudaFree(d);
}

TEST(Devices, PropertiesCountsAndSelection) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_GE(count, 1);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "gwsim");
  EXPECT_EQ(prop.major, 9);
  int version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  ASSERT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInsufficientDriver), "cudaErrorInsufficientDriver");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  const char* name = nullptr;
  ASSERT_EQ(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, "CUDA_ERROR_OUT_OF_MEMORY");
  CUdevice dev = -1;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  EXPECT_EQ(dev, 0);
  int driver_count = 0;
  ASSERT_EQ(cuDeviceGetCount(&driver_count), CUDA_SUCCESS);
  EXPECT_EQ(driver_count, count);
}

TEST(Devices, EachDeviceHasItsOwnContextAndMemory) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs GWSIM_DEVICE_COUNT >= 2";
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 1);
  void* on1 = nullptr;
  ASSERT_EQ(cudaMalloc(&on1, 4096), cudaSuccess);
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, on1), cudaSuccess);
  EXPECT_EQ(attrs.device, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  void* on0 = nullptr;
  ASSERT_EQ(cudaMalloc(&on0, 4096), cudaSuccess);
  const auto in = Pattern(1024, 11);
  ASSERT_EQ(cudaMemcpy(on0, in.data(), 4096, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeer(on1, 1, on0, 0, 4096), cudaSuccess);
  std::vector<int> out(1024);
  ASSERT_EQ(cudaMemcpy(out.data(), on1, 4096, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out, in);
  cudaFree(on0);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaFree(on1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(Driver, ProcAddressHandsOutTheDriversOwnEntryPoints) {
  InitCuda();
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuMemAlloc_v2));
  ASSERT_EQ(cuGetProcAddress("cuMemcpyHtoD", &fn, 13000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            CUDA_SUCCESS);
  EXPECT_NE(fn, reinterpret_cast<void*>(&cuMemcpyHtoD_v2));  // the _ptds variant
  // cuCtxSynchronize_v2 takes a context: handed out under the base name from CUDA 13.0 only.
  ASSERT_EQ(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuCtxSynchronize_v2));
  ASSERT_EQ(cuGetProcAddress("cuCtxSynchronize", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuCtxSynchronize));
  EXPECT_EQ(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  // The runtime's route, as PyTorch reaches the VMM API.
  cudaDriverEntryPointQueryResult rt_status{};
  ASSERT_EQ(
      cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000, cudaEnableDefault, &rt_status),
      cudaSuccess);
  EXPECT_EQ(rt_status, cudaDriverEntryPointSuccess);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuMemCreate));
}

TEST(Driver, DriverApiNeedsInitAndAContext) {
  InitCuda();  // cuInit
  CUdeviceptr d = 0;
  // This thread never used the runtime: no current context.
  std::thread t([&] {
    EXPECT_EQ(cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext primary = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAlloc(&d, 64), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  });
  t.join();
}

}  // namespace
}  // namespace gwsim::test
