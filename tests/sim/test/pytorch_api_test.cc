// What a CUDA build of PyTorch needs of the simulator beyond the rest: every runtime and CUPTI
// symbol it links, stream priorities (its stream pools), PCI bus ids, pool access, the calls it
// links that the simulator refuses (cudaErrorNotSupported, traced), and Kineto's two CUPTI
// switches.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

std::vector<std::string> EnterNames(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const Event& e : events) {
    if (e.site == CUPTI_API_ENTER) names.push_back(e.name);
  }
  return names;
}

TEST(PyTorchAbi, EverySymbolTorchLinksIsExportedWithItsVersion) {
  void* cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(cudart, nullptr);
  ASSERT_NE(cupti, nullptr);
  int count = 0;
#define X(library, name)                                                        \
  EXPECT_NE(dlvsym(library, #name, "lib" #library ".so.13"), nullptr) << #name; \
  ++count;
#include "torch_symbols.inc"
#undef X
  EXPECT_EQ(count, 134);
}

TEST(PyTorchStreams, PriorityRangeIsHoppersAndCreationClampsToIt) {
  InitCuda();
  Recorder rec({kRuntime, kDriver});
  int least = 1;
  int greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  EXPECT_EQ(EnterNames(rec.Take()), (std::vector<std::string>{"cudaDeviceGetStreamPriorityRange",
                                                              "cuCtxGetStreamPriorityRange"}));
  // Either pointer may be NULL.
  EXPECT_EQ(cudaDeviceGetStreamPriorityRange(nullptr, &greatest), cudaSuccess);
  EXPECT_EQ(cuCtxGetStreamPriorityRange(&least, nullptr), CUDA_SUCCESS);

  for (const auto& [asked, got] : std::vector<std::pair<int, int>>{{-3, -3}, {-10, -5}, {4, 0}}) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, asked), cudaSuccess);
    int priority = 99;
    EXPECT_EQ(cudaStreamGetPriority(s, &priority), cudaSuccess);
    EXPECT_EQ(priority, got) << asked;
    EXPECT_EQ(cuStreamGetPriority(s, &priority), CUDA_SUCCESS);
    EXPECT_EQ(priority, got) << asked;
    EXPECT_EQ(cudaStreamGetPriority(s, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
  int priority = 99;
  EXPECT_EQ(cudaStreamGetPriority(nullptr, &priority), cudaSuccess);  // the legacy stream
  EXPECT_EQ(priority, 0);
  rec.Take();
  EXPECT_EQ(cudaStreamGetPriority(nullptr, &priority), cudaSuccess);
  EXPECT_EQ(EnterNames(rec.Take()),
            (std::vector<std::string>{"cudaStreamGetPriority", "cuStreamGetPriority"}));
}

TEST(PyTorchDevices, PciBusIdFollowsTheBusAttribute) {
  InitCuda();
  char id[32] = {};
  for (int device = 0; device < 2; ++device) {
    ASSERT_EQ(cudaDeviceGetPCIBusId(id, sizeof(id), device), cudaSuccess);
    int bus = -1;
    ASSERT_EQ(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device), cudaSuccess);
    char expected[32] = {};
    std::snprintf(expected, sizeof(expected), "0000:%02x:00.0", bus);
    EXPECT_STREQ(id, expected);
  }
  EXPECT_STREQ(id, "0000:02:00.0");
  EXPECT_EQ(cudaDeviceGetPCIBusId(id, sizeof(id), 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetPCIBusId(id, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetPCIBusId(nullptr, 32, 0), cudaErrorInvalidValue);
  // Truncated like snprintf, NUL included.
  EXPECT_EQ(cudaDeviceGetPCIBusId(id, 5, 0), cudaSuccess);
  EXPECT_STREQ(id, "0000");
}

TEST(PyTorchPools, SetAccessValidatesDevicesAndFlags) {
  InitCuda();
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  cudaMemAccessDesc desc{};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = 1;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  Recorder rec({kRuntime, kDriver});
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaSuccess);
  EXPECT_EQ(EnterNames(rec.Take()),
            (std::vector<std::string>{"cudaMemPoolSetAccess", "cuMemPoolSetAccess"}));
  desc.flags = cudaMemAccessFlagsProtNone;
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaSuccess);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, nullptr, 0), cudaSuccess);

  desc.flags = cudaMemAccessFlagsProtRead;  // not for pools
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  desc.location.id = 2;  // no such device
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  desc.location.id = 0;
  desc.location.type = cudaMemLocationTypeHost;
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, nullptr, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAccess(nullptr, nullptr, 0), cudaErrorInvalidValue);
}

// The calls PyTorch links that the simulator does not simulate fail cleanly: traced under their
// cbid, cudaErrorNotSupported returned and left as the last error.
TEST(PyTorchNotSimulated, LinkedCallsFailWithNotSupported) {
  InitCuda();
  Recorder rec({kRuntime});
  cudaLibrary_t library = nullptr;
  const char image[] = "not a cubin";
  EXPECT_EQ(cudaLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0),
            cudaErrorNotSupported);
  EXPECT_EQ(library, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming),
            cudaSuccess);
  cudaIpcEventHandle_t handle{};
  EXPECT_EQ(cudaIpcGetEventHandle(&handle, event), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  cudaUserObject_t object = nullptr;
  EXPECT_EQ(cudaUserObjectCreate(&object, nullptr, nullptr, 1, cudaUserObjectNoDestructorSync),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  const auto events = rec.Of(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLibraryLoadData_v12060);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].result, cudaErrorNotSupported);
}

TEST(PyTorchCupti, KinetoSwitchesAreAccepted) {
  EXPECT_EQ(cuptiActivityEnableCudaEventDeviceTimestamps(1), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiActivityEnableCudaEventDeviceTimestamps(0), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiActivityRegisterTimestampCallback(nullptr), CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(cuptiActivityRegisterTimestampCallback([]() -> uint64_t { return 42; }), CUPTI_SUCCESS);
}

}  // namespace
}  // namespace gwsim::test
