// NVTX ranges as phases (tests/e2e/phases_test.cc asserts the bytes): a range
// opened before the first CUDA call, nested ranges over three steps, copies
// in a range, a registered domain with a registered string on another
// thread, a thread that exits inside a range, two pops with nothing open,
// a default-domain range closed under a domain's range, start/end ranges
// ("run" over the program's work, "load" started here and ended on the
// worker thread, an end of no range), and, when gpuwatch
// is preloaded, gpuwatch_phase_push and a range "grow" that keeps 128 KiB
// more at each of six marks (a growth suspect in it).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

// Resolved when libgpuwatch.so is preloaded; null otherwise.
extern "C" int gpuwatch_phase_push(const char* name) __attribute__((weak));
extern "C" int gpuwatch_phase_pop(void) __attribute__((weak));
extern "C" int gpuwatch_mark(const char* label) __attribute__((weak));

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__global__ void Touch(char* p) { p[threadIdx.x] = 1; }

void Check(cudaError_t e) {
  if (e != cudaSuccess) std::abort();
}

nvtxEventAttributes_t Attributes() {
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

}  // namespace

int main() {
  const nvtxRangeId_t run = nvtxRangeStartA("run");
  nvtxRangePushA("setup");
  void* weights = nullptr;
  Check(cudaMalloc(&weights, 8 * kMiB));  // AT:setup
  nvtxRangePop();

  for (int step = 0; step < 3; ++step) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    void* activations = nullptr;
    Check(cudaMalloc(&activations, 4 * kMiB));  // AT:forward
    Touch<<<1, 1>>>(static_cast<char*>(activations));
    nvtxRangePop();
    nvtxRangePushA("backward");
    void* gradients = nullptr;
    Check(cudaMalloc(&gradients, 2 * kMiB));  // AT:backward
    Check(cudaFree(activations));
    Check(cudaFree(gradients));
    nvtxRangePop();
    nvtxRangePop();
  }

  std::vector<char> host(kMiB, 1);
  nvtxRangePushA("io");
  Check(cudaMemcpy(weights, host.data(), kMiB, cudaMemcpyHostToDevice));
  Check(cudaMemcpy(weights, host.data(), kMiB, cudaMemcpyHostToDevice));
  Check(cudaMemcpy(host.data(), weights, kMiB, cudaMemcpyDeviceToHost));
  nvtxRangePop();

  nvtxDomainHandle_t loader = nvtxDomainCreateA("loader");
  nvtxStringHandle_t batch = nvtxDomainRegisterStringA(loader, "batch");
  const nvtxRangeId_t load = nvtxRangeStartA("load");
  std::thread worker([loader, batch, load] {
    nvtxEventAttributes_t a = Attributes();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = batch;
    nvtxDomainRangePushEx(loader, &a);
    void* kept = nullptr;
    Check(cudaMalloc(&kept, 3 * kMiB));  // AT:batch
    nvtxDomainRangePop(loader);
    nvtxRangeEnd(load);  // started on the main thread
    nvtxRangePushA("worker");
    Check(cudaMalloc(&kept, kMiB));  // AT:worker
    // The thread ends with "worker" open.
  });
  worker.join();

  nvtxRangePop();  // nothing open: two unbalanced pops
  nvtxRangePop();

  // "outer" (the default domain) closes while "inner" (loader's) stays open:
  // the allocation is in "loader:inner" alone.
  nvtxRangePushA("outer");
  nvtxEventAttributes_t inner = Attributes();
  inner.messageType = NVTX_MESSAGE_TYPE_ASCII;
  inner.message.ascii = "inner";
  nvtxDomainRangePushEx(loader, &inner);
  nvtxRangePop();
  void* kept = nullptr;
  Check(cudaMalloc(&kept, kMiB / 2));  // AT:inner
  nvtxDomainRangePop(loader);
  nvtxRangeEnd(run);
  nvtxRangeEnd(run + 1000);  // no such range

  if (gpuwatch_phase_push != nullptr) {
    gpuwatch_phase_push("api");
    Check(cudaMalloc(&kept, kMiB / 4));  // AT:api
    gpuwatch_phase_pop();
  }
  if (gpuwatch_mark != nullptr) {
    for (int i = 0; i < 6; ++i) {
      nvtxRangePushA("grow");
      Check(cudaMalloc(&kept, kMiB / 8));  // AT:grow
      nvtxRangePop();
      gpuwatch_mark("grow");
    }
  }
  std::printf("nvtx_phases: done\n");
  return 0;
}
