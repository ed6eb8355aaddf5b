// An ordinary CUDA program, built with `nvcc -cudart shared`, that must run on the simulator.
// Kernels do not execute there, so it checks what the host can observe: copies, symbols,
// managed variables, launches that succeed. Prints "gwsim-nvcc-program: OK" when all passed.
// It insists on the simulator's device ("gwsim") unless GWSIM_ANY_DEVICE=1, under which it also
// runs on a GPU (tests/gpu/validate.py records its CUPTI sequence there), where the kernels run
// and their results are checked instead.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__device__ int g_table[64];
__constant__ float g_scale;
__managed__ int g_counter;

__global__ void add(int* a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1;
}

template <typename T>
__global__ void fill(T* p, T value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value * g_scale;
}

#define CHECK(call)                                                          \
  do {                                                                       \
    const cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "FAILED: %s: %s\n", #call, cudaGetErrorName(e_)); \
      return 1;                                                              \
    }                                                                        \
  } while (0)
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "FAILED: %s (line %d)\n", #cond, __LINE__); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main() {
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  EXPECT(devices >= 1);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const char* any_device = std::getenv("GWSIM_ANY_DEVICE");
  const bool simulated = std::strcmp(prop.name, "gwsim") == 0;
  EXPECT(simulated || (any_device != nullptr && std::strcmp(any_device, "1") == 0));

  const int n = 256;
  std::vector<int> host(n);
  std::vector<int> back(n, -1);
  for (int i = 0; i < n; ++i) host[i] = i * 3;
  int* dev = nullptr;
  CHECK(cudaMalloc(&dev, n * sizeof(int)));
  CHECK(cudaMemcpy(dev, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  add<<<(n + 127) / 128, 128>>>(dev, n);
  CHECK(cudaGetLastError());
  float scale = 2.5f;
  CHECK(cudaMemcpyToSymbol(g_scale, &scale, sizeof(scale)));
  fill<float><<<2, 128>>>(reinterpret_cast<float*>(dev), 1.0f, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemcpy(back.data(), dev, n * sizeof(int), cudaMemcpyDeviceToHost));
  // Kernels do not run on the simulator; on a GPU fill<float> overwrote what add had done.
  std::vector<int> computed(n);
  const float filled = 1.0f * scale;
  for (int i = 0; i < n; ++i) std::memcpy(&computed[i], &filled, sizeof(int));
  const std::vector<int>& on_device = simulated ? host : computed;
  EXPECT(back == on_device);

  CHECK(cudaMemcpyToSymbol(g_table, host.data(), 64 * sizeof(int)));
  std::vector<int> table(64, -1);
  CHECK(cudaMemcpyFromSymbol(table.data(), g_table, 64 * sizeof(int)));
  EXPECT(std::memcmp(table.data(), host.data(), 64 * sizeof(int)) == 0);

  g_counter = 41;  // host access to a __managed__ variable
  g_counter += 1;
  EXPECT(g_counter == 42);

  int* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, n * sizeof(int)));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaMemcpyAsync(pinned, dev, n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  EXPECT(pinned[10] == on_device[10]);
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFreeHost(pinned));

  // A graph captured from a stream: nothing runs when it is captured, all of it at each launch.
  std::vector<int> staged(n, 7);
  std::vector<int> out(n, -1);
  int host_calls = 0;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemcpyAsync(dev, staged.data(), n * sizeof(int), cudaMemcpyHostToDevice, stream));
  add<<<(n + 127) / 128, 128, 0, stream>>>(dev, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpyAsync(out.data(), dev, n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaLaunchHostFunc(
      stream, [](void* calls) { ++*static_cast<int*>(calls); }, &host_calls));
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(stream, &graph));
  EXPECT(out[0] == -1 && host_calls == 0);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::vector<int> added(staged);
  if (!simulated) {
    for (int& v : added) v += 1;
  }
  EXPECT(out == added && host_calls == 1);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(dev));

  std::printf("gwsim-nvcc-program: OK\n");
  std::fflush(stdout);
  return 0;
}
