// End-to-end tests of what the reports say: leak sites with file and line
// and exact bytes, the OOM report, snapshots by signal, and exact totals under
// threads. Programs run on the CUDA simulator with libgpuwatch.so preloaded.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

TEST(Report, LeakSitesAreNamedByFileAndLineWithExactBytes) {
  ScopedTempDir dir;
  json report;
  ProcessResult r;
  ASSERT_NO_FATAL_FAILURE(RunPreloaded(dir, {kPrograms + "/leak_sites"}, &report, &r));
  const std::string source = kSourceDir + "/tests/e2e/programs/leak_sites.cu";
  auto at = [&](const std::string& name) {
    const int line = LineOf(source, "// LEAK:" + name);
    EXPECT_GT(line, 0) << name;
    return "leak_sites.cu:" + std::to_string(line);
  };
  const json& device = report["leaks"]["device"];
  struct Expected {
    std::string name;
    uint64_t bytes;
    uint64_t count;
    std::string kind;
  };
  const Expected expected[] = {
      {"device", 6 * kMiB, 2, "device"},   {"pool", 1 * kMiB, 1, "pool"},
      {"managed", 2 * kMiB, 1, "managed"}, {"driver", 768 * kKiB, 1, "device"},
      {"vmm", 4 * kMiB, 1, "vmm"},
  };
  uint64_t total = 0;
  for (const Expected& e : expected) {
    const json site = SiteAt(device, at(e.name));
    ASSERT_FALSE(site.is_null()) << "no leak reported at " << at(e.name) << "\n" << device.dump(1);
    EXPECT_EQ(site["bytes"], e.bytes) << e.name;
    EXPECT_EQ(site["count"], e.count) << e.name;
    EXPECT_EQ(site["kinds"][e.kind], e.bytes) << e.name;
    EXPECT_EQ(site["frames"][0]["line"], LineOf(source, "// LEAK:" + e.name)) << e.name;
    total += e.bytes;
  }
  // Nothing else leaked: the balanced site is absent and the totals add up.
  EXPECT_EQ(device["bytes"], total);
  EXPECT_EQ(device["sites"].size(), std::size(expected));
  const std::string balanced = "leak_sites.cu:" + std::to_string(LineOf(source, "balanced: freed"));
  EXPECT_TRUE(SiteAt(device, balanced).is_null());
  // Pinned host memory is reported apart.
  const json& host = report["leaks"]["host"];
  ASSERT_EQ(host["sites"].size(), 1u) << host.dump(1);
  EXPECT_EQ(host["sites"][0]["location"], at("pinned"));
  EXPECT_EQ(host["bytes"], 96 * kKiB);
  // The stderr summary names the largest site with its file and line.
  EXPECT_NE(r.err.find("at " + at("device")), std::string::npos) << r.err;
}

// GPUWATCH_DEPTH counts the user's frames: gpuwatch's, CUPTI's, the driver's
// and the runtime's frames above the call are not captured in their place.
// With depth 2 the leak's stack is exactly the line in LeakDevice and the
// line in main that called it.
TEST(Report, DepthCountsTheUsersFramesOnly) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = PreloadEnv(out);
  env["GPUWATCH_DEPTH"] = "2";
  const ProcessResult r = RunProcess({kPrograms + "/leak_sites"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const std::string source = kSourceDir + "/tests/e2e/programs/leak_sites.cu";
  const int line = LineOf(source, "// LEAK:device");
  const json site = SiteAt(report["leaks"]["device"], "leak_sites.cu:" + std::to_string(line));
  ASSERT_FALSE(site.is_null()) << report["leaks"].dump(1);
  const json& frames = site["frames"];
  ASSERT_EQ(frames.size(), 2u) << frames.dump(1);
  EXPECT_NE(frames[0]["function"].get<std::string>().find("LeakDevice"), std::string::npos)
      << frames.dump(1);
  EXPECT_EQ(frames[0]["line"], line);
  EXPECT_EQ(frames[1]["function"], "main") << frames.dump(1);
  EXPECT_EQ(frames[1]["line"], LineOf(source, "for (int i = 0; i < 2; ++i) LeakDevice();"));
  EXPECT_EQ(site["count"], 2);  // the first capture too, before any tool frame was counted
  for (const json& s : report["leaks"]["device"]["sites"]) {
    EXPECT_EQ(s["location"].get<std::string>().rfind("leak_sites.cu:", 0), 0u) << s.dump(1);
  }
}

// gpuwatch's own unwinder (the default) and libunwind give the same stacks:
// every leak site with every frame, in a program whose stacks run through
// the simulator's CUDA libraries, a static function and main.
TEST(Report, TheCfiUnwinderAndLibunwindGiveTheSameStacks) {
  ScopedTempDir dir;
  json reports[2];
  const char* const unwinders[] = {"cfi", "libunwind"};
  for (int i = 0; i < 2; ++i) {
    const std::string out = dir.path() + "/report." + unwinders[i] + ".json";
    auto env = PreloadEnv(out);
    env["GPUWATCH_UNWIND"] = unwinders[i];
    const ProcessResult r = RunProcess({kPrograms + "/leak_sites"}, env, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("GPUWATCH_UNWIND"), std::string::npos) << r.err;  // no warning
    reports[i] = ReadJson(out);
    ASSERT_TRUE(reports[i].is_object()) << r.err;
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer builds fall back to libgcc's unwinder (unwind.cc).
    EXPECT_EQ(reports[i]["unwinder"], i == 0 ? "cfi" : "gcc_unwind");
#else
    EXPECT_EQ(reports[i]["unwinder"], unwinders[i]);
#endif
    EXPECT_EQ(reports[i]["unwind_fallbacks"], 0);
  }
  const json& cfi = reports[0]["leaks"]["device"]["sites"];
  const json& libunwind = reports[1]["leaks"]["device"]["sites"];
  ASSERT_EQ(cfi.size(), 5u) << cfi.dump(1);
  ASSERT_EQ(cfi.size(), libunwind.size());
  for (size_t i = 0; i < cfi.size(); ++i) {
    EXPECT_EQ(cfi[i]["location"], libunwind[i]["location"]);
    EXPECT_EQ(cfi[i]["frames"], libunwind[i]["frames"]) << cfi[i]["location"];
    EXPECT_GE(cfi[i]["frames"].size(), 3u) << cfi[i]["location"];  // down to main and libc
  }
  EXPECT_EQ(reports[0]["tool_frames"], reports[1]["tool_frames"]);
}

// examples/oom under gpuwatch, attached by LD_PRELOAD or, when `injection`,
// by CUDA_INJECTION64_PATH alone (attached inside the first CUDA call, whose
// own callback gpuwatch does not see: the device's total must come all the
// same, as it did not until the first GPU run showed it).
void CheckOutOfMemoryReport(bool injection) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = PreloadEnv(out);
  if (injection) {
    env["LD_PRELOAD"] = "";
    env["CUDA_INJECTION64_PATH"] = kLib;
  }
  env["GWSIM_DEVICE_MEMORY"] = std::to_string(1024 * kMiB);
  const ProcessResult r = RunProcess({kExamples + "/oom"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "oom: cudaMalloc failed after 4 chunks of 256 MiB (out of memory)\n");
  const json report = ReadJson(out + ".oom-1");
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "oom");
  const std::string source = kSourceDir + "/examples/oom.cu";
  const std::string site =
      "oom.cu:" + std::to_string(LineOf(source, "fails when the device is full"));
  EXPECT_EQ(report["oom"]["size"], 256 * kMiB);
  EXPECT_EQ(report["oom"]["kind"], "device");
  EXPECT_EQ(report["oom"]["location"], site);
  EXPECT_EQ(report["oom"]["device_total_bytes"], 1024 * kMiB);
  // Everything live at the failure, by site: the four chunks that fit.
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 1024 * kMiB);
  ASSERT_EQ(report["leaks"]["device"]["sites"].size(), 1u);
  const json& live = report["leaks"]["device"]["sites"][0];
  EXPECT_EQ(live["location"], site);
  EXPECT_EQ(live["count"], 4);
  EXPECT_EQ(live["kinds"], json({{"device", 1024 * kMiB}}));
  EXPECT_EQ(report["totals"]["device_live_count"], 4);
  // Captured in the failing call by site, from the per-site counters, not by
  // copying the live table (issue 31): the sites' oldest allocation is what
  // only the table knows, and is left out.
  EXPECT_FALSE(live.contains("oldest_ns")) << live.dump();
  const auto lines = LinesStartingWith(r.err, "gpuwatch: out of memory:");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(site), std::string::npos) << lines[0];
  // Only one OOM report: the program stopped at the first failure.
  EXPECT_TRUE(ReadFile(out + ".oom-2").empty());
  EXPECT_EQ(report["gpuwatch"]["attach"], injection ? "injection" : "preload");
}

TEST(Report, OutOfMemoryWritesAReportAtOnceAndTheErrorStillReachesTheCaller) {
  CheckOutOfMemoryReport(false);
}

TEST(Report, OutOfMemoryReportOfAnInjectedGpuwatchHasTheDeviceTotal) {
  CheckOutOfMemoryReport(true);
}

TEST(Report, SnapshotBySignalWhileRunning) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess({kPrograms + "/snapshot_signal"}, PreloadEnv(out), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json snap = ReadJson(out + ".snapshot-1");
  ASSERT_TRUE(snap.is_object());
  EXPECT_EQ(snap["trigger"], "snapshot");
  EXPECT_EQ(snap["label"], "signal");
  EXPECT_EQ(snap["totals"]["device_current_bytes"], 6 * kMiB);
  // The exit report, written later, sees the buffer freed.
  const json exit_report = ReadJson(out);
  ASSERT_TRUE(exit_report.is_object());
  EXPECT_EQ(exit_report["totals"]["device_current_bytes"], 0);
}

TEST(Report, FourThreadsTenThousandAllocationsEachGiveExactTotals) {
  ScopedTempDir dir;
  json report;
  ASSERT_NO_FATAL_FAILURE(RunPreloaded(dir, {kPrograms + "/threads"}, &report));
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 40000);
  EXPECT_EQ(device["frees"], 39996);
  EXPECT_EQ(device["current_count"], 4);
  EXPECT_EQ(device["current_bytes"], 4 * 4096 + 0 + 1 + 2 + 3);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
}

}  // namespace
}  // namespace gpuwatch::testing
