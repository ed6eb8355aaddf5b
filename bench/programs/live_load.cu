// The load bench/live_poll.py measures the live view against (`gpuwatch top`,
// `gpuwatch exporter`; interpose/agent/live.cc): 100,000 live device allocations
// over exactly 10,000 distinct call stacks (sites), then idle.
//
// Each site is one (A, B) pair: main calls Outer<A> (A in 0..99) through a
// table of function pointers, which calls Inner<B> (B in 0..99) through
// another; Inner<B> calls cudaMalloc. Both levels are noinline and do work
// after the call (no tail call), so every pair is a distinct stack: the
// cudaMalloc's return address is in Inner<B>, Inner<B>'s in Outer<A>.
//
//   live_load [--outer N] [--inner N] [--per-site N] [--bytes N] [--leak] [--free]
//
// (defaults 100, 100, 10, 4096): N allocations per site, then one line on
// stdout, "live_load: ready <allocations> <bytes>", and it waits, reading
// stdin until EOF; then it frees everything and exits 0. With --leak it exits
// 0 without freeing: the exit report then lists every allocation as live
// (bench/fixed_cost.py times that report). With --free it frees everything
// before it says ready: every site allocated, nothing is live (what a
// checkpoint of a process that has settled costs). Each line "t" on stdin
// makes one cudaMalloc and cudaFree more, from main through Inner<0> (a site
// of its own: new at the first "t", changed at the next), and the answer
// "live_load: touched". For the checkpoint's cost by what changed, three more
// that answer the same: "k" launches a kernel (no site changes), "h" makes one
// cudaMalloc and cudaFree at each of the first outer function's sites (100 of
// them with the default --inner), "a" at every site.
//
// Built like the e2e test programs (nvcc, shared cudart, no RPATH), so it runs
// on the simulator with LD_LIBRARY_PATH and unchanged on a GPU.
#include <cuda_runtime.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr int kLevel = 100;  // functions per level: kLevel * kLevel sites at most

int g_per_site = 10;
size_t g_bytes = 4096;
std::vector<void*>* g_ptrs = nullptr;

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "live_load: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// The allocating frame: one per B.
template <int B>
__attribute__((noinline)) int Inner(int n) {
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    Check(cudaMalloc(&p, g_bytes), "cudaMalloc");
    g_ptrs->push_back(p);
  }
  asm volatile("" ::: "memory");  // keeps the frame and the call above a call
  return n + B;
}

// A frame of either level, called through a table.
using LevelFn = int (*)(int);

// {&F<0>, ..., &F<kLevel - 1>} of a level's template F: at(I) is &F<I>, I an
// std::integral_constant.
template <typename At, int... I>
constexpr std::array<LevelFn, sizeof...(I)> Table(At at, std::integer_sequence<int, I...>) {
  return {at(std::integral_constant<int, I>())...};
}

constexpr auto kInner = Table([](auto b) { return &Inner<decltype(b)::value>; },
                              std::make_integer_sequence<int, kLevel>());

// The caller: one per A; calls Inner<b> for b < inner.
template <int A>
__attribute__((noinline)) int Outer(int inner) {
  int sum = 0;
  for (int b = 0; b < inner; ++b) {
    sum += kInner[b](g_per_site);
    asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack
  }
  return sum + A;
}

constexpr auto kOuter = Table([](auto a) { return &Outer<decltype(a)::value>; },
                              std::make_integer_sequence<int, kLevel>());

__global__ void Nop() {}

// One allocation and its free at each site of Outer<0> (`all`: of every Outer
// up to `outer`): those sites changed, the others not.
void TouchSites(int outer, int inner, bool all) {
  const size_t before = g_ptrs->size();
  const int saved = g_per_site;
  g_per_site = 1;
  for (int a = 0; a < (all ? outer : 1); ++a) kOuter[a](inner);
  g_per_site = saved;
  for (size_t i = before; i < g_ptrs->size(); ++i) Check(cudaFree((*g_ptrs)[i]), "cudaFree");
  g_ptrs->resize(before);
}

int ArgInt(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "live_load: %s needs a value\n", argv[i]);
    std::exit(2);
  }
  return std::atoi(argv[++i]);
}

}  // namespace

int main(int argc, char** argv) {
  int outer = kLevel;
  int inner = kLevel;
  bool leak = false;
  bool free_first = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--outer") == 0) {
      outer = ArgInt(argc, argv, i);
    } else if (std::strcmp(argv[i], "--inner") == 0) {
      inner = ArgInt(argc, argv, i);
    } else if (std::strcmp(argv[i], "--per-site") == 0) {
      g_per_site = ArgInt(argc, argv, i);
    } else if (std::strcmp(argv[i], "--bytes") == 0) {
      g_bytes = static_cast<size_t>(ArgInt(argc, argv, i));
    } else if (std::strcmp(argv[i], "--leak") == 0) {
      leak = true;
    } else if (std::strcmp(argv[i], "--free") == 0) {
      free_first = true;
    } else {
      std::fprintf(stderr,
                   "usage: live_load [--outer N] [--inner N] [--per-site N] [--bytes N] [--leak] "
                   "[--free]\n");
      return 2;
    }
  }
  if (outer < 1 || outer > kLevel || inner < 1 || inner > kLevel || g_per_site < 1 || g_bytes < 1) {
    std::fprintf(stderr, "live_load: --outer and --inner from 1 to %d, the rest positive\n",
                 kLevel);
    return 2;
  }
  std::vector<void*> ptrs;
  ptrs.reserve(static_cast<size_t>(outer) * inner * g_per_site);
  g_ptrs = &ptrs;
  Check(cudaFree(nullptr), "cudaFree(0)");  // the context, before the first site
  for (int a = 0; a < outer; ++a) kOuter[a](inner);
  if (free_first) {
    for (void* p : ptrs) Check(cudaFree(p), "cudaFree");
    ptrs.clear();
  }
  std::printf("live_load: ready %zu %zu\n", ptrs.size(), ptrs.size() * g_bytes);
  std::fflush(stdout);
  char buf[256];
  for (;;) {
    const ssize_t n = read(0, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno != EINTR) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 't') {
        const size_t before = ptrs.size();
        kInner[0](1);
        Check(cudaFree(ptrs.back()), "cudaFree");
        ptrs.resize(before);
      } else if (buf[i] == 'k') {
        Nop<<<1, 1>>>();
        Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      } else if (buf[i] == 'h' || buf[i] == 'a') {
        TouchSites(outer, inner, buf[i] == 'a');
      } else {
        continue;
      }
      std::printf("live_load: touched\n");
      std::fflush(stdout);
    }
  }
  if (leak) return 0;
  for (void* p : ptrs) Check(cudaFree(p), "cudaFree");
  return 0;
}
