// CUDA errors: the table of failed calls and sticky errors with each
// context's ring of launches since its last successful synchronization
// (libgpuwatch/record/cuda_errors.h), through the event API
// (libgpuwatch/session/events.h), and the report's cuda_errors section
// (libgpuwatch/report/model_errors.h) written and read back.
#include "libgpuwatch/record/cuda_errors.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/session/events.h"
#include "libgpuwatch/session/session.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

CudaErrorEvent Error(const char* api, int code, uint32_t context, uint64_t now,
                     uint32_t stack = 0) {
  return {.code = code, .context_uid = context, .stack_id = stack, .now_ns = now, .api = api};
}

// When the errors below happen, on the tracker's clock (launches are a moment before).
constexpr uint64_t kErrorNs = 5000000000;

TEST(CudaErrors, NamesTheCodesOfBothApisAndKnowsWhichAreStickyOrExpected) {
  EXPECT_STREQ(CudaErrorName(ApiDomain::kRuntime, 700), "cudaErrorIllegalAddress");
  EXPECT_STREQ(CudaErrorName(ApiDomain::kDriver, 700), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_STREQ(CudaErrorName(ApiDomain::kDriver, 719), "CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_STREQ(CudaErrorName(ApiDomain::kRuntime, 12345), "");
  EXPECT_TRUE(IsStickyCudaError(700));
  EXPECT_TRUE(IsStickyCudaError(719));
  EXPECT_FALSE(IsStickyCudaError(1));
  for (const int code : {2, 600, 704, 705, 712, 713}) EXPECT_TRUE(IsExpectedCudaError(code));
  EXPECT_FALSE(IsExpectedCudaError(700));
}

TEST(CudaErrors, CountsFailedCallsByCallAndCodeAndLeavesExpectedOnesOut) {
  KernelTable kernels;
  CudaErrors errors;
  errors.OnError(Error("cudaMalloc", 2, 1, 10));         // out of memory: the OOM report's
  errors.OnError(Error("cudaStreamQuery", 600, 1, 11));  // not ready: a query's answer
  errors.OnError(Error("cudaMemcpy", 1, 1, 20, 5));
  errors.OnError(Error("cudaMemcpy", 1, 1, 30, 6));
  errors.OnError(Error("cudaFree", 1, 1, 40, 7));
  EXPECT_FALSE(errors.failed());
  const CudaErrorsSnapshot snap = errors.Snapshot(kernels);
  ASSERT_EQ(snap.calls.size(), 2u);
  EXPECT_EQ(snap.calls[0].api, "cudaMemcpy");
  EXPECT_EQ(snap.calls[0].first.code, 1);
  EXPECT_EQ(snap.calls[0].count, 2u);
  EXPECT_EQ(snap.calls[0].first.now_ns, 20u);
  EXPECT_EQ(snap.calls[0].last_ns, 30u);
  EXPECT_EQ(snap.calls[0].first.stack_id, 5u);  // the first's
  EXPECT_EQ(snap.calls[1].api, "cudaFree");
  EXPECT_EQ(snap.calls[1].count, 1u);
  EXPECT_TRUE(snap.sticky.empty());
}

// The callback captures a failed call's stack only when OnError says the
// table kept something new with it (KeepsNew asks the same without
// counting): a failure repeated in a loop is counted without a capture each
// time.
TEST(CudaErrors, OnlyAFailureKeptNewNeedsItsStack) {
  CudaErrors errors;
  EXPECT_TRUE(errors.KeepsNew(Error("cudaMemcpy", 1, 1, 20)));
  errors.OnError(Error("cudaMemcpy", 1, 1, 20, 5));
  EXPECT_FALSE(errors.KeepsNew(Error("cudaMemcpy", 1, 1, 30)));  // counted only
  EXPECT_TRUE(errors.KeepsNew(Error("cudaMemcpy", 3, 1, 30)));   // another code
  EXPECT_TRUE(errors.KeepsNew(Error("cudaFree", 1, 1, 30)));     // another call
  EXPECT_FALSE(errors.KeepsNew(Error("cudaMalloc", 2, 1, 30)));  // expected: not kept at all
  // A sticky error: new for its context even when its (call, code) is known.
  errors.OnError(Error("cudaMemcpy", 700, 1, 40, 6));
  EXPECT_FALSE(errors.KeepsNew(Error("cudaMemcpy", 700, 1, 50)));
  EXPECT_TRUE(errors.KeepsNew(Error("cudaMemcpy", 700, 2, 50)));
  errors.OnError(Error("cudaMemcpy", 700, 2, 50, 7));
  EXPECT_FALSE(errors.KeepsNew(Error("cudaMemcpy", 700, 2, 60)));
  // Once the table of calls is full, a new (call, code) is counted as not kept.
  for (int code = 100; code < 100 + CudaErrors::kMaxCalls; ++code) {
    errors.OnError(Error("cudaLaunchKernel", code, 1, 70, 8));
  }
  EXPECT_FALSE(errors.KeepsNew(Error("cudaEventRecord", 1, 1, 80)));
}

// OnError says what KeepsNew would have, under its one lock; the stack
// captured after it goes to what it kept, and to nothing kept before.
TEST(CudaErrors, OnErrorSaysWhatItKeptNewAndTakesItsStackAfter) {
  KernelTable kernels;
  CudaErrors errors;
  EXPECT_TRUE(errors.OnError(Error("cudaMemcpy", 1, 1, 20)));   // new: no stack yet
  EXPECT_FALSE(errors.OnError(Error("cudaMemcpy", 1, 1, 30)));  // counted only
  EXPECT_FALSE(errors.OnError(Error("cudaMalloc", 2, 1, 30)));  // expected: not kept
  errors.SetFirstStack(Error("cudaMemcpy", 1, 1, 20), 9);
  errors.SetFirstStack(Error("cudaMemcpy", 1, 1, 30), 10);  // has its stack: unchanged
  // A sticky error, new for its context though its (call, code) is known.
  EXPECT_TRUE(errors.OnError(Error("cudaFree", 700, 1, 40)));
  errors.SetFirstStack(Error("cudaFree", 700, 1, 40), 11);
  EXPECT_TRUE(errors.OnError(Error("cudaFree", 700, 2, 50)));
  errors.SetFirstStack(Error("cudaFree", 700, 2, 50), 12);
  EXPECT_FALSE(errors.OnError(Error("cudaFree", 700, 2, 60)));
  const CudaErrorsSnapshot snap = errors.Snapshot(kernels);
  ASSERT_EQ(snap.calls.size(), 2u);
  EXPECT_EQ(snap.calls[0].api, "cudaMemcpy");
  EXPECT_EQ(snap.calls[0].count, 2u);
  EXPECT_EQ(snap.calls[0].first.stack_id, 9u);
  EXPECT_EQ(snap.calls[1].api, "cudaFree");
  EXPECT_EQ(snap.calls[1].count, 3u);
  EXPECT_EQ(snap.calls[1].first.stack_id, 11u);  // the first's, not the second context's
  ASSERT_EQ(snap.sticky.size(), 2u);
  EXPECT_EQ(snap.sticky[0].error.context_uid, 1u);
  EXPECT_EQ(snap.sticky[0].error.stack_id, 11u);
  EXPECT_EQ(snap.sticky[1].error.context_uid, 2u);
  EXPECT_EQ(snap.sticky[1].error.stack_id, 12u);
}

TEST(CudaErrors, AStickyErrorKeepsTheLaunchesSinceItsContextsLastSynchronization) {
  KernelTable kernels;
  CudaErrors errors;
  const uint32_t fill = kernels.OnLaunch("Fill");
  const uint32_t scale = kernels.OnLaunch("Scale");
  const uint32_t scatter = kernels.OnLaunch("Scatter");
  kernels.SetSite(fill, 3);
  EXPECT_FALSE(kernels.NeedsSite(fill));
  EXPECT_TRUE(kernels.NeedsSite(scale));
  kernels.SetSite(scale, 4);
  kernels.SetSite(scatter, 5);
  errors.OnLaunch(1, fill, 0, Ticks());
  errors.OnSynced(1);
  errors.OnLaunch(1, scale, 0x77, Ticks());
  errors.OnLaunch(2, fill, 0, Ticks());  // another context
  errors.OnLaunch(1, scatter, 0x77, Ticks());
  errors.OnError(Error("cudaMemcpy", 700, 1, kErrorNs, 9));
  errors.OnLaunch(1, fill, 0, Ticks());            // after the error: not before it
  errors.OnError(Error("cudaFree", 700, 1, 600));  // the context's first is kept
  EXPECT_TRUE(errors.failed());
  const CudaErrorsSnapshot snap = errors.Snapshot(kernels);
  ASSERT_EQ(snap.sticky.size(), 1u);
  const StickyCudaError& s = snap.sticky[0];
  EXPECT_EQ(s.api, "cudaMemcpy");
  EXPECT_EQ(s.error.code, 700);
  EXPECT_EQ(s.error.context_uid, 1u);
  EXPECT_EQ(s.error.stack_id, 9u);
  EXPECT_EQ(s.error.now_ns, kErrorNs);
  EXPECT_EQ(s.kernels_not_kept, 0u);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].name, "Scale");
  EXPECT_EQ(s.kernels[0].stream, 0x77u);
  // Launched a moment before the error, in order, on the tracker's clock.
  EXPECT_LE(s.kernels[0].launch_ns, s.kernels[1].launch_ns);
  EXPECT_LE(s.kernels[1].launch_ns, kErrorNs);
  EXPECT_GT(s.kernels[0].launch_ns, kErrorNs - 1000000000);
  EXPECT_EQ(s.kernels[0].stack_id, 4u);
  EXPECT_EQ(s.kernels[1].name, "Scatter");
  EXPECT_EQ(s.kernels[1].stack_id, 5u);
  ASSERT_EQ(snap.calls.size(), 2u);
  EXPECT_EQ(snap.calls[1].api, "cudaFree");
}

TEST(CudaErrors, TheRingKeepsTheNewestLaunchesAndCountsTheOthers) {
  KernelTable kernels;
  CudaErrors errors;
  const uint32_t k = kernels.OnLaunch("K");
  constexpr int kLaunches = CudaErrors::kRing + 4;
  for (int i = 0; i < kLaunches; ++i) errors.OnLaunch(3, k, 0, Ticks());
  errors.OnError(Error("cudaDeviceSynchronize", 719, 3, kErrorNs));
  const CudaErrorsSnapshot snap = errors.Snapshot(kernels);
  ASSERT_EQ(snap.sticky.size(), 1u);
  EXPECT_EQ(snap.sticky[0].kernels_not_kept, 4u);
  ASSERT_EQ(snap.sticky[0].kernels.size(), static_cast<size_t>(CudaErrors::kRing));
  EXPECT_LE(snap.sticky[0].kernels.front().launch_ns, snap.sticky[0].kernels.back().launch_ns);
  EXPECT_LE(snap.sticky[0].kernels.back().launch_ns, kErrorNs);
}

TEST(CudaErrors, TheEventApiRecordsIntoTheCurrentRecording) {
  Config config;
  config.depth = 0;
  const Session session(config);
  Events events = session.events();
  const uint32_t id = events.Launched(0, "Scatter");
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(events.KernelSiteNeeded(id));
  events.KernelSiteSeen(id, 8);
  EXPECT_FALSE(events.KernelSiteNeeded(id));
  events.KernelQueued(1, id, 0, Ticks());
  EXPECT_FALSE(events.RunFailed());
  EXPECT_TRUE(events.CallFailed(Error("cudaMemcpy", 700, 1, events.NowNs())));  // kept new
  EXPECT_TRUE(events.RunFailed());
  const CudaErrorsSnapshot snap = session.recording().errors.Snapshot(session.recording().kernels);
  ASSERT_EQ(snap.sticky.size(), 1u);
  ASSERT_EQ(snap.sticky[0].kernels.size(), 1u);
  EXPECT_EQ(snap.sticky[0].kernels[0].name, "Scatter");
  EXPECT_EQ(snap.sticky[0].kernels[0].stack_id, 8u);
}

// A site `frame` of the model's frame table names, failed with 700.
template <typename Site>
Site& IllegalAddress(Site* site, uint32_t frame) {
  site->site = frame + 8;
  site->location = frame == 0 ? "f.cu:59" : "f.cu:55";
  site->stack = {frame};
  if constexpr (requires { site->code; }) {
    site->api = "cudaMemcpy";
    site->domain = "runtime";
    site->code = 700;
    site->name = "cudaErrorIllegalAddress";
  }
  return *site;
}

ReportModel ErrorsModel() {
  ReportModel m;
  m.frame_table = {{"main", "/src/f.cu", 59, "/bin/f", false},
                   {"main", "/src/f.cu", 55, "/bin/f", false}};
  ReportCudaErrors& e = m.cuda_errors.emplace();
  ErrorCallSite& c = IllegalAddress(&e.calls.emplace_back(), 0);
  c.count = 3;
  c.first_ns = 100;
  c.last_ns = 300;
  e.omitted_calls = 2;
  StickyErrorSite& s = IllegalAddress(&e.sticky.emplace_back(), 0);
  s.device = 1;
  std::tie(s.context, s.time_ns, s.omitted_kernels) = std::make_tuple(4, 100, 1);
  KernelBeforeErrorSite& k = IllegalAddress(&s.kernels.emplace_back(), 1);
  k.kernel = "Scatter(float*)";
  k.mangled = "_Z7ScatterPf";
  std::tie(k.stream, k.launch_ns, k.before_ns) = std::make_tuple(0x77, 90, 10);
  return m;
}

TEST(ModelErrors, WhatIsWrittenReadsBackTheSame) {
  const ReportModel m = ErrorsModel();
  json doc = json::object();
  m.ToJson(&doc);
  EXPECT_EQ(doc["cuda_errors"]["run_failed"], true);
  EXPECT_EQ(doc["leaks"]["live_when_failed"], true);
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &r, &error)) << error;
  ASSERT_TRUE(r.cuda_errors.has_value());
  const ReportCudaErrors& e = *r.cuda_errors;
  EXPECT_TRUE(e.run_failed());
  ASSERT_EQ(e.calls.size(), 1u);
  EXPECT_EQ(e.calls[0].api, "cudaMemcpy");
  EXPECT_EQ(e.calls[0].code, 700);
  EXPECT_EQ(e.calls[0].count, 3u);
  EXPECT_EQ(e.calls[0].last_ns, 300u);
  EXPECT_EQ(e.calls[0].stack, std::vector<uint32_t>{0});
  EXPECT_EQ(e.omitted_calls, 2u);
  ASSERT_EQ(e.sticky.size(), 1u);
  EXPECT_EQ(e.sticky[0].device, 1);
  EXPECT_EQ(e.sticky[0].context, 4u);
  EXPECT_EQ(e.sticky[0].omitted_kernels, 1u);
  ASSERT_EQ(e.sticky[0].kernels.size(), 1u);
  EXPECT_EQ(e.sticky[0].kernels[0].kernel, "Scatter(float*)");
  EXPECT_EQ(e.sticky[0].kernels[0].mangled, "_Z7ScatterPf");
  EXPECT_EQ(e.sticky[0].kernels[0].stream, 0x77u);
  EXPECT_EQ(e.sticky[0].kernels[0].before_ns, 10u);
  EXPECT_EQ(e.sticky[0].kernels[0].location, "f.cu:55");
  json again = json::object();
  r.ToJson(&again);
  EXPECT_EQ(again, doc);
}

TEST(ModelErrors, AMistypedFieldIsNamed) {
  json doc = json::object();
  ErrorsModel().ToJson(&doc);
  doc["cuda_errors"]["sticky"][0]["kernels"][0]["stream"] = "x";
  ReportModel r;
  std::string error;
  EXPECT_FALSE(ReadReportModel(doc, &r, &error));
  EXPECT_NE(error.find("cuda_errors.sticky[0].kernels[0].stream"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpuwatch
