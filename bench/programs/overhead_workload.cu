// The workload bench/overhead.py runs three ways (alone, under gpuwatch, under
// heaptrack) to measure what each tool adds per event it tracks.
//
// Every timed operation is issued from the bottom of a --depth deep recursion
// of real frames, through one of --sites distinct leaf functions (so stacks
// differ near the top, where a capture starts), and timed in batches of
// --batch with CLOCK_MONOTONIC. Phases:
//   cuda_alloc  cudaMalloc(--bytes) x batch, then cudaFree x batch: the events
//               gpuwatch tracks (2 per pair), each allocation with a stack.
//   host_alloc  malloc(--bytes) x batch, then free x batch, from the same
//               depth and sites: the events heaptrack tracks.
//   copy        cudaMemcpy host-to-device of --copy-bytes.
//   launch      an empty kernel, <<<1, 1>>>.
//   sync        cudaStreamSynchronize of the default stream, with nothing
//               queued: the host-side cost of a synchronization.
//   nvtx        nvtxRangePushA(a literal, one per site) + nvtxRangePop: one op
//               is the pair (timed as "first"; "second" stays 0). NVTX is the
//               toolkit's header-only nvtx3: with no tool named by
//               NVTX_INJECTION64_PATH each call is a no-op through NVTX's
//               table; under gpuwatch, gpuwatch's RangePushA/RangePop.
// Before timing, each phase runs --warmup operations per site, so stacks are
// already interned (the steady state of a training loop).
//
// Output: one JSON object per phase on stdout, e.g.
//   {"phase":"cuda_alloc","n":100000,"first_ns":..,"second_ns":..,"first_per_op_ns":..,
//    "first_cpu_per_op_ns":..,...}
// where "first" is the allocations (copies, launches) and "second" the frees,
// "_ns" wall-clock time and "_cpu_" the thread's CPU time.
//
// Built like the e2e test programs (nvcc, shared cudart, no RPATH), so it runs
// on the simulator with LD_LIBRARY_PATH and unchanged on a GPU.
#include <cuda_runtime.h>
#include <malloc.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int kMaxSites = 64;

struct Options {
  long events = 100000;  // operations per phase (pairs for the alloc phases)
  int depth = 40;
  int sites = 1;
  int batch = 1000;
  size_t bytes = 512;
  size_t copy_bytes = 64;
  int warmup = 20;
  std::string phases = "cuda_alloc,host_alloc,copy,launch";
};

uint64_t Ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Both clocks around every batch: wall time, and the calling thread's CPU
// time, which a busy machine does not inflate (time spent descheduled is not
// counted; time blocked, e.g. on a full pipe to heaptrack_interpret, neither).
struct Stamp {
  uint64_t wall;
  uint64_t cpu;
};
Stamp Now() { return {Ns(CLOCK_MONOTONIC), Ns(CLOCK_THREAD_CPUTIME_ID)}; }

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "overhead_workload: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

__global__ void Empty() {}

// The leaves: one function per site, so that captured stacks differ in their
// innermost user frame.
template <int I>
__attribute__((noinline)) void* CudaAllocLeaf(size_t bytes) {
  void* p = nullptr;
  Check(cudaMalloc(&p, bytes), "cudaMalloc");
  asm volatile("" ::: "memory");
  return p;
}

template <int I>
__attribute__((noinline)) void* HostAllocLeaf(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr) std::abort();
  static_cast<volatile char*>(p)[0] = 1;  // a used allocation
  asm volatile("" ::: "memory");
  return p;
}

template <int I>
__attribute__((noinline)) void CopyLeaf(void* dst, const void* src, size_t bytes) {
  Check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  asm volatile("" ::: "memory");
}

template <int I>
__attribute__((noinline)) void LaunchLeaf() {
  Empty<<<1, 1>>>();
  asm volatile("" ::: "memory");
}

// A range per site: its name a string literal of its own, as a program's
// nvtxRangePushA("forward") passes the same pointer every time.
template <int I>
struct SiteName {
  static constexpr char text[] = {
      's', 'i', 't', 'e', static_cast<char>('0' + I / 10), static_cast<char>('0' + I % 10), '\0'};
};

template <int I>
__attribute__((noinline)) void NvtxLeaf() {
  nvtxRangePushA(SiteName<I>::text);
  nvtxRangePop();
  asm volatile("" ::: "memory");
}

using AllocFn = void* (*)(size_t);
using CopyFn = void (*)(void*, const void*, size_t);
using LaunchFn = void (*)();

template <int I>
__attribute__((noinline)) void SyncLeaf() {
  Check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  asm volatile("" ::: "memory");
}

template <int... I>
constexpr auto MakeTables(std::integer_sequence<int, I...>) {
  struct Tables {
    AllocFn cuda[sizeof...(I)];
    AllocFn host[sizeof...(I)];
    CopyFn copy[sizeof...(I)];
    LaunchFn launch[sizeof...(I)];
    LaunchFn sync[sizeof...(I)];
    LaunchFn nvtx[sizeof...(I)];
  };
  return Tables{{&CudaAllocLeaf<I>...}, {&HostAllocLeaf<I>...}, {&CopyLeaf<I>...},
                {&LaunchLeaf<I>...},    {&SyncLeaf<I>...},      {&NvtxLeaf<I>...}};
}
constexpr auto kLeaves = MakeTables(std::make_integer_sequence<int, kMaxSites>());

__attribute__((noinline)) void CudaFree(void* p) {
  Check(cudaFree(p), "cudaFree");
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void HostFree(void* p) {
  std::free(p);
  asm volatile("" ::: "memory");
}

struct Result {
  long n = 0;
  uint64_t first_ns = 0;
  uint64_t second_ns = 0;
  uint64_t first_cpu_ns = 0;
  uint64_t second_cpu_ns = 0;
  void AddFirst(const Stamp& a, const Stamp& b) {
    first_ns += b.wall - a.wall;
    first_cpu_ns += b.cpu - a.cpu;
  }
  void AddSecond(const Stamp& a, const Stamp& b) {
    second_ns += b.wall - a.wall;
    second_cpu_ns += b.cpu - a.cpu;
  }
};

// The phases. extern "C" and noinline so that callgrind can count them alone
// (--toggle-collect=gw_bench_*).
extern "C" __attribute__((noinline)) void gw_bench_alloc(const Options& o, bool cuda, long n,
                                                         Result* r) {
  const AllocFn* leaves = cuda ? kLeaves.cuda : kLeaves.host;
  std::vector<void*> live(static_cast<size_t>(o.batch));
  for (long done = 0; done < n;) {
    const long b = std::min<long>(o.batch, n - done);
    const Stamp t0 = Now();
    for (long i = 0; i < b; ++i) live[i] = leaves[(done + i) % o.sites](o.bytes);
    const Stamp t1 = Now();
    for (long i = 0; i < b; ++i) (cuda ? CudaFree : HostFree)(live[i]);
    const Stamp t2 = Now();
    r->AddFirst(t0, t1);
    r->AddSecond(t1, t2);
    done += b;
  }
  r->n += n;
}

extern "C" __attribute__((noinline)) void gw_bench_copy(const Options& o, void* dev,
                                                        const void* host, long n, Result* r) {
  for (long done = 0; done < n;) {
    const long b = std::min<long>(o.batch, n - done);
    const Stamp t0 = Now();
    for (long i = 0; i < b; ++i) kLeaves.copy[(done + i) % o.sites](dev, host, o.copy_bytes);
    r->AddFirst(t0, Now());
    done += b;
  }
  r->n += n;
}

// Calls leaves[i % sites]() n times, timed by batch: launches, syncs and NVTX pairs.
void CallLeaves(const Options& o, const LaunchFn* leaves, long n, Result* r) {
  for (long done = 0; done < n;) {
    const long b = std::min<long>(o.batch, n - done);
    const Stamp t0 = Now();
    for (long i = 0; i < b; ++i) leaves[(done + i) % o.sites]();
    r->AddFirst(t0, Now());
    done += b;
  }
  r->n += n;
}

extern "C" __attribute__((noinline)) void gw_bench_launch(const Options& o, long n, Result* r) {
  CallLeaves(o, kLeaves.launch, n, r);
}

extern "C" __attribute__((noinline)) void gw_bench_sync(const Options& o, long n, Result* r) {
  CallLeaves(o, kLeaves.sync, n, r);
}

extern "C" __attribute__((noinline)) void gw_bench_nvtx(const Options& o, long n, Result* r) {
  CallLeaves(o, kLeaves.nvtx, n, r);
}

struct Phase {
  const Options* o;
  std::string name;
  void* dev = nullptr;
  const void* host = nullptr;
  Result warm;
  Result timed;
};

void RunPhase(Phase* p) {
  const Options& o = *p->o;
  const long warm = static_cast<long>(o.warmup) * o.sites;
  if (p->name == "cuda_alloc" || p->name == "host_alloc") {
    const bool cuda = p->name == "cuda_alloc";
    gw_bench_alloc(o, cuda, warm, &p->warm);
    gw_bench_alloc(o, cuda, o.events, &p->timed);
  } else if (p->name == "copy") {
    gw_bench_copy(o, p->dev, p->host, warm, &p->warm);
    gw_bench_copy(o, p->dev, p->host, o.events, &p->timed);
  } else if (p->name == "launch") {
    gw_bench_launch(o, warm, &p->warm);
    gw_bench_launch(o, o.events, &p->timed);
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } else if (p->name == "sync") {
    gw_bench_sync(o, warm, &p->warm);
    gw_bench_sync(o, o.events, &p->timed);
  } else if (p->name == "nvtx") {
    gw_bench_nvtx(o, warm, &p->warm);
    gw_bench_nvtx(o, o.events, &p->timed);
  } else {
    std::fprintf(stderr, "overhead_workload: unknown phase '%s'\n", p->name.c_str());
    std::exit(2);
  }
}

// Runs the phase `depth` frames down, so every timed call has that stack.
__attribute__((noinline)) void AtDepth(int depth, Phase* p) {
  if (depth > 0) {
    AtDepth(depth - 1, p);
    asm volatile("" ::: "memory");
    return;
  }
  RunPhase(p);
}

long ParseLong(const char* flag, const char* v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    std::fprintf(stderr, "overhead_workload: %s expects an integer in [%ld, %ld], got '%s'\n", flag,
                 lo, hi, v);
    std::exit(2);
  }
  return x;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "overhead_workload: %s needs a value\n", a.c_str());
      std::exit(2);
    }
    const char* v = argv[++i];
    if (a == "--events") {
      o.events = ParseLong("--events", v, 1, 1000000000L);
    } else if (a == "--depth") {
      o.depth = static_cast<int>(ParseLong("--depth", v, 0, 1000));
    } else if (a == "--sites") {
      o.sites = static_cast<int>(ParseLong("--sites", v, 1, kMaxSites));
    } else if (a == "--batch") {
      o.batch = static_cast<int>(ParseLong("--batch", v, 1, 1000000));
    } else if (a == "--bytes") {
      o.bytes = static_cast<size_t>(ParseLong("--bytes", v, 1, 1L << 30));
    } else if (a == "--copy-bytes") {
      o.copy_bytes = static_cast<size_t>(ParseLong("--copy-bytes", v, 1, 1L << 30));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(ParseLong("--warmup", v, 0, 1000000));
    } else if (a == "--phases") {
      o.phases = v;
    } else {
      std::fprintf(stderr,
                   "usage: overhead_workload [--events N] [--depth D] [--sites S<=%d] "
                   "[--batch B] [--bytes B] [--copy-bytes B] [--warmup W] "
                   "[--phases cuda_alloc,host_alloc,copy,launch,sync,nvtx]\n",
                   kMaxSites);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  // Each batch frees what it allocated. glibc would then give the top of the
  // heap back to the system (trim) and fault it in again on the next batch,
  // a microsecond per allocation here, unless something else lives above it
  // (a tool's own tables do). Never trimming keeps the baseline honest.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 16 << 20);
  // Context creation and the first allocation are not part of any phase.
  void* dev = nullptr;
  Check(cudaMalloc(&dev, o.copy_bytes), "cudaMalloc(copy buffer)");
  std::vector<char> host(o.copy_bytes, 1);

  std::string rest = o.phases;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    Phase p;
    p.o = &o;
    p.name = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    p.dev = dev;
    p.host = host.data();
    AtDepth(o.depth, &p);
    const double n = static_cast<double>(p.timed.n);
    std::printf(
        "{\"phase\":\"%s\",\"n\":%ld,\"depth\":%d,\"sites\":%d,\"first_ns\":%llu,"
        "\"second_ns\":%llu,\"first_per_op_ns\":%.1f,\"second_per_op_ns\":%.1f,"
        "\"first_cpu_per_op_ns\":%.1f,\"second_cpu_per_op_ns\":%.1f}\n",
        p.name.c_str(), p.timed.n, o.depth, o.sites,
        static_cast<unsigned long long>(p.timed.first_ns),
        static_cast<unsigned long long>(p.timed.second_ns), p.timed.first_ns / n,
        p.timed.second_ns / n, p.timed.first_cpu_ns / n, p.timed.second_cpu_ns / n);
    std::fflush(stdout);
  }
  Check(cudaFree(dev), "cudaFree(copy buffer)");
  return 0;
}
