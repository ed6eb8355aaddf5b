#include "recorder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "runtime/nvcc_entry_points.h"

namespace gwsim::test {

Recorder::Recorder(const std::vector<CUpti_CallbackDomain>& domains, Hook hook)
    : hook_(std::move(hook)) {
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "gwsim-test-recorder";
  const CUptiResult r = cuptiSubscribe_v2(&handle_, Callback, this, &params);
  EXPECT_EQ(r, CUPTI_SUCCESS);
  for (CUpti_CallbackDomain d : domains) {
    EXPECT_EQ(cuptiEnableDomain(1, handle_, d), CUPTI_SUCCESS);
  }
}

Recorder::~Recorder() {
  if (handle_ != nullptr) {
    EXPECT_EQ(cuptiUnsubscribe(handle_), CUPTI_SUCCESS);
  }
}

void CUPTIAPI Recorder::Callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void* data) {
  auto* self = static_cast<Recorder*>(userdata);
  if (self->hook_) self->hook_(domain, cbid, data);
  Event e;
  e.domain = domain;
  e.cbid = cbid;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    e.site = d->callbackSite;
    e.name = d->functionName != nullptr ? d->functionName : "";
    e.symbol = d->symbolName != nullptr ? d->symbolName : "";
    e.params = d->functionParams;
    if (d->functionReturnValue != nullptr) {
      e.has_return = true;
      e.result = *static_cast<const int*>(d->functionReturnValue);
    }
    e.correlation_id = d->correlationId;
    e.correlation_data = d->correlationData;
    e.correlation_data_value = d->correlationData != nullptr ? *d->correlationData : 0;
    e.context = d->context;
    e.context_uid = d->contextUid;
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* d = static_cast<const CUpti_ResourceData*>(data);
    e.context = d->context;
    e.stream = d->resourceHandle.stream;
  }
  std::lock_guard lock(self->mu_);
  self->events_.push_back(std::move(e));
}

std::vector<Event> Recorder::Take() {
  std::lock_guard lock(mu_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

std::vector<Event> Recorder::Of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::vector<Event> out;
  for (Event& e : Take()) {
    if (e.domain == domain && (cbid == 0 || e.cbid == cbid)) out.push_back(std::move(e));
  }
  return out;
}

uint32_t Recorder::CorrelationOfOneCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const std::vector<Event> calls = Of(domain, cbid);
  if (calls.size() != 2) {
    ADD_FAILURE() << calls.size() << " callbacks of cbid " << cbid
                  << ", not one call's ENTER and EXIT";
    return 0;
  }
  return calls[0].correlation_id;
}

namespace {

struct CollectorState {
  std::mutex mu;
  Activity activity;
  size_t buffer_size = 1 << 20;
};
CollectorState& C() {
  static auto* const state = new CollectorState();
  return *state;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t n = C().buffer_size;
  *max_records = 0;
  *size = n;
  *buffer = n == 0 ? nullptr : static_cast<uint8_t*>(std::aligned_alloc(8, (n + 7) / 8 * 8));
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CollectorState& c = C();
  std::lock_guard lock(c.mu);
  ++c.activity.buffers_completed;
  c.activity.bytes_delivered += valid;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        c.activity.memcpy.push_back(*reinterpret_cast<CUpti_ActivityMemcpy6*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        c.activity.peer.push_back(*reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMORY2:
        c.activity.memory.push_back(*reinterpret_cast<CUpti_ActivityMemory4*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        c.activity.kernels.push_back(*reinterpret_cast<CUpti_ActivityKernel10*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
        c.activity.api.push_back(*reinterpret_cast<CUpti_ActivityAPI*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        c.activity.external.push_back(
            *reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record));
        break;
      default:
        ADD_FAILURE() << "unexpected activity kind " << record->kind;
        break;
    }
  }
  std::free(buffer);
}

}  // namespace

ActivityCollector::ActivityCollector(std::vector<CUpti_ActivityKind> kinds, size_t buffer_size)
    : kinds_(std::move(kinds)) {
  EXPECT_EQ(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  {
    std::lock_guard lock(C().mu);
    C().activity = Activity{};
    C().buffer_size = buffer_size;
  }
  for (CUpti_ActivityKind k : kinds_) EXPECT_EQ(cuptiActivityEnable(k), CUPTI_SUCCESS);
}

ActivityCollector::~ActivityCollector() {
  for (CUpti_ActivityKind k : kinds_) EXPECT_EQ(cuptiActivityDisable(k), CUPTI_SUCCESS);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lock(C().mu);
  C().activity = Activity{};
  C().buffer_size = 1 << 20;
}

Activity ActivityCollector::Collect() {
  EXPECT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  return Peek();
}

Activity ActivityCollector::Peek() {
  std::lock_guard lock(C().mu);
  Activity out = C().activity;
  C().activity.memcpy.clear();
  C().activity.peer.clear();
  C().activity.memory.clear();
  C().activity.kernels.clear();
  C().activity.api.clear();
  C().activity.external.clear();
  return out;
}

size_t ActivityCollector::BuffersCompleted() {
  std::lock_guard lock(C().mu);
  return C().activity.buffers_completed;
}

// Distinct bodies keep the two stubs at distinct addresses.
__attribute__((noinline)) void KernelStub() { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void OtherStub() {
  static volatile int calls = 0;
  calls = calls + 1;
}
int g_device_var_shadow[16];

FakeModule::FakeModule() {
  static char fat_binary[64];
  handle = __cudaRegisterFatBinary(fat_binary);
  __cudaRegisterFunction(handle, reinterpret_cast<const char*>(&KernelStub),
                         const_cast<char*>("_Z6kernelPi"), "_Z6kernelPi", -1, nullptr, nullptr,
                         nullptr, nullptr, nullptr);
  __cudaRegisterFunction(handle, reinterpret_cast<const char*>(&OtherStub),
                         const_cast<char*>("_Z5otherv"), "_Z5otherv", -1, nullptr, nullptr, nullptr,
                         nullptr, nullptr);
  __cudaRegisterVar(handle, reinterpret_cast<char*>(g_device_var_shadow),
                    const_cast<char*>("g_device_var"), "g_device_var", 0,
                    sizeof(g_device_var_shadow), 0, 0);
  __cudaRegisterFatBinaryEnd(handle);
}

const FakeModule& Module() {
  static const auto* const module = new FakeModule();
  return *module;
}

Model ReadModel() {
  Model m;
  auto read = [](const char* name, double* out) {
    if (const char* v = std::getenv(name)) *out = std::strtod(v, nullptr);
  };
  auto read_u = [](const char* name, uint64_t* out) {
    if (const char* v = std::getenv(name)) *out = std::strtoull(v, nullptr, 10);
  };
  read("GWSIM_BW_PAGEABLE", &m.bw_pageable);
  read("GWSIM_BW_PINNED", &m.bw_pinned);
  read("GWSIM_BW_DEVICE", &m.bw_device);
  read_u("GWSIM_COPY_LATENCY_NS", &m.latency_ns);
  read_u("GWSIM_KERNEL_NS", &m.kernel_ns);
  return m;
}

void InitCuda() { ASSERT_EQ(cudaFree(nullptr), cudaSuccess); }

void InitCudaAndMalloc(void** p, size_t bytes) {
  ASSERT_NO_FATAL_FAILURE(InitCuda());
  ASSERT_EQ(cudaMalloc(p, bytes), cudaSuccess);
}

size_t FreeMemory() {
  size_t free = 0;
  size_t total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

void CreateStreamWithId(cudaStream_t* stream, unsigned long long* id) {
  ASSERT_EQ(cudaStreamCreate(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId(*stream, id), cudaSuccess);
}

::testing::AssertionResult IsCallback(const Event& e, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid) {
  if (e.domain == domain && e.cbid == cbid) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "callback " << e.cbid << " (" << e.name << ") of domain "
                                       << e.domain << ", not " << cbid << " of domain " << domain;
}

bool EnvIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace gwsim::test
