// A host that loads the CUDA runtime at run time, never links it: dlopens
// libcudart (argv[1]), allocates, copies and frees through dlsym'd pointers,
// dlcloses it (which runs the runtime's exit handler: its contexts are
// released), loads it again and allocates again. With argv[2], it also
// dlopens and dlcloses that libcupti around the second load, as a host that
// probes for CUPTI would.
//
// Under LD_PRELOAD=libgpuwatch.so no CUDA is loaded at the constructor, so
// gpuwatch attaches through CUDA_INJECTION64_PATH when the first load's first
// call initialises the driver (tests/e2e/host_cuda_test.cc).
//
// Output: one line per step with the CUDA status codes; exit status 0 when
// every call succeeded, 1 when one failed, 2 on a loader error.
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using Malloc = int (*)(void**, size_t);
using Free = int (*)(void*);
using Memcpy = int (*)(void*, const void*, size_t, int);
constexpr int kHostToDevice = 1;  // cudaMemcpyHostToDevice
constexpr int kDeviceToHost = 2;  // cudaMemcpyDeviceToHost

struct Runtime {
  void* handle = nullptr;
  Malloc malloc = nullptr;
  Free free = nullptr;
  Memcpy memcpy = nullptr;
};

bool Load(const char* path, Runtime* rt) {
  rt->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (rt->handle == nullptr) {
    std::fprintf(stderr, "dlopen_cudart: %s\n", dlerror());
    return false;
  }
  rt->malloc = reinterpret_cast<Malloc>(dlsym(rt->handle, "cudaMalloc"));
  rt->free = reinterpret_cast<Free>(dlsym(rt->handle, "cudaFree"));
  rt->memcpy = reinterpret_cast<Memcpy>(dlsym(rt->handle, "cudaMemcpy"));
  if (rt->malloc == nullptr || rt->free == nullptr || rt->memcpy == nullptr) {
    std::fprintf(stderr, "dlopen_cudart: %s lacks cudaMalloc/cudaFree/cudaMemcpy\n", path);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dlopen_cudart LIBCUDART [LIBCUPTI]\n");
    return 2;
  }
  int failures = 0;
  auto check = [&](const char* what, int status) {
    std::printf("%s: %d\n", what, status);
    if (status != 0) ++failures;
  };

  // First load: 1 MiB kept (live when the runtime is closed), 2 MiB freed,
  // a 64 KiB round trip through the kept buffer.
  Runtime first;
  if (!Load(argv[1], &first)) return 2;
  void* kept = nullptr;
  void* freed = nullptr;
  std::vector<unsigned char> host(64 << 10, 0x5a);
  std::vector<unsigned char> back(host.size(), 0);
  check("load 1: cudaMalloc 1 MiB", first.malloc(&kept, 1 << 20));
  check("load 1: cudaMalloc 2 MiB", first.malloc(&freed, 2 << 20));
  check("load 1: cudaMemcpy h2d 64 KiB",
        first.memcpy(kept, host.data(), host.size(), kHostToDevice));
  check("load 1: cudaMemcpy d2h 64 KiB",
        first.memcpy(back.data(), kept, back.size(), kDeviceToHost));
  std::printf("load 1: round trip %s\n", back == host ? "equal" : "DIFFERENT");
  check("load 1: cudaFree 2 MiB", first.free(freed));
  std::printf("load 1: dlclose %d\n", dlclose(first.handle));

  if (argc > 2) {
    void* cupti = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    std::printf("libcupti: dlopen %s\n", cupti != nullptr ? "ok" : "failed");
    if (cupti != nullptr) std::printf("libcupti: dlclose %d\n", dlclose(cupti));
  }

  // Second load: 3 MiB kept to the end, 512 KiB freed.
  Runtime second;
  if (!Load(argv[1], &second)) return 2;
  void* leaked = nullptr;
  void* temp = nullptr;
  check("load 2: cudaMalloc 3 MiB", second.malloc(&leaked, 3 << 20));
  check("load 2: cudaMalloc 512 KiB", second.malloc(&temp, 512 << 10));
  check("load 2: cudaMemcpy h2d 64 KiB",
        second.memcpy(temp, host.data(), host.size(), kHostToDevice));
  check("load 2: cudaFree 512 KiB", second.free(temp));
  std::printf("load 2: done\n");
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
