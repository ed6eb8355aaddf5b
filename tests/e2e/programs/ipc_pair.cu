// Two processes sharing device memory through CUDA IPC (tests/e2e/ipc_test.cc).
//
//   ipc_pair parent close|keep|alone
//   ipc_pair child close|keep HANDLE
//
// The parent allocates 3 MiB, fills it, exports a handle and runs itself as
// the child (fork and exec, HANDLE in hex), waits for it, checks the bytes the
// child wrote and frees the memory; `alone` makes the same calls without a
// child (and checks nothing). The child opens the handle, checks the parent's
// bytes and writes its own; `close` opens it a second time (the same mapping,
// one more reference) and closes it twice, `keep` exits with it open. The
// child also takes MEMORY2 activity records, as a profiler beside gpuwatch
// would, and says how many were of the opened memory: whether a driver reports
// an opening is not known (GWSIM_IPC_MEMORY_RECORDS). Each prints
// "ipc_pair[ child]: done"; exit status 1 when anything failed.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kBytes = 3 << 20;
constexpr unsigned kParentSeed = 0x1000;
constexpr unsigned kChildSeed = 0x2000;

void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "ipc_pair: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

void Fail(const char* what) {
  std::fprintf(stderr, "ipc_pair: %s\n", what);
  std::exit(1);
}

std::vector<unsigned> Pattern(unsigned seed) {
  std::vector<unsigned> v(kBytes / sizeof(unsigned));
  for (size_t i = 0; i < v.size(); ++i) v[i] = seed + static_cast<unsigned>(i);
  return v;
}

std::vector<unsigned> Read(const void* device) {
  std::vector<unsigned> out(kBytes / sizeof(unsigned));
  Check(cudaMemcpy(out.data(), device, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy back");
  return out;
}

std::string Hex(const cudaIpcMemHandle_t& h) {
  std::string out;
  char byte[3];
  for (const char c : h.reserved) {
    std::snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(c));
    out += byte;
  }
  return out;
}

bool FromHex(const char* text, cudaIpcMemHandle_t* h) {
  if (std::strlen(text) != 2 * sizeof(h->reserved)) return false;
  for (size_t i = 0; i < sizeof(h->reserved); ++i) {
    const std::string two(text + 2 * i, 2);
    h->reserved[i] = static_cast<char>(std::strtoul(two.c_str(), nullptr, 16));
  }
  return true;
}

// MEMORY2 records of the opened memory, counted from CUPTI's buffers.
uint64_t g_opened = 0;
int g_records_of_opened = 0;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_MEMORY2) continue;
    const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
    if (m->address == g_opened) ++g_records_of_opened;
  }
  std::free(buffer);
}

int Child(const char* mode, const char* hex) {
  cudaIpcMemHandle_t h{};
  if (!FromHex(hex, &h)) Fail("not a handle");
  if (cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS) {
    Fail("CUPTI activity");
  }
  void* p = nullptr;
  Check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "open");  // IPC:open
  g_opened = reinterpret_cast<uintptr_t>(p);
  if (Read(p) != Pattern(kParentSeed)) Fail("the parent's bytes are not there");
  const std::vector<unsigned> mine = Pattern(kChildSeed);
  Check(cudaMemcpy(p, mine.data(), kBytes, cudaMemcpyHostToDevice), "cudaMemcpy into it");
  if (std::strcmp(mode, "close") == 0) {
    void* again = nullptr;
    Check(cudaIpcOpenMemHandle(&again, h, cudaIpcMemLazyEnablePeerAccess), "open again");
    if (again != p) Fail("the second open mapped it again");
    Check(cudaIpcCloseMemHandle(again), "close");
    Check(cudaIpcCloseMemHandle(p), "close again");
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::printf("ipc_pair child: %d memory records of the opened memory\n", g_records_of_opened);
  std::printf("ipc_pair child: done\n");
  return 0;
}

int Parent(const char* self, const char* mode) {
  const bool alone = std::strcmp(mode, "alone") == 0;
  void* p = nullptr;
  Check(cudaMalloc(&p, kBytes), "cudaMalloc");  // IPC:alloc
  const std::vector<unsigned> in = Pattern(kParentSeed);
  Check(cudaMemcpy(p, in.data(), kBytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaIpcMemHandle_t h{};
  Check(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle");  // IPC:export
  if (!alone) {
    const std::string hex = Hex(h);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      execl(self, self, "child", mode, hex.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      Fail("the child failed");
    }
  }
  const std::vector<unsigned> out = Read(p);
  if (!alone && out != Pattern(kChildSeed)) Fail("the child's bytes are not there");
  Check(cudaFree(p), "cudaFree");
  std::printf("ipc_pair: done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "parent") == 0) return Parent(argv[0], argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "child") == 0) return Child(argv[2], argv[3]);
  std::fprintf(stderr, "usage: ipc_pair parent close|keep|alone\n");
  return 2;
}
