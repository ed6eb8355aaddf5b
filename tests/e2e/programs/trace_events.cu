// Allocations on two devices, copies, kernels, marks and one failed
// allocation, in a known order, for the event trace and `gpuwatch report
// --format perfetto` (tests/e2e/trace_test.cc; keep the two in step). Lines
// the test checks carry "// TRACE:<name>" markers.
//
// Per iteration (3), on device 0: a 2 MiB scratch buffer, a pageable 1 MiB
// H2D copy on the legacy stream, a pinned 1 MiB H2D copy and two kernels on
// a created stream, a pageable 256 KiB D2H copy, the scratch freed, a mark
// "step N". Then 4 MiB kept on device 1 (when there are two devices) and a
// 64 GiB request that fails. Live at exit: 1 MiB on device 0, 4 MiB on 1.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr size_t kMiB = size_t{1} << 20;

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "trace_events: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

__global__ void Touch(char* p) { p[threadIdx.x] = 1; }

}  // namespace

int main() {
  using MarkFn = int (*)(const char*);
  const auto mark = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "gpuwatch_mark"));
  int devices = 0;
  Check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  Check(cudaSetDevice(0), "cudaSetDevice(0)");
  std::vector<char> pageable(kMiB, 1);
  char* pinned = nullptr;
  Check(cudaMallocHost(&pinned, kMiB), "cudaMallocHost");
  char* base = nullptr;
  Check(cudaMalloc(&base, kMiB), "cudaMalloc(base)");
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (int i = 1; i <= 3; ++i) {
    char* scratch = nullptr;
    Check(cudaMalloc(&scratch, 2 * kMiB), "cudaMalloc(scratch)");
    Check(cudaMemcpy(scratch, pageable.data(), kMiB, cudaMemcpyHostToDevice),  // TRACE:h2d
          "cudaMemcpy(h2d)");
    Check(cudaMemcpyAsync(base, pinned, kMiB, cudaMemcpyHostToDevice, stream),  // TRACE:pinned
          "cudaMemcpyAsync");
    Touch<<<1, 32, 0, stream>>>(base);
    Touch<<<1, 32, 0, stream>>>(scratch);
    Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    Check(cudaMemcpy(pageable.data(), scratch, 256 << 10, cudaMemcpyDeviceToHost),  // TRACE:d2h
          "cudaMemcpy(d2h)");
    Check(cudaFree(scratch), "cudaFree(scratch)");
    if (mark != nullptr) mark(("step " + std::to_string(i)).c_str());
  }
  if (devices >= 2) {
    Check(cudaSetDevice(1), "cudaSetDevice(1)");
    void* kept = nullptr;
    Check(cudaMalloc(&kept, 4 * kMiB), "cudaMalloc(device 1)");
    Check(cudaSetDevice(0), "cudaSetDevice(0)");
  }
  void* huge = nullptr;
  if (cudaMalloc(&huge, 64ULL << 30) != cudaErrorMemoryAllocation) {  // TRACE:oom
    std::fprintf(stderr, "trace_events: the 64 GiB allocation did not fail\n");
    return 1;
  }
  Check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  Check(cudaFreeHost(pinned), "cudaFreeHost");
  std::printf("trace_events: done\n");
  return 0;
}
