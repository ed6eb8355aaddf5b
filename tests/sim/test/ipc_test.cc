// CUDA IPC memory handles: what may be exported, a handle opened in another process (a forked
// child, which shares nothing with the exporter but the memfd the handle names), references,
// what stays charged where, the importer's view after the exporter frees, MEMORY2 records of an
// opening under GWSIM_IPC_MEMORY_RECORDS, and the calls' callbacks.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

constexpr size_t kBytes = (1 << 20) + 4096;  // 1 MiB and a page: not a power of two

// A forked child process and the pipes between it and the test. The child runs `body` and
// exits; what its checks found comes back to the parent, which fails the test with it.
class Peer {
 public:
  explicit Peer(const std::function<void(Peer&)>& body) {
    if (pipe(to_child_) != 0 || pipe(to_parent_) != 0 || pipe(results_) != 0) return;
    pid_ = fork();
    if (pid_ != 0) {
      close(to_child_[0]);
      close(to_parent_[1]);
      close(results_[1]);
      return;
    }
    child_ = true;
    body(*this);
    const ssize_t n = write(results_[1], failures_.data(), failures_.size());
    _exit(n == static_cast<ssize_t>(failures_.size()) ? 0 : 1);
  }
  ~Peer() {
    if (!joined_ && pid_ > 0) Join();
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // In the child: records a failed check.
  void Check(bool ok, const std::string& what) {
    if (!ok) failures_ += what + "\n";
  }
  void CheckResult(int got, int want, const std::string& what) {
    Check(got == want, what + " returned " + std::to_string(got) + ", not " + std::to_string(want));
  }
  // Bytes to the other side, and from it (blocking until they come).
  void Send(const void* data, size_t n) {
    const ssize_t sent = write(child_ ? to_parent_[1] : to_child_[1], data, n);
    if (sent != static_cast<ssize_t>(n)) failures_ += "a message was lost\n";
  }
  void Receive(void* data, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r =
          read(child_ ? to_child_[0] : to_parent_[0], static_cast<char*>(data) + got, n - got);
      if (r <= 0) {
        failures_ += "the other side went away\n";
        return;
      }
      got += static_cast<size_t>(r);
    }
  }
  // Wakes the other side, or waits until it does.
  void Signal() {
    const char byte = 1;
    Send(&byte, 1);
  }
  void Await() {
    char byte = 0;
    Receive(&byte, 1);
  }
  // In the parent: waits for the child's exit; what it found ("" when nothing), or why it did
  // not say.
  std::string Join() {
    joined_ = true;
    if (pid_ < 0) return "fork failed";
    std::string out;
    char buf[256];
    ssize_t n = 0;
    while ((n = read(results_[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_ || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      out += "the child did not exit cleanly\n";
    }
    return out + failures_;
  }

 private:
  bool child_ = false;
  bool joined_ = false;
  pid_t pid_ = -1;
  int to_child_[2] = {-1, -1};
  int to_parent_[2] = {-1, -1};
  int results_[2] = {-1, -1};
  std::string failures_;
};

std::vector<uint32_t> Pattern(size_t bytes, uint32_t seed) {
  std::vector<uint32_t> v(bytes / sizeof(uint32_t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = seed + static_cast<uint32_t>(i);
  return v;
}

// cudaMalloc'ed memory holding Pattern(kBytes, seed), and its handle.
void* ExportedPattern(uint32_t seed, cudaIpcMemHandle_t* handle) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, kBytes), cudaSuccess);
  const auto in = Pattern(kBytes, seed);
  EXPECT_EQ(cudaMemcpy(p, in.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaIpcGetMemHandle(handle, p), cudaSuccess);
  return p;
}

CUipcMemHandle DriverHandle(const cudaIpcMemHandle_t& h) {
  CUipcMemHandle out{};
  std::memcpy(out.reserved, h.reserved, sizeof(out.reserved));
  return out;
}

bool Holds(CUdeviceptr p, uint32_t seed) {
  std::vector<uint32_t> out(kBytes / sizeof(uint32_t));
  return cuMemcpyDtoH(out.data(), p, kBytes) == CUDA_SUCCESS && out == Pattern(kBytes, seed);
}

TEST(Ipc, OnlyTheBaseOfCuMemAllocMemoryCanBeExported) {
  InitCuda();
  cudaIpcMemHandle_t h{};
  void* small = nullptr;  // a handle for any size: cuMemAlloc memory is pages of its own
  ASSERT_EQ(cudaMalloc(&small, 256), cudaSuccess);
  const uint32_t value = 0xFEEDu;
  ASSERT_EQ(cudaMemcpy(small, &value, sizeof(value), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaIpcGetMemHandle(&h, small), cudaSuccess);
  uint32_t seen = 0;  // exported, the memory keeps its bytes and its address
  ASSERT_EQ(cudaMemcpy(&seen, small, sizeof(seen), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(seen, value);
  cudaIpcMemHandle_t again{};  // "may be called multiple times on an allocation"
  EXPECT_EQ(cudaIpcGetMemHandle(&again, small), cudaSuccess);
  EXPECT_EQ(std::memcmp(&h, &again, sizeof(h)), 0);
  EXPECT_EQ(cudaIpcGetMemHandle(&h, static_cast<char*>(small) + 64), cudaErrorInvalidValue);
  EXPECT_EQ(cudaIpcGetMemHandle(nullptr, small), cudaErrorInvalidValue);
  int attribute = 0;
  EXPECT_EQ(cuPointerGetAttribute(&attribute, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                  reinterpret_cast<CUdeviceptr>(small)),
            CUDA_SUCCESS);
  EXPECT_EQ(attribute, 1);
  // Freed and allocated again at the same address: a handle of its own.
  ASSERT_EQ(cudaFree(small), cudaSuccess);
  void* reused = nullptr;
  ASSERT_EQ(cudaMalloc(&reused, 256), cudaSuccess);
  ASSERT_EQ(reused, small);
  EXPECT_EQ(cudaIpcGetMemHandle(&again, reused), cudaSuccess);
  EXPECT_NE(std::memcmp(&h, &again, sizeof(h)), 0);
  cudaFree(reused);

  // Not cuMemAlloc memory: stream-ordered, managed, pinned host, VMM, pageable.
  void* pool = nullptr;
  ASSERT_EQ(cudaMallocAsync(&pool, 4096, nullptr), cudaSuccess);
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 4096), cudaSuccess);
  void* host = nullptr;
  ASSERT_EQ(cudaMallocHost(&host, 4096), cudaSuccess);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 << 20, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle physical = 0;
  ASSERT_EQ(cuMemCreate(&physical, 2 << 20, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 2 << 20, 0, physical, 0), CUDA_SUCCESS);
  char pageable[64];
  for (void* p : {pool, managed, host, reinterpret_cast<void*>(va), static_cast<void*>(pageable)}) {
    EXPECT_EQ(cudaIpcGetMemHandle(&h, p), cudaErrorInvalidValue) << p;
    CUipcMemHandle driver_handle{};
    EXPECT_EQ(cuIpcGetMemHandle(&driver_handle, reinterpret_cast<CUdeviceptr>(p)),
              CUDA_ERROR_INVALID_VALUE)
        << p;
  }
  EXPECT_EQ(cuMemUnmap(va, 2 << 20), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(physical), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, 2 << 20), CUDA_SUCCESS);
  cudaFreeAsync(pool, nullptr);
  cudaStreamSynchronize(nullptr);
  cudaFree(managed);
  cudaFreeHost(host);
}

TEST(Ipc, TheExportingProcessCannotOpenItsOwnHandle) {
  InitCuda();
  cudaIpcMemHandle_t h{};
  void* p = ExportedPattern(1, &h);
  void* opened = nullptr;
  // NVIDIA's driver answers "invalid device context" (CUDA_ERROR_INVALID_CONTEXT).
  EXPECT_EQ(cudaIpcOpenMemHandle(&opened, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorDeviceUninitialized);
  CUdeviceptr d = 0;
  EXPECT_EQ(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  // Not a handle cuIpcGetMemHandle made; flags other than the one the header asks for.
  CUipcMemHandle junk{};
  junk.reserved[0] = 7;
  EXPECT_EQ(cuIpcOpenMemHandle(&d, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcOpenMemHandle(&d, DriverHandle(h), 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cudaIpcOpenMemHandle(nullptr, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorInvalidValue);
  // Closing what no open returned.
  EXPECT_EQ(cudaIpcCloseMemHandle(p), cudaErrorInvalidValue);
  // A thread without a current context.
  std::thread([&] {
    CUipcMemHandle out{};
    EXPECT_EQ(cuIpcGetMemHandle(&out, reinterpret_cast<CUdeviceptr>(p)),
              CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuIpcCloseMemHandle(reinterpret_cast<CUdeviceptr>(p)), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
  cudaGetLastError();
  cudaFree(p);
}

// The child maps the exporter's memory: it reads what the exporter wrote, its writes reach the
// exporter, nothing is charged to it, a second open is a reference to the same mapping, and
// the mapping goes at the last close.
TEST(Ipc, AnotherProcessOpensTheSameMemoryUncharged) {
  InitCuda();
  cudaIpcMemHandle_t h{};
  void* p = ExportedPattern(100, &h);
  const size_t free_exporter = FreeMemory();
  Peer child([&](Peer& peer) {
    size_t free_before = 0;
    size_t total = 0;
    cudaMemGetInfo(&free_before, &total);
    CUdeviceptr d = 0;
    peer.CheckResult(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                     CUDA_SUCCESS, "open");
    if (d == 0) return;
    size_t free_after = 0;
    cudaMemGetInfo(&free_after, &total);
    peer.Check(free_after == free_before, "the opened memory was charged");
    peer.Check(Holds(d, 100), "the opened memory lacks the exporter's bytes");
    const auto mine = Pattern(kBytes, 200);
    peer.CheckResult(
        cudaMemcpy(reinterpret_cast<void*>(d), mine.data(), kBytes, cudaMemcpyHostToDevice),
        cudaSuccess, "cudaMemcpy into it");
    void* again = nullptr;
    peer.CheckResult(cudaIpcOpenMemHandle(&again, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess,
                     "the second open");
    peer.Check(again == reinterpret_cast<void*>(d), "the second open mapped it again");
    CUdeviceptr base = 0;
    size_t size = 0;
    peer.CheckResult(cuMemGetAddressRange(&base, &size, d + 64), CUDA_SUCCESS, "address range");
    peer.Check(base == d && size == kBytes, "the address range is not the allocation's");
    cudaPointerAttributes attrs{};
    peer.CheckResult(cudaPointerGetAttributes(&attrs, again), cudaSuccess, "pointer attributes");
    peer.Check(attrs.type == cudaMemoryTypeDevice && attrs.device == 0, "not device 0's memory");
    peer.CheckResult(cuMemFree(d), CUDA_ERROR_INVALID_VALUE, "cuMemFree of opened memory");
    peer.CheckResult(cuIpcCloseMemHandle(d), CUDA_SUCCESS, "the first close");
    peer.Check(Holds(d, 200), "the first close unmapped it");
    peer.CheckResult(cudaIpcCloseMemHandle(again), cudaSuccess, "the second close");
    peer.CheckResult(cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE, "a third close");
    cudaMemGetInfo(&free_after, &total);
    peer.Check(free_after == free_before, "closing gave memory back");
  });
  EXPECT_EQ(child.Join(), "");
  EXPECT_TRUE(Holds(reinterpret_cast<CUdeviceptr>(p), 200)) << "the child's writes";
  EXPECT_EQ(FreeMemory(), free_exporter);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// cuda.h leaves it undefined; the simulator keeps the importer's mapping with the bytes it had,
// apart from the exporter's next allocation at that address, and the handle cannot be opened
// again.
TEST(Ipc, AfterTheExporterFreesTheImporterKeepsWhatItMapped) {
  InitCuda();
  cudaIpcMemHandle_t h{};
  void* p = ExportedPattern(300, &h);
  Peer child([&](Peer& peer) {
    CUdeviceptr d = 0;
    peer.CheckResult(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                     CUDA_SUCCESS, "open");
    peer.Signal();
    peer.Await();  // the exporter freed it and allocated again at the same address
    if (d == 0) return;
    peer.Check(Holds(d, 300), "the mapping lost its bytes");
    const auto mine = Pattern(kBytes, 500);
    peer.CheckResult(cuMemcpyHtoD(d, mine.data(), kBytes), CUDA_SUCCESS, "cuMemcpyHtoD");
    peer.CheckResult(cuIpcCloseMemHandle(d), CUDA_SUCCESS, "close");
    peer.CheckResult(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                     CUDA_ERROR_INVALID_VALUE, "opening a freed allocation's handle");
  });
  child.Await();
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  void* q = nullptr;
  ASSERT_EQ(cudaMalloc(&q, kBytes), cudaSuccess);
  EXPECT_EQ(q, p);
  const auto in = Pattern(kBytes, 400);
  ASSERT_EQ(cudaMemcpy(q, in.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  child.Signal();
  EXPECT_EQ(child.Join(), "");
  EXPECT_TRUE(Holds(reinterpret_cast<CUdeviceptr>(q), 400)) << "the importer wrote into it";
  cudaIpcMemHandle_t other{};
  EXPECT_EQ(cudaIpcGetMemHandle(&other, q), cudaSuccess);
  EXPECT_NE(std::memcmp(&h, &other, sizeof(h)), 0);
  ASSERT_EQ(cudaFree(q), cudaSuccess);
}

// A context opens a handle once per device: another context on the same device may not, one on
// another device maps it again; a destroyed context takes its mappings with it.
TEST(Ipc, OpeningsBelongToTheirContext) {
  InitCuda();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs GWSIM_DEVICE_COUNT=2";
  cudaIpcMemHandle_t h{};
  void* p = ExportedPattern(600, &h);
  Peer child([&](Peer& peer) {
    void* on0 = nullptr;
    peer.CheckResult(cudaIpcOpenMemHandle(&on0, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess,
                     "open on device 0");
    CUcontext own = nullptr;
    peer.CheckResult(cuCtxCreate(&own, nullptr, 0, 0), CUDA_SUCCESS, "cuCtxCreate");
    CUdeviceptr d = 0;
    peer.CheckResult(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                     CUDA_ERROR_INVALID_CONTEXT, "open in a second context of device 0");
    peer.CheckResult(cuCtxDestroy(own), CUDA_SUCCESS, "cuCtxDestroy");
    peer.CheckResult(cudaSetDevice(1), cudaSuccess, "cudaSetDevice(1)");
    void* on1 = nullptr;
    peer.CheckResult(cudaIpcOpenMemHandle(&on1, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess,
                     "open on device 1");
    peer.Check(on1 != nullptr && on1 != on0, "device 1 shares device 0's mapping");
    peer.Check(Holds(reinterpret_cast<CUdeviceptr>(on1), 600), "device 1's mapping");
    peer.CheckResult(cudaDeviceReset(), cudaSuccess, "cudaDeviceReset on device 1");
    peer.CheckResult(cudaIpcCloseMemHandle(on1), cudaErrorInvalidValue,
                     "closing what the reset unmapped");
    peer.CheckResult(cudaSetDevice(0), cudaSuccess, "cudaSetDevice(0)");
    peer.CheckResult(cudaIpcCloseMemHandle(on0), cudaSuccess, "close on device 0");
  });
  EXPECT_EQ(child.Join(), "");
  cudaFree(p);
}

// The other way round: the child exports, the test opens. Whether NVIDIA's CUPTI reports an
// opening as MEMORY2 records is not known: the simulator does under GWSIM_IPC_MEMORY_RECORDS=1
// (an ALLOCATION at the open, a RELEASE at the last close, kind DEVICE, the importer's address
// and device), not by default. A handle of a process that has exited cannot be opened.
TEST(Ipc, AnOpeningIsAMemoryRecordOnlyUnderItsSwitch) {
  InitCuda();
  ActivityCollector activity({CUPTI_ACTIVITY_KIND_MEMORY2});
  Peer child([&](Peer& peer) {
    cudaIpcMemHandle_t h{};
    void* p = ExportedPattern(700, &h);
    peer.Check(p != nullptr, "cudaMalloc");
    peer.Send(&h, sizeof(h));
    peer.Await();
  });
  cudaIpcMemHandle_t h{};
  child.Receive(&h, sizeof(h));
  activity.Collect();  // the test's own records before the open
  CUdeviceptr d = 0;
  ASSERT_EQ(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_SUCCESS);
  EXPECT_TRUE(Holds(d, 700));
  ASSERT_EQ(cuIpcCloseMemHandle(d), CUDA_SUCCESS);
  const Activity records = activity.Collect();
  child.Signal();
  EXPECT_EQ(child.Join(), "");
  std::vector<CUpti_ActivityMemoryOperationType> ops;
  for (const CUpti_ActivityMemory4& r : records.memory) {
    if (r.address != d) continue;
    ops.push_back(r.memoryOperationType);
    EXPECT_EQ(r.bytes, kBytes);
    EXPECT_EQ(r.memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    EXPECT_EQ(r.deviceId, 0u);
  }
  if (EnvIs("GWSIM_IPC_MEMORY_RECORDS", "1")) {
    EXPECT_EQ(ops, (std::vector<CUpti_ActivityMemoryOperationType>{
                       CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                       CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE}));
  } else {
    EXPECT_TRUE(ops.empty());
  }
  // The exporter has exited: its handle names nothing any more.
  EXPECT_EQ(cuIpcOpenMemHandle(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_VALUE);
}

// The runtime calls nest the driver calls, each traced with its own cbid; cuGetProcAddress
// hands out cuIpcOpenMemHandle_v2 from CUDA 11.0 on and the older ABI before.
TEST(Ipc, CallsAreTracedWithTheirCbids) {
  void* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(InitCudaAndMalloc(&p, 4096));
  Recorder rec({kRuntime, kDriver});
  cudaIpcMemHandle_t h{};
  ASSERT_EQ(cudaIpcGetMemHandle(&h, p), cudaSuccess);
  void* opened = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&opened, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorDeviceUninitialized);
  EXPECT_EQ(cudaIpcCloseMemHandle(p), cudaErrorInvalidValue);
  // The pre-11.0 ABI, which cuda.h names cuIpcOpenMemHandle_v2 in a program of today.
  using OpenFn = CUresult (*)(CUdeviceptr*, CUipcMemHandle, unsigned);
  const auto v1 = reinterpret_cast<OpenFn>(dlsym(RTLD_DEFAULT, "cuIpcOpenMemHandle"));
  ASSERT_NE(v1, nullptr);
  CUdeviceptr d = 0;
  EXPECT_EQ(v1(&d, DriverHandle(h), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  const std::vector<Event> events = rec.Take();
  const std::pair<CUpti_CallbackDomain, CUpti_CallbackId> expected[] = {
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcGetMemHandle_v4010},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcGetMemHandle},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcGetMemHandle},
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcGetMemHandle_v4010},
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2},
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010},
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcCloseMemHandle_v4010},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle},
      {kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaIpcCloseMemHandle_v4010},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle},
      {kDriver, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle},
  };
  ASSERT_EQ(events.size(), std::size(expected));
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_TRUE(IsCallback(events[i], expected[i].first, expected[i].second)) << i;
  }
  EXPECT_EQ(events[3].result, cudaSuccess);
  EXPECT_EQ(events[6].result, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(events[7].result, cudaErrorDeviceUninitialized);
  EXPECT_EQ(events[10].result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(events[13].name, "cuIpcOpenMemHandle");
  void* fn = nullptr;
  ASSERT_EQ(
      cuGetProcAddress("cuIpcOpenMemHandle", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr),
      CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuIpcOpenMemHandle_v2"));
  ASSERT_EQ(
      cuGetProcAddress("cuIpcOpenMemHandle", &fn, 10020, CU_GET_PROC_ADDRESS_DEFAULT, nullptr),
      CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(v1));
  cudaGetLastError();
  cudaFree(p);
}

}  // namespace
}  // namespace gwsim::test
