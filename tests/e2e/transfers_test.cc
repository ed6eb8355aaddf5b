// End-to-end tests of the transfers, kernels and lifecycle sections, on the
// simulator with modelled bandwidths chosen so that durations are exact:
// no per-copy latency, pageable 16 GB/s and pinned 32 GB/s (1 MiB = 2^20 B
// takes 65,536 ns pageable and 32,768 ns pinned).
#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string At(const std::string& name) { return ProgramLine("transfers.cu", "// AT:" + name); }

json RunTransfers(const std::map<std::string, std::string>& extra, std::string* err = nullptr) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::map<std::string, std::string> env = PreloadEnv(
      out,
      {{"GWSIM_COPY_LATENCY_NS", "0"}, {"GWSIM_BW_PAGEABLE", "16"}, {"GWSIM_BW_PINNED", "32"}});
  for (const auto& [k, v] : extra) env[k] = v;
  const ProcessResult r = RunProcess({kPrograms + "/transfers"}, env, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "transfers: done\n");
  if (err != nullptr) *err = r.err;
  return ReadJson(out);
}

const json* Total(const json& report, const std::string& direction, const std::string& host) {
  for (const json& t : report["transfers"]["totals"]) {
    if (t["direction"] == direction && t["host"] == host) return &t;
  }
  return nullptr;
}

const json* Finding(const json& report, const std::string& type, const std::string& location) {
  for (const json& f : report["transfers"]["findings"]) {
    if (f["type"] == type && f["location"] == location) return &f;
  }
  return nullptr;
}

TEST(Transfers, BytesCountsAndBandwidthPerDirectionAndHostKind) {
  const json report = RunTransfers({});
  ASSERT_TRUE(report.is_object());
  // Pageable H2D: 4 runtime copies and 2 driver copies of 1 MiB. The runtime
  // ones nest a driver copy and are counted once.
  const json* pageable = Total(report, "h2d", "pageable");
  ASSERT_NE(pageable, nullptr) << report["transfers"].dump(1);
  EXPECT_EQ((*pageable)["count"], 6);
  EXPECT_EQ((*pageable)["bytes"], 6 * kMiB);
  EXPECT_EQ((*pageable)["duration_ns"], 6 * 65536);
  EXPECT_DOUBLE_EQ((*pageable)["gbps"].get<double>(), 16.0);
  // Pinned H2D: 4 x 1 MiB and 200 x 4 KiB, told apart from pageable.
  const json* pinned = Total(report, "h2d", "pinned");
  ASSERT_NE(pinned, nullptr);
  EXPECT_EQ((*pinned)["count"], 204);
  EXPECT_EQ((*pinned)["bytes"], 4 * kMiB + 200 * 4 * kKiB);
  EXPECT_DOUBLE_EQ((*pinned)["gbps"].get<double>(), 32.0);
  const json* d2h = Total(report, "d2h", "pageable");
  ASSERT_NE(d2h, nullptr);
  EXPECT_EQ((*d2h)["count"], 20);
  EXPECT_EQ((*d2h)["bytes"], 20 * 256 * kKiB);
  EXPECT_DOUBLE_EQ((*d2h)["gbps"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(report["transfers"]["best_gbps"]["h2d"].get<double>(), 32.0);
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["count"], 210);
  EXPECT_EQ(report["transfers"]["unmatched_records"], 0);
}

TEST(Transfers, SitesCarryTheirOwnCountsAndHistogram) {
  const json report = RunTransfers({});
  ASSERT_TRUE(report.is_object());
  const json* small = nullptr;
  for (const json& s : report["transfers"]["sites"]) {
    if (s["location"] == At("small")) small = &s;
  }
  ASSERT_NE(small, nullptr);
  EXPECT_EQ((*small)["count"], 200);
  EXPECT_EQ((*small)["async"], 200);
  EXPECT_EQ((*small)["hosts"]["pinned"]["count"], 200);
  ASSERT_EQ((*small)["histogram"].size(), 1u);
  EXPECT_EQ((*small)["histogram"][0]["min_bytes"], 4096);
  EXPECT_EQ((*small)["histogram"][0]["count"], 200);
}

TEST(Transfers, FindingsNameTheSiteAndTheNumbers) {
  std::string err;
  const json report = RunTransfers({}, &err);
  ASSERT_TRUE(report.is_object());
  const json* small = Finding(report, "small_copies", At("small"));
  ASSERT_NE(small, nullptr) << report["transfers"]["findings"].dump(1);
  EXPECT_EQ((*small)["count"], 200);
  EXPECT_EQ((*small)["bytes"], 200 * 4 * kKiB);
  const json* sync = Finding(report, "sync_d2h_loop", At("sync_d2h"));
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ((*sync)["count"], 20);
  const json* pageable = Finding(report, "pageable", At("pageable"));
  ASSERT_NE(pageable, nullptr);
  EXPECT_EQ((*pageable)["count"], 4);
  EXPECT_EQ((*pageable)["bytes"], 4 * kMiB);
  EXPECT_NE(Finding(report, "pageable", At("driver")), nullptr);
  // Pinned 1 MiB copies reach the best bandwidth: no slow-copy finding there.
  EXPECT_EQ(Finding(report, "slow_copies", At("pinned")), nullptr);
  // Pageable copies reach half the pinned bandwidth: not "far below".
  EXPECT_EQ(Finding(report, "slow_copies", At("pageable")), nullptr);
  // The stderr summary carries the top findings with file:line.
  EXPECT_NE(err.find("gpuwatch: finding: "), std::string::npos) << err;
  EXPECT_NE(err.find(At("small")), std::string::npos) << err;
}

TEST(Transfers, SlowCopiesAreFlaggedAgainstTheBestOfTheirDirection) {
  // Pageable at 4 GB/s is an eighth of pinned at 32 GB/s.
  const json report = RunTransfers({{"GWSIM_BW_PAGEABLE", "4"}});
  ASSERT_TRUE(report.is_object());
  const json* slow = Finding(report, "slow_copies", At("pageable"));
  ASSERT_NE(slow, nullptr) << report["transfers"]["findings"].dump(1);
  EXPECT_DOUBLE_EQ((*slow)["gbps"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ((*slow)["best_gbps"].get<double>(), 32.0);
}

TEST(Kernels, NamesDemangledAndCountsExact) {
  const json report = RunTransfers({});
  ASSERT_TRUE(report.is_object());
  const json& kernels = report["kernels"];
  EXPECT_EQ(kernels["launches"], 10);
  ASSERT_EQ(kernels["kernels"].size(), 2u) << kernels.dump(1);
  EXPECT_EQ(kernels["kernels"][0]["name"], "void (anonymous namespace)::Fill<4>(float*)");
  EXPECT_EQ(kernels["kernels"][0]["launches"], 7);
  EXPECT_EQ(kernels["kernels"][1]["name"], "(anonymous namespace)::Other(float*)");
  EXPECT_EQ(kernels["kernels"][1]["launches"], 3);
  EXPECT_FALSE(kernels["kernels"][0].contains("gpu_ns"));  // timing is off by default
}

TEST(Kernels, GpuTimeWhenKernelTimingIsOn) {
  const json report = RunTransfers({{"GPUWATCH_KERNEL_TIMING", "1"}, {"GWSIM_KERNEL_NS", "7000"}});
  ASSERT_TRUE(report.is_object());
  const json& fill = report["kernels"]["kernels"][0];
  EXPECT_EQ(fill["launches"], 7);
  EXPECT_EQ(fill["timed"], 7);
  EXPECT_EQ(fill["gpu_ns"], 7 * 7000);
}

TEST(Lifecycle, InitLatencyAndBlockedTimeAreRecorded) {
  const json report = RunTransfers({});
  ASSERT_TRUE(report.is_object());
  const json& l = report["lifecycle"];
  EXPECT_TRUE(l["first_call_observed"].get<bool>());
  EXPECT_GT(l["context_ready_ns"].get<uint64_t>(), 0u);
  EXPECT_GE(l["context_ready_ns"].get<uint64_t>(), l["first_call_ns"].get<uint64_t>());
  EXPECT_FALSE(l["init_latency_ns"].is_null());
  // Synchronous copies: 4 pageable H2D, 20 D2H, 2 driver H2D.
  EXPECT_EQ(l["blocked"]["copy"]["count"], 26);
  EXPECT_EQ(l["blocked"]["stream"]["count"], 1);
  EXPECT_EQ(l["blocked"]["device"]["count"], 1);
  EXPECT_GT(l["blocked"]["total_ns"].get<uint64_t>(), 0u);
  // The report is written at exit. NVIDIA's runtime destroys no context at
  // exit that gpuwatch hears of (nor does the simulator's, by default), so
  // there is no teardown to time.
  EXPECT_EQ(l["exit_status"], 0);
  EXPECT_TRUE(l["teardown_ns"].is_null()) << l.dump(1);
}

// A runtime that destroys its contexts from its exit handler (the simulator's
// under GWSIM_EXIT_CONTEXT_DESTROY=1): the report written at exit is
// completed after that teardown with its duration.
TEST(Lifecycle, TeardownIsTimedWhenTheRuntimeDestroysItsContextsAtExit) {
  const json report = RunTransfers({{"GWSIM_EXIT_CONTEXT_DESTROY", "1"}});
  ASSERT_TRUE(report.is_object());
  const json& l = report["lifecycle"];
  EXPECT_EQ(l["exit_status"], 0);
  ASSERT_FALSE(l["teardown_ns"].is_null()) << l.dump(1);
  EXPECT_GT(l["teardown_ns"].get<uint64_t>(), 0u);
  EXPECT_EQ(l["blocked"]["device"]["count"], 1);
}

}  // namespace
}  // namespace gpuwatch::testing
