// A host-only program linked against NVIDIA's libcudart.so (no RPATH): LD_LIBRARY_PATH decides
// whether it runs on the simulator. Prints "gwsim-plain-program: OK" when it did.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess || std::strcmp(prop.name, "gwsim") != 0) {
    std::fprintf(stderr, "not on the simulator: %s, device '%s'\n", cudaGetErrorName(e),
                 e == cudaSuccess ? prop.name : "");
    return 1;
  }
  std::vector<char> in(1 << 16, 'x');
  std::vector<char> out(in.size());
  void* dev = nullptr;
  if (cudaMalloc(&dev, in.size()) != cudaSuccess ||
      cudaMemcpy(dev, in.data(), in.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(out.data(), dev, out.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaFree(dev) != cudaSuccess || out != in) {
    std::fprintf(stderr, "FAILED: round trip\n");
    return 1;
  }
  std::printf("gwsim-plain-program: OK\n");
  return 0;
}
