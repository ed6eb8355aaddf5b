// A host that ends near its memory limit: it leaks 2,000 small allocations
// from 20 sites (a report of some size), then lowers RLIMIT_AS to what it
// maps now plus argv[1] KiB, and returns 0. The exit report is built with
// that little room.
#include <cuda_runtime.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace {

template <int kSite>
void Leak() {
  void* p = nullptr;
  for (int i = 0; i < 100; ++i) {
    if (cudaMalloc(&p, 512 + kSite) != cudaSuccess) std::exit(64);
  }
}

template <int... kSites>
void LeakFromEach(std::integer_sequence<int, kSites...>) {
  (Leak<kSites>(), ...);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  LeakFromEach(std::make_integer_sequence<int, 20>());
  unsigned long pages = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr || std::fscanf(statm, "%lu", &pages) != 1) return 65;
  std::fclose(statm);
  const rlim_t limit = pages * sysconf(_SC_PAGESIZE) + std::strtoul(argv[1], nullptr, 10) * 1024;
  const rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 66;
  std::printf("tight_memory: limited\n");
  return 0;
}
