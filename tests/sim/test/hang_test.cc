// A kernel that never finishes (GWSIM_HANG_KERNEL, driver/hang.h): run as
// gwsim.model.hang_kernel with GWSIM_HANG_KERNEL=other (OtherStub, "_Z5otherv"), and without
// the variable, where the same program completes everything.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "recorder.h"

namespace gwsim::test {
namespace {

bool Hangs() { return EnvIs("GWSIM_HANG_KERNEL", "other"); }

// The system call a thread waits in, as /proc says ("running" when none).
std::string SyscallOf(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  in >> first;
  return first;
}

#ifdef SYS_pause
constexpr long kWaitSyscall = SYS_pause;
#else
constexpr long kWaitSyscall = SYS_ppoll;  // glibc's pause() where there is no pause
#endif

// Runs `call` on a thread of its own and waits (30 s at most) until that thread waits in
// pause(): the call blocks for ever. The thread is left behind; the process ends with it.
bool BlocksForEver(const std::function<void()>& call) {
  auto tid = std::make_shared<std::atomic<pid_t>>(0);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  std::thread([=] {
    tid->store(static_cast<pid_t>(syscall(SYS_gettid)));
    call();
    returned->store(true);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && !returned->load()) {
    if (tid->load() != 0 && SyscallOf(tid->load()) == std::to_string(kWaitSyscall)) {
      return !returned->load();
    }
    std::this_thread::yield();
  }
  return false;
}

TEST(Hang, AKernelNamedByTheVariableNeverEndsAndWhatWaitsForItBlocks) {
  InitCuda();
  Module();
  cudaStream_t blocking = nullptr;
  cudaStream_t non_blocking = nullptr;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t after = nullptr;
  cudaEvent_t elsewhere = nullptr;
  ASSERT_EQ(cudaEventCreate(&after), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&elsewhere), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  char host[64] = {};

  // A kernel that does not match ends, on any stream.
  ASSERT_EQ(LaunchStub(&KernelStub, non_blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamQuery(non_blocking), cudaSuccess);
  // The launch of the matching kernel succeeds.
  ASSERT_EQ(LaunchStub(&OtherStub, blocking), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(after, blocking), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(elsewhere, non_blocking), cudaSuccess);
  // A stream that does not wait for it goes on: copies and waits there complete.
  ASSERT_EQ(cudaMemcpyAsync(device, host, sizeof(host), cudaMemcpyHostToDevice, non_blocking),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(non_blocking), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(elsewhere), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(elsewhere), cudaSuccess);

  if (!Hangs()) {
    EXPECT_EQ(cudaStreamQuery(blocking), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(after), cudaSuccess);
    EXPECT_EQ(cudaEventSynchronize(after), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host, device, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // The other tests of the process see the device as it was.
    EXPECT_EQ(cudaFree(device), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(after), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(elsewhere), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(non_blocking), cudaSuccess);
    return;
  }
  // Queries answer "not ready": the kernel's stream, the legacy stream behind it, its event.
  EXPECT_EQ(cudaStreamQuery(blocking), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(after), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(non_blocking), cudaSuccess);
  // Every synchronizing call that must wait for it blocks.
  EXPECT_TRUE(BlocksForEver(
      [&] { return cudaMemcpy(host, device, sizeof(host), cudaMemcpyDeviceToHost); }));
  EXPECT_TRUE(BlocksForEver([&] { return cudaStreamSynchronize(blocking); }));
  EXPECT_TRUE(BlocksForEver([&] { return cudaEventSynchronize(after); }));
  EXPECT_TRUE(BlocksForEver([] { return cudaDeviceSynchronize(); }));
  EXPECT_TRUE(BlocksForEver([] {
    cudaFree(nullptr);  // the runtime makes the context current on this thread
    return cuCtxSynchronize();
  }));
}

}  // namespace
}  // namespace gwsim::test
