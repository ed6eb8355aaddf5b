// The Session: one process's tables behind one pointer, a fork child's fresh
// recording, and the report built through the path the library uses.
#include "libgpuwatch/session/session.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {
namespace {

Config SmallConfig(int depth, long trace_events) {
  Config config;
  config.depth = depth;
  config.trace_events = trace_events;
  return config;
}

void Alloc(Tracker& tracker, uint64_t address, uint64_t size, MemKind kind = MemKind::kDevice) {
  AllocEvent e;
  e.address = address;
  e.size = size;
  e.kind = kind;
  tracker.OnAlloc(e);
}

// An out-of-memory report's request, with the live memory its callback captured.
ReportRequest OomRequest(const TrackerSnapshot* captured) {
  ReportRequest request;
  request.context.trigger = "oom";
  request.captured = captured;
  return request;
}

TEST(Session, OwnsAStackTableOnlyWhenStacksAreKept) {
  const Session with(SmallConfig(8, 0));
  const Session without(SmallConfig(0, 0));
  EXPECT_NE(with.stacks(), nullptr);
  EXPECT_EQ(without.stacks(), nullptr);
  EXPECT_EQ(with.recording().trace, nullptr);
}

TEST(Session, AForkChildRecordsOnFreshTablesPausedAsTheParentWas) {
  Session session(SmallConfig(8, 64));
  Recording& parent = session.recording();
  session.SetGpuClock(1000000);
  ASSERT_TRUE(parent.trace_gpu);
  Alloc(parent.tracker, 0x1000, 512);
  parent.kernels.OnLaunch("parent_kernel");
  parent.tracker.SetPaused(true);
  StackTable* stacks = session.stacks();

  session.StartChildRecording();
  Recording& child = session.recording();
  ASSERT_NE(&child, &parent);
  EXPECT_TRUE(child.tracker.paused());
  EXPECT_TRUE(child.tracker.Snapshot().live.empty());
  EXPECT_TRUE(child.kernels.Snapshot().empty());
  EXPECT_EQ(session.stacks(), stacks) << "the stack table is append-only and shared";
  ASSERT_NE(child.trace, nullptr);
  EXPECT_EQ(child.trace->capacity(), parent.trace->capacity());
  EXPECT_TRUE(child.trace_gpu);
  // The same GPU instant maps to each tracker's own clock: the offsets differ
  // by the time between the two trackers' starts (read twice here, a few
  // microseconds apart at most).
  const int64_t gap =
      static_cast<int64_t>(parent.tracker.NowNs()) - static_cast<int64_t>(child.tracker.NowNs());
  const int64_t shift = parent.trace->gpu_clock_offset() - child.trace->gpu_clock_offset();
  EXPECT_GT(gap, 0);
  EXPECT_LT(std::llabs(shift - gap), 1000000) << "shift " << shift << " gap " << gap;
  // The parent's tables are left as they were.
  EXPECT_EQ(parent.tracker.Snapshot().live.size(), 1u);
  EXPECT_EQ(parent.kernels.Snapshot().size(), 1u);
}

TEST(SessionReport, ReportsWhatTheSessionRecordedWithExactBytes) {
  Session session(SmallConfig(0, 64));
  Recording& r = session.recording();
  Alloc(r.tracker, 0x1000, 1 << 20);
  Alloc(r.tracker, 0x2000, 4096);
  Alloc(r.tracker, 0x3000, 64, MemKind::kPinnedHost);
  ASSERT_TRUE(r.tracker.OnFree(0x2000));
  r.kernels.OnLaunch("step_kernel");
  r.kernels.OnLaunch("step_kernel");
  r.lifecycle.FirstCall(5);

  ReportRequest request;
  request.context.trigger = "exit";
  request.context.pid = 42;
  SessionReport report(session, std::move(request));
  // The tables are copied at construction: what comes after is not in it.
  Alloc(r.tracker, 0x4000, 777);
  report.Build();
  const nlohmann::json j = nlohmann::json::parse(report.json());
  EXPECT_EQ(j["trigger"], "exit");
  EXPECT_EQ(j["process"]["pid"], 42);
  EXPECT_EQ(j["leaks"]["device"]["bytes"], 1 << 20);
  EXPECT_EQ(j["leaks"]["device"]["count"], 1);
  EXPECT_EQ(j["leaks"]["host"]["bytes"], 64);
  EXPECT_EQ(j["kernels"]["launches"], 2);
  EXPECT_EQ(j["lifecycle"]["first_call_ns"], 5);
  EXPECT_TRUE(j.contains("trace")) << "the session's trace goes into its report";
  EXPECT_EQ(j["unwinder"], "none");
  EXPECT_EQ(report.leaked_device_bytes(), uint64_t{1} << 20);
  const std::string summary = report.Summary("/tmp/r.json");
  EXPECT_NE(summary.find("gpuwatch: "), std::string::npos) << summary;
  EXPECT_NE(summary.find("/tmp/r.json"), std::string::npos) << summary;
}

TEST(SessionReport, ACapturedSnapshotStandsForTheTrackersNow) {
  Session session(SmallConfig(0, 0));
  Recording& r = session.recording();
  Alloc(r.tracker, 0x1000, 300);
  const TrackerSnapshot captured = r.tracker.Snapshot();  // as an OOM callback captures it
  ASSERT_TRUE(r.tracker.OnFree(0x1000));

  SessionReport report(session, OomRequest(&captured));
  report.Build();
  const nlohmann::json j = nlohmann::json::parse(report.json());
  EXPECT_EQ(j["leaks"]["device"]["bytes"], 300);
  EXPECT_FALSE(j.contains("trace"));
}

// An out-of-memory or context-destroy report from a capture by site
// (Tracker::LiveBySite, issue 31): what was live at that moment, by site,
// with exact bytes, counts and bytes by kind; what only the live table knows
// (each site's oldest allocation and phase, regions' holders) is left out,
// and the report still reads back.
TEST(SessionReport, ACaptureBySiteListsWhatWasLiveBySiteAndLeavesOutWhatItCannotKnow) {
  Session session(SmallConfig(0, 0));
  Recording& r = session.recording();
  Alloc(r.tracker, 0x1000, 300);
  Alloc(r.tracker, 0x2000, 20, MemKind::kPool);
  Alloc(r.tracker, 0x3000, 64, MemKind::kPinnedHost);
  const TrackerSnapshot captured = r.tracker.LiveBySite();  // as the OOM callback captures it
  ASSERT_TRUE(r.tracker.OnFree(0x1000));
  Alloc(r.tracker, 0x4000, 5000);

  SessionReport report(session, OomRequest(&captured));
  report.Build();
  const nlohmann::json j = nlohmann::json::parse(report.json());
  const nlohmann::json& device = j["leaks"]["device"];
  EXPECT_EQ(device["bytes"], 320);
  EXPECT_EQ(device["count"], 2);
  ASSERT_EQ(device["sites"].size(), 1u);  // no stacks: site 0 holds both
  EXPECT_EQ(device["sites"][0]["count"], 2);
  EXPECT_EQ(device["sites"][0]["kinds"], nlohmann::json({{"device", 300}, {"pool", 20}}));
  EXPECT_FALSE(device["sites"][0].contains("oldest_ns")) << device["sites"][0];
  EXPECT_FALSE(device["sites"][0].contains("phase"));
  EXPECT_EQ(j["leaks"]["host"]["bytes"], 64);
  EXPECT_EQ(j["leaks"]["host"]["count"], 1);
  EXPECT_EQ(j["totals"]["device_live_count"], 2);
  EXPECT_EQ(j["totals"]["host_live_count"], 1);
  EXPECT_EQ(j["sites"][0]["live_device_count"], 2);
  EXPECT_EQ(j["sites"][0]["live_device_bytes"], 320);
  EXPECT_FALSE(j.contains("regions"));
  EXPECT_EQ(report.leaked_device_bytes(), 320u);
  ReportModel model;
  std::string error;
  ASSERT_TRUE(ReadReportModel(j, &model, &error)) << error;
  ASSERT_EQ(model.leaks_device.sites.size(), 1u);
  EXPECT_EQ(model.leaks_device.sites[0].oldest_ns, kUnknownOldest);
  EXPECT_EQ(model.leaks_device.sites[0].count, 2u);
  nlohmann::json written = nlohmann::json::object();  // written again (merge): still left out
  model.ToJson(&written);
  EXPECT_FALSE(written["leaks"]["device"]["sites"][0].contains("oldest_ns"));
}

// gpuwatch_live_since()'s document: what was allocated after a point and is
// still live, device and host apart, as leaks sections, with the window peak.
TEST(LiveSinceJson, ListsWhatWasAllocatedAfterThePointAndIsStillLive) {
  Session session(SmallConfig(0, 0));
  Recording& r = session.recording();
  Alloc(r.tracker, 0x1000, 300);  // before the point
  const Tracker::Point point = r.tracker.NewPoint();
  Alloc(r.tracker, 0x2000, 40);
  Alloc(r.tracker, 0x3000, 2, MemKind::kPool);
  Alloc(r.tracker, 0x4000, 64, MemKind::kPinnedHost);
  Alloc(r.tracker, 0x5000, 1000);
  ASSERT_TRUE(r.tracker.OnFree(0x5000));
  const nlohmann::json j =
      nlohmann::json::parse(LiveSinceJson(session, point, nullptr, /*pytorch_per_tensor=*/false));
  EXPECT_EQ(j["device"]["bytes"], 42);
  EXPECT_EQ(j["device"]["count"], 2);
  EXPECT_EQ(j["device"]["leaked_bytes"], 42);
  ASSERT_EQ(j["device"]["sites"].size(), 1u);  // no stacks: site 0 holds both
  EXPECT_EQ(j["device"]["sites"][0]["location"], "<no stack>");
  EXPECT_EQ(j["device"]["sites"][0]["bytes"], 42);
  EXPECT_EQ(j["device"]["sites"][0]["kinds"], nlohmann::json({{"device", 40}, {"pool", 2}}));
  EXPECT_EQ(j["host"]["bytes"], 64);
  EXPECT_EQ(j["host"]["sites"][0]["kinds"], nlohmann::json({{"pinned_host", 64}}));
  EXPECT_EQ(j["host"]["count"], 1);
  EXPECT_EQ(j["window_peak_bytes"], 1342);  // 300 + 40 + 2 + 1000
  // From the start: everything live.
  const nlohmann::json all =
      nlohmann::json::parse(LiveSinceJson(session, Tracker::kStart, nullptr, false));
  EXPECT_EQ(all["device"]["bytes"], 342);
}

}  // namespace
}  // namespace gpuwatch
