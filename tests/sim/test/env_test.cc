// Behaviour that depends on the environment the process starts with. CMake runs each suite as
// its own ctest entry with the ENVIRONMENT it needs; run without it, a suite skips itself.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "inject.h"
#include "recorder.h"

namespace gwsim::test {
namespace {

TEST(NoDriver, EveryCallFailsAsWithoutADriver) {
  if (!EnvIs("GWSIM_FAIL", "no-driver")) GTEST_SKIP() << "needs GWSIM_FAIL=no-driver";
  CUpti_SubscriberHandle h = nullptr;
  EXPECT_EQ(cuptiSubscribe(&h, nullptr, nullptr), CUPTI_ERROR_UNKNOWN);
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  EXPECT_EQ(cuptiSubscribe_v2(&h, nullptr, nullptr, &params), CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), CUPTI_ERROR_UNKNOWN);

  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorInsufficientDriver);
  EXPECT_EQ(cudaFree(nullptr), cudaErrorInsufficientDriver);
  int count = -1;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorInsufficientDriver);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInsufficientDriver);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int version = -1;
  EXPECT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 0);
  EXPECT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInsufficientDriver), "cudaErrorInsufficientDriver");

  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
  CUdeviceptr d = 0;
  EXPECT_EQ(cuMemAlloc(&d, 64), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_ERROR_NOT_INITIALIZED);
}

TEST(OtherSubscriber, SubscribeFailsAndNamesTheHolder) {
  if (!EnvIs("GWSIM_FAIL", "other-subscriber")) GTEST_SKIP() << "needs GWSIM_FAIL=other-subscriber";
  const char* configured = std::getenv("GWSIM_OTHER_SUBSCRIBER");
  const std::string expected = configured != nullptr ? configured : "Nsight Systems";
  CUpti_SubscriberHandle h = nullptr;
  EXPECT_EQ(cuptiSubscribe(&h, nullptr, nullptr), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "gwsim-test";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  EXPECT_EQ(cuptiSubscribe_v2(&h, nullptr, nullptr, &params),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(std::string(old_name), expected);
  // CUDA itself keeps working.
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST(ZeroDevices, CudaReportsNoDevice) {
  if (!EnvIs("GWSIM_DEVICE_COUNT", "0")) GTEST_SKIP() << "needs GWSIM_DEVICE_COUNT=0";
  int count = -1;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  EXPECT_EQ(count, 0);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorNoDevice);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

// CUDA_VISIBLE_DEVICES=2,0,9,1 on a node of four: ordinals 0 and 1 are the node's devices 2 and
// 0 (the list ends at 9, no device), with their UUIDs and PCI bus ids; NVML lists all four and
// gives each its node index.
TEST(VisibleDevices, OrdinalsAreTheListedNodeDevicesAndNvmlSeesTheNode) {
  if (!EnvIs("CUDA_VISIBLE_DEVICES", "2,0,9,1")) GTEST_SKIP() << "needs CUDA_VISIBLE_DEVICES";
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  const int node[] = {2, 0};
  for (int ordinal = 0; ordinal < 2; ++ordinal) {
    CUuuid uuid{};
    ASSERT_EQ(cuDeviceGetUuid_v2(&uuid, ordinal), CUDA_SUCCESS);
    char expected[17];
    std::snprintf(expected, sizeof(expected), "gwsim-device-%02d", node[ordinal]);
    EXPECT_EQ(std::memcmp(uuid.bytes, expected, sizeof(uuid.bytes)), 0) << ordinal;
    char bus_id[32] = {};
    ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof(bus_id), ordinal), CUDA_SUCCESS);
    EXPECT_EQ(std::string(bus_id), "0000:0" + std::to_string(node[ordinal] + 1) + ":00.0");
    int bus = 0;
    ASSERT_EQ(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, ordinal), CUDA_SUCCESS);
    EXPECT_EQ(bus, node[ordinal] + 1);
  }
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nvml, nullptr) << dlerror();
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  using ByPciFn = int (*)(const char*, void**);
  using IndexFn = int (*)(void*, unsigned int*);
  const auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
  const auto node_count = reinterpret_cast<CountFn>(dlsym(nvml, "nvmlDeviceGetCount_v2"));
  const auto by_pci = reinterpret_cast<ByPciFn>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  const auto index_of = reinterpret_cast<IndexFn>(dlsym(nvml, "nvmlDeviceGetIndex"));
  ASSERT_TRUE(init != nullptr && node_count != nullptr && by_pci != nullptr && index_of != nullptr);
  ASSERT_EQ(init(), 0);
  unsigned int n = 0;
  ASSERT_EQ(node_count(&n), 0);
  EXPECT_EQ(n, 4u);
  void* handle = nullptr;
  unsigned int index = 99;
  ASSERT_EQ(by_pci("00000000:03:00.0", &handle), 0);
  ASSERT_EQ(index_of(handle, &index), 0);
  EXPECT_EQ(index, 2u);
}

// Init order, seen by a subscriber that is there before the first CUDA call.
TEST(FreshProcess, InitAndContextCreationAreResourceEvents) {
  if (!EnvIs("GWSIM_TEST_FRESH_PROCESS", "1")) GTEST_SKIP() << "needs a fresh process";
  Recorder rec({CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API});
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  auto events = rec.Take();
  // The runtime's own initialisation (cuInit, cuGetProcAddress, primary context) is not
  // reported as API calls; what it causes is, as resource events. As with NVIDIA's runtime,
  // cuInit runs before the first call's ENTER, the primary context is created inside it.
  ASSERT_EQ(events.size(), 6u);
  EXPECT_TRUE(IsCallback(events[0], kResource, CUPTI_CBID_RESOURCE_CU_INIT_FINISHED));
  EXPECT_TRUE(IsCallback(events[1], kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020));
  EXPECT_EQ(events[1].site, CUPTI_API_ENTER);
  EXPECT_TRUE(IsCallback(events[2], kResource, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  EXPECT_NE(events[2].context, nullptr);
  EXPECT_EQ(events[3].cbid, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  EXPECT_EQ(events[4].cbid, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  EXPECT_EQ(events[5].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
  EXPECT_EQ(events[5].site, CUPTI_API_EXIT);
  // A later cuInit is an ordinary traced call, with no second CU_INIT_FINISHED.
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  events = rec.Take();
  ASSERT_EQ(events.size(), 2u);  // ENTER, EXIT
  EXPECT_TRUE(IsCallback(events[0], kDriver, CUPTI_DRIVER_TRACE_CBID_cuInit));
  cudaFree(p);
}

const GwsimInjectStats* InjectStats(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  auto fn = reinterpret_cast<GwsimInjectStatsFn>(dlsym(handle, "gwsim_inject_stats"));
  return fn != nullptr ? fn() : nullptr;
}

TEST(Injection, InitializeInjectionRunsOnceDuringTheFirstCuInit) {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || !EnvIs("GWSIM_TEST_EXPECT_INJECTION", "1")) {
    GTEST_SKIP() << "needs CUDA_INJECTION64_PATH to the test injection library";
  }
  EXPECT_EQ(InjectStats(path), nullptr) << "loaded before any CUDA call";
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  const GwsimInjectStats* stats = InjectStats(path);
  ASSERT_NE(stats, nullptr) << "not loaded by the first runtime call";
  EXPECT_EQ(stats->initialize_calls, 1);
  EXPECT_EQ(stats->cu_init_finished, 1);
  EXPECT_EQ(stats->contexts_created, 1);
  // As with NVIDIA's runtime, the driver is initialised (and the library injected) before the
  // first call's ENTER: the call that initialised CUDA is seen whole.
  EXPECT_EQ(stats->first_runtime_cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
  EXPECT_EQ(stats->first_runtime_site, CUPTI_API_ENTER);
  EXPECT_EQ(stats->exit_without_enter, 0);
  EXPECT_EQ(stats->runtime_enter, 1);
  EXPECT_EQ(stats->runtime_exit, 1);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(stats->runtime_enter, 2);
  EXPECT_EQ(stats->runtime_exit, 2);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  EXPECT_EQ(stats->initialize_calls, 1);
}

TEST(Injection, ALibraryThatCannotBeUsedIsIgnoredSilently) {
  if (!EnvIs("GWSIM_TEST_EXPECT_INJECTION", "0")) {
    GTEST_SKIP() << "needs CUDA_INJECTION64_PATH to a missing or unusable library";
  }
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// Malformed GWSIM_* values: one line naming the variable, then the default. The environment
// is read when the libraries load, so the check runs in a child started with it.
void ExpectDefaultsThenExit() {
  size_t free = 0;
  size_t total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) std::_Exit(2);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) std::_Exit(3);
  std::exit(total == (16ull << 30) && count == 1 ? 0 : 1);
}

TEST(BadEnvDeathTest, MalformedValuesWarnAndFallBackToDefaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("GWSIM_DEVICE_MEMORY", "lots", 1);
  setenv("GWSIM_DEVICE_COUNT", "-1", 1);
  setenv("GWSIM_BW_PINNED", "-3", 1);
  setenv("GWSIM_FAIL", "sometimes", 1);
  setenv("GWSIM_EXIT_CONTEXT_DESTROY", "yes", 1);
  EXPECT_EXIT(ExpectDefaultsThenExit(), testing::ExitedWithCode(0),
              "gwsim: ignoring GWSIM_DEVICE_MEMORY='lots'.*"
              "gwsim: ignoring GWSIM_DEVICE_COUNT='-1'.*"
              "gwsim: ignoring GWSIM_BW_PINNED='-3'.*"
              "gwsim: ignoring GWSIM_FAIL='sometimes'.*"
              "gwsim: ignoring GWSIM_EXIT_CONTEXT_DESTROY='yes'");
  unsetenv("GWSIM_DEVICE_MEMORY");
  unsetenv("GWSIM_DEVICE_COUNT");
  unsetenv("GWSIM_BW_PINNED");
  unsetenv("GWSIM_FAIL");
  unsetenv("GWSIM_EXIT_CONTEXT_DESTROY");
}

TEST(BadEnvDeathTest, SuffixedSizesAreAccepted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("GWSIM_DEVICE_MEMORY", "2G", 1);
  EXPECT_EXIT(
      {
        size_t free = 0;
        size_t total = 0;
        std::exit(cudaMemGetInfo(&free, &total) == cudaSuccess && total == (2ull << 30) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
  unsetenv("GWSIM_DEVICE_MEMORY");
}

}  // namespace
}  // namespace gwsim::test
