// Test helpers for the simulator's own tests: a CUPTI subscriber that records callbacks, an
// activity collector, and a fake module registration for kernels and variables.
#ifndef GWSIM_TEST_RECORDER_H_
#define GWSIM_TEST_RECORDER_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace gwsim::test {

// The callback domains and the memory kinds of activity records, as the tests spell them.
constexpr auto kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr auto kDriver = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr auto kResource = CUPTI_CB_DOMAIN_RESOURCE;
constexpr uint8_t kPageable = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
constexpr uint8_t kPinned = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
constexpr uint8_t kDevice = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
constexpr uint8_t kManaged = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
constexpr uint8_t kArray = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;

// One delivered API or resource callback, copied while it was delivered.
struct Event {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  CUpti_ApiCallbackSite site = CUPTI_API_ENTER;
  std::string name;
  std::string symbol;
  const void* params = nullptr;
  bool has_return = false;
  int result = -1;  // the cudaError_t / CUresult at EXIT
  uint32_t correlation_id = 0;
  uint64_t* correlation_data = nullptr;
  uint64_t correlation_data_value = 0;  // what the slot held when delivered
  CUcontext context = nullptr;
  uint32_t context_uid = 0;
  CUstream stream = nullptr;  // resource callbacks
};

// The process's single CUPTI subscriber for a test. Not reentrant across tests: Start/Stop.
class Recorder {
 public:
  using Hook = std::function<void(CUpti_CallbackDomain, CUpti_CallbackId, const void*)>;

  // Subscribes (as "gwsim-test-recorder") and enables the given domains.
  explicit Recorder(const std::vector<CUpti_CallbackDomain>& domains, Hook hook = nullptr);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  CUpti_SubscriberHandle handle() const { return handle_; }
  std::vector<Event> Take();
  // Events of one domain (and, if nonzero, one cbid).
  std::vector<Event> Of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid = 0);
  // Takes the events and returns the correlation id of the one call `cbid` of `domain` among
  // them (its ENTER and EXIT); fails the test, returning 0, unless there was exactly one.
  uint32_t CorrelationOfOneCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

 private:
  static void CUPTIAPI Callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void* data);

  CUpti_SubscriberHandle handle_ = nullptr;
  Hook hook_;
  std::mutex mu_;
  std::vector<Event> events_;
};

// Activity records delivered through the buffer callbacks, copied out of the buffers.
struct Activity {
  std::vector<CUpti_ActivityMemcpy6> memcpy;
  std::vector<CUpti_ActivityMemcpyPtoP4> peer;
  std::vector<CUpti_ActivityMemory4> memory;
  std::vector<CUpti_ActivityKernel10> kernels;
  std::vector<CUpti_ActivityAPI> api;  // RUNTIME and DRIVER
  std::vector<CUpti_ActivityExternalCorrelation> external;
  size_t buffers_completed = 0;
  size_t bytes_delivered = 0;
};

// Registers the buffer callbacks (buffers of `buffer_size` bytes; 0 makes bufferRequested
// hand out no buffer), enables `kinds`, and on Collect() flushes and returns what arrived.
class ActivityCollector {
 public:
  ActivityCollector(std::vector<CUpti_ActivityKind> kinds, size_t buffer_size = 1 << 20);
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

  Activity Collect();                // flush (forced) and take
  Activity Peek();                   // take what was delivered without flushing
  static size_t BuffersCompleted();  // since construction

 private:
  std::vector<CUpti_ActivityKind> kinds_;
};

// A fake module, registered the way nvcc's generated constructors do it.
struct FakeModule {
  FakeModule();
  ~FakeModule() = default;
  void** handle = nullptr;
};
// Host stubs registered as kernels "_Z6kernelPi" and "_Z5otherv", and variables.
void KernelStub();
void OtherStub();
extern int g_device_var_shadow[16];  // registered as "g_device_var", 64 bytes
const FakeModule& Module();
// Launches a stub above as a <<<1, 1>>> kernel without arguments on `stream`.
inline cudaError_t LaunchStub(void (*stub)(), cudaStream_t stream = nullptr) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(stub), dim3(1), dim3(1), nullptr, 0,
                          stream);
}

// Settings the simulator reads, with its defaults, for computing expected values.
struct Model {
  double bw_pageable = 12;
  double bw_pinned = 25;
  double bw_device = 2000;
  uint64_t latency_ns = 2000;
  uint64_t kernel_ns = 5000;
  uint64_t CopyNs(uint64_t bytes, double gbps) const {
    return latency_ns + static_cast<uint64_t>(static_cast<double>(bytes) / gbps);
  }
};
Model ReadModel();

// Forces context creation (cudaFree(0)) and fails the test on error.
void InitCuda();
// A test fixture whose SetUp is InitCuda (for TEST_F, with `using <Suite> = CudaTest;`).
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { InitCuda(); }
};
// InitCuda, then *p = cudaMalloc(bytes); fails the test on error (fatally, under
// ASSERT_NO_FATAL_FAILURE).
void InitCudaAndMalloc(void** p, size_t bytes);
// The current device's free memory (cudaMemGetInfo).
size_t FreeMemory();

// Creates a stream (cudaStreamCreate) and reads its id; fails the test on error.
void CreateStreamWithId(cudaStream_t* stream, unsigned long long* id);

// Whether `e` is the callback `cbid` of `domain` (for EXPECT_TRUE; the failure says what it is).
::testing::AssertionResult IsCallback(const Event& e, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid);

// Whether the environment variable `name` is set to `value`.
bool EnvIs(const char* name, const char* value);

// In a Recorder hook: the parameters of the API callback `data` when it is `want_cbid` of
// `want_domain` at `want_site`, else nullptr.
template <typename Params>
const Params* ParamsAt(CUpti_CallbackDomain want_domain, CUpti_CallbackId want_cbid,
                       CUpti_ApiCallbackSite want_site, CUpti_CallbackDomain domain,
                       CUpti_CallbackId cbid, const void* data) {
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (domain != want_domain || cbid != want_cbid || d->callbackSite != want_site) return nullptr;
  return static_cast<const Params*>(d->functionParams);
}

}  // namespace gwsim::test

#endif  // GWSIM_TEST_RECORDER_H_
