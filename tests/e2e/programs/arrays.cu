// CUDA arrays and the copies to and from them, through the runtime and the
// driver, and driver 2D/3D copies between linear memory: every allocation
// and every copy must be seen, with its size. One array of each API family
// stays live at exit.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void Rt(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "arrays: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

void Drv(CUresult r) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "arrays: driver error %d\n", static_cast<int>(r));
    std::exit(1);
  }
}

}  // namespace

int main() {
  // 256 x 64 float4 elements: 256 KiB.
  const cudaChannelFormatDesc rgba = cudaCreateChannelDesc<float4>();
  cudaArray_t array2d = nullptr;
  Rt(cudaMallocArray(&array2d, &rgba, 256, 64));  // LEAK:array2d
  std::vector<char> host(256 * 64 * 16, 1);
  Rt(cudaMemcpy2DToArray(array2d, 0, 0, host.data(), 256 * 16, 256 * 16, 64,  // AT:to_array
                         cudaMemcpyHostToDevice));
  Rt(cudaMemcpy2DFromArray(host.data(), 256 * 16, array2d, 0, 0, 256 * 16, 64,  // AT:from_array
                           cudaMemcpyDeviceToHost));
  // A 3D array of floats, 32 x 32 x 8: 32 KiB, copied with cudaMemcpy3D
  // (whose extent counts the array's elements), then freed.
  const cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  cudaArray_t array3d = nullptr;
  Rt(cudaMalloc3DArray(&array3d, &f, make_cudaExtent(32, 32, 8)));
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(host.data(), 32 * 4, 32, 32);
  p.dstArray = array3d;
  p.extent = make_cudaExtent(32, 32, 8);
  p.kind = cudaMemcpyHostToDevice;
  Rt(cudaMemcpy3D(&p));  // AT:copy3d
  Rt(cudaFreeArray(array3d));
  // Driver: a 1D array of 4096 ushort2 (16 KiB) left live, and host <-> array.
  CUarray driver_array = nullptr;
  CUDA_ARRAY_DESCRIPTOR desc{4096, 0, CU_AD_FORMAT_UNSIGNED_INT16, 2};
  Drv(cuArrayCreate(&driver_array, &desc));  // LEAK:driver_array
  Drv(cuMemcpyHtoA(driver_array, 0, host.data(), 16384));
  Drv(cuMemcpyAtoH(host.data(), driver_array, 0, 16384));
  // Driver 2D and 3D copies between host and device memory.
  void* device = nullptr;
  Rt(cudaMalloc(&device, 1 << 20));
  CUDA_MEMCPY2D m2{};
  m2.srcMemoryType = CU_MEMORYTYPE_HOST;
  m2.srcHost = host.data();
  m2.srcPitch = 1024;
  m2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m2.dstDevice = reinterpret_cast<CUdeviceptr>(device);
  m2.dstPitch = 1024;
  m2.WidthInBytes = 1024;
  m2.Height = 100;
  Drv(cuMemcpy2D(&m2));  // AT:copy2d
  CUDA_MEMCPY3D m3{};
  m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m3.srcDevice = reinterpret_cast<CUdeviceptr>(device);
  m3.srcPitch = 512;
  m3.srcHeight = 16;
  m3.dstMemoryType = CU_MEMORYTYPE_HOST;
  m3.dstHost = host.data();
  m3.dstPitch = 512;
  m3.dstHeight = 16;
  m3.WidthInBytes = 512;
  m3.Height = 16;
  m3.Depth = 4;
  Drv(cuMemcpy3D(&m3));  // AT:copy3d_driver
  Rt(cudaFree(device));
  std::printf("arrays: done\n");
  return 0;
}
