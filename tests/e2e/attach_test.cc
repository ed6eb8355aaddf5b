// End-to-end tests of attaching libgpuwatch.so to programs that run on the
// CUDA simulator (tests/sim): callbacks arrive through both entry points, and
// every failure path leaves the host's output and exit status alone.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

TEST(Attach, PreloadSeesAllocationsCopiesAndLaunches) {
  ScopedTempDir dir;
  json report;
  ProcessResult r;
  ASSERT_NO_FATAL_FAILURE(RunPreloaded(dir, {kExamples + "/leaky_loop"}, &report, &r));
  EXPECT_EQ(r.out, "leaky_loop: 8 steps done, 8 history buffers kept\n");
  EXPECT_EQ(report["gpuwatch"]["attach"], "preload");
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 16);
  EXPECT_EQ(device["frees"], 8);
  EXPECT_EQ(device["current_count"], 8);
  EXPECT_EQ(device["current_bytes"], 8 * 256 * kKiB);
  EXPECT_EQ(report["totals"]["device_peak_bytes"], 7 * 256 * kKiB + 4 * kMiB);
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["count"], 8);
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["bytes"], 8 * 4 * kMiB);
  EXPECT_EQ(report["totals"]["copies"]["d2h"]["count"], 8);
  EXPECT_EQ(report["totals"]["kernel_launches"], 8);
  // The stderr summary says where the report went.
  const std::string out = dir.path() + "/report.json";  // where RunPreloaded has it
  EXPECT_NE(r.err.find("gpuwatch: report written to " + out), std::string::npos) << r.err;
}

TEST(Attach, InjectionAloneAttaches) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = SimEnv();
  env["CUDA_INJECTION64_PATH"] = kLib;
  env["GPUWATCH_OUTPUT"] = out;
  const ProcessResult r = RunProcess({kExamples + "/leaky_loop"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["gpuwatch"]["attach"], "injection");
  EXPECT_EQ(report["totals"]["kinds"]["device"]["allocs"], 16);
  EXPECT_EQ(report["totals"]["kernel_launches"], 8);
}

// The exit report of a program whose only CUDA call, its first, leaks: that
// allocation counted once, at its line, attached either way. Under injection
// gpuwatch attaches inside that call, which the driver does before the call's
// ENTER callback, so the call is seen whole. NVIDIA's runtime destroys no
// context at exit that gpuwatch hears of: the exit report alone says what
// leaked and lifecycle.teardown_ns stays null. Where the runtime does destroy
// its contexts from its exit handler (the simulator's under
// GWSIM_EXIT_CONTEXT_DESTROY=1) the report is the same but for the
// teardown's time; no context report is written either way.
void ExpectFirstCallLeakAtExit(bool injection, bool destroy_at_exit) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::map<std::string, std::string> env;
  if (injection) {
    env = SimEnv();
    env["CUDA_INJECTION64_PATH"] = kLib;
    env["GPUWATCH_OUTPUT"] = out;
  } else {
    env = PreloadEnv(out);
  }
  if (destroy_at_exit) env["GWSIM_EXIT_CONTEXT_DESTROY"] = "1";
  const ProcessResult r = RunProcess({kPrograms + "/exit_with", "0"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "exit_with: cudaMalloc -> cudaSuccess\n");
  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["gpuwatch"]["attach"], injection ? "injection" : "preload");
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 1);
  EXPECT_EQ(device["alloc_bytes"], 1 * kMiB);
  EXPECT_EQ(device["frees"], 0);
  EXPECT_EQ(device["current_bytes"], 1 * kMiB);
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 1 * kMiB);
  const json& sites = report["leaks"]["device"]["sites"];
  ASSERT_EQ(sites.size(), 1u) << sites.dump();
  EXPECT_EQ(sites[0]["location"], ProgramLine("exit_with.cu", "cudaMalloc(&p, 1 << 20)"));
  EXPECT_EQ(sites[0]["bytes"], 1 * kMiB);
  const json& l = report["lifecycle"];
  EXPECT_EQ(l["exit_status"], 0);
  EXPECT_EQ(l["first_call_observed"], !injection);  // injected: timed from the attach
  if (destroy_at_exit) {
    ASSERT_FALSE(l["teardown_ns"].is_null()) << l.dump(1);
    EXPECT_GT(l["teardown_ns"].get<uint64_t>(), 0u);
  } else {
    EXPECT_TRUE(l["teardown_ns"].is_null()) << l.dump(1);
  }
  for (const std::string& name : dir.List()) {
    EXPECT_EQ(name.find(".context-"), std::string::npos) << name;
  }
}

TEST(Attach, ExitReportUnderPreloadHasTheLeakAndNoTeardownTime) {
  ExpectFirstCallLeakAtExit(false, false);
}

TEST(Attach, ExitReportUnderInjectionHasTheFirstCallsLeakAndNoTeardownTime) {
  ExpectFirstCallLeakAtExit(true, false);
}

TEST(Attach, ExitReportUnderPreloadIsTheSameWhenContextsAreDestroyedAtExit) {
  ExpectFirstCallLeakAtExit(false, true);
}

TEST(Attach, ExitReportUnderInjectionIsTheSameWhenContextsAreDestroyedAtExit) {
  ExpectFirstCallLeakAtExit(true, true);
}

TEST(Attach, BothApisCountedOnceWithExactBytes) {
  ScopedTempDir dir;
  json report;
  ASSERT_NO_FATAL_FAILURE(RunPreloaded(dir, {kPrograms + "/api_mix"}, &report));
  const json& kinds = report["totals"]["kinds"];
  // cudaMalloc x3, cudaMallocPitch, cuMemAlloc x2: each once, not again as
  // the cuMemAlloc_v2 the runtime nests.
  EXPECT_EQ(kinds["device"]["allocs"], 6);
  EXPECT_EQ(kinds["device"]["frees"], 4);
  EXPECT_EQ(kinds["device"]["current_bytes"], 1 * kMiB + 256 * kKiB);
  EXPECT_EQ(kinds["pool"]["allocs"], 2);
  EXPECT_EQ(kinds["pool"]["current_bytes"], 512 * kKiB);
  EXPECT_EQ(kinds["managed"]["current_bytes"], 2 * kMiB);
  EXPECT_EQ(kinds["vmm"]["allocs"], 2);
  EXPECT_EQ(kinds["vmm"]["frees"], 1);
  EXPECT_EQ(kinds["vmm"]["current_bytes"], 2 * kMiB);
  EXPECT_EQ(kinds["pinned_host"]["allocs"], 2);
  EXPECT_EQ(kinds["pinned_host"]["current_bytes"], 64 * kKiB);
  // Pinned host memory never counts as device memory.
  EXPECT_EQ(report["totals"]["device_current_bytes"], 5 * kMiB + 768 * kKiB);
  EXPECT_EQ(report["totals"]["host_current_bytes"], 64 * kKiB);
  const json& copies = report["totals"]["copies"];
  EXPECT_EQ(copies["h2d"]["count"], 12);
  EXPECT_EQ(copies["h2d"]["bytes"], 1 * kMiB + 40 * kKiB + 256 * kKiB);
  EXPECT_EQ(copies["d2h"]["count"], 2);
  EXPECT_EQ(copies["d2h"]["bytes"], 1 * kMiB + 256 * kKiB);
  EXPECT_EQ(copies["d2d"]["count"], 1);
  EXPECT_EQ(report["totals"]["kernel_launches"], 5);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
}

TEST(Attach, RunCommandPassesExitStatusAndOutputThrough) {
  ScopedTempDir dir;
  auto env = SimEnv();
  const ProcessResult plain = RunProcess({kPrograms + "/exit_with", "3"}, env, dir.path());
  const ProcessResult traced =
      RunProcess({kCli, "run", "-o", dir.path() + "/r.json", "--", kPrograms + "/exit_with", "3"},
                 env, dir.path());
  EXPECT_EQ(plain.exit_code, 3);
  EXPECT_EQ(traced.exit_code, 3) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_NE(traced.err.find("exit_with: stderr line"), std::string::npos);
  const json report = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["totals"]["kinds"]["device"]["current_bytes"], 1 * kMiB);
  EXPECT_EQ(report["lifecycle"]["exit_status"], 3);
}

// quick_exit() runs at_quick_exit handlers only: the exit report is written
// from one, with the leak; the status is not told to such handlers.
TEST(Attach, QuickExitWritesTheExitReport) {
  ScopedTempDir dir;
  const ProcessResult traced = RunProcess(
      {kCli, "run", "-o", dir.path() + "/r.json", "--", kPrograms + "/exit_with", "4", "quick"},
      SimEnv(), dir.path());
  EXPECT_EQ(traced.exit_code, 4) << traced.err;
  EXPECT_EQ(traced.out, "exit_with: cudaMalloc -> cudaSuccess\n");
  EXPECT_EQ(traced.err.find("without running exit handlers"), std::string::npos) << traced.err;
  const json report = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "exit");
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 1 * kMiB);
  EXPECT_TRUE(report["lifecycle"]["exit_status"].is_null()) << report["lifecycle"].dump();
}

TEST(Attach, RunCommandReportsSignalLikeAShell) {
  ScopedTempDir dir;
  const ProcessResult r =
      RunProcess({kCli, "run", "--", "sh", "-c", "kill -TERM $$"}, SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 128 + 15);
  EXPECT_NE(r.err.find("terminated by signal 15"), std::string::npos) << r.err;
}

// A failure to attach prints exactly one line naming the cause; the host's
// stdout, the rest of its stderr and its exit status are as without gpuwatch.
void ExpectUnchangedWithOneLine(const std::string& fail_mode, const std::string& expected_cause) {
  ScopedTempDir dir;
  auto env = SimEnv();
  env["GWSIM_FAIL"] = fail_mode;
  env["GWSIM_OTHER_SUBSCRIBER"] = "Nsight Systems";
  const ProcessResult plain = RunProcess({kPrograms + "/exit_with", "5"}, env, dir.path());
  env["LD_PRELOAD"] = kLib;
  const ProcessResult traced = RunProcess({kPrograms + "/exit_with", "5"}, env, dir.path());
  EXPECT_EQ(plain.exit_code, 5);
  EXPECT_EQ(traced.exit_code, 5);
  EXPECT_EQ(traced.out, plain.out);
  const auto lines = LinesStartingWith(traced.err, "gpuwatch:");
  ASSERT_EQ(lines.size(), 1u) << traced.err;
  EXPECT_NE(lines[0].find(expected_cause), std::string::npos) << lines[0];
  std::string rest = traced.err;
  rest.erase(rest.find(lines[0]), lines[0].size() + 1);
  EXPECT_EQ(rest, plain.err);
  EXPECT_TRUE(dir.List().empty()) << "a report was written although profiling is off";
}

TEST(Attach, NoDriverLeavesHostUnchanged) {
  ExpectUnchangedWithOneLine("no-driver", "no usable CUDA driver");
}

TEST(Attach, SecondSubscriberIsNamedAndHostUnchanged) {
  ExpectUnchangedWithOneLine("other-subscriber", "Nsight Systems");
}

TEST(Attach, MissingCuptiLeavesHostUnchanged) {
  ScopedTempDir dir;
  auto env = SimEnv();
  const ProcessResult plain = RunProcess({kPrograms + "/exit_with", "4"}, env, dir.path());
  env["LD_PRELOAD"] = kLib;
  env["GPUWATCH_CUPTI_LIBRARY"] = dir.path() + "/no-such-libcupti.so";
  const ProcessResult traced = RunProcess({kPrograms + "/exit_with", "4"}, env, dir.path());
  EXPECT_EQ(traced.exit_code, 4) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  const auto lines = LinesStartingWith(traced.err, "gpuwatch:");
  ASSERT_EQ(lines.size(), 1u) << traced.err;
  EXPECT_NE(lines[0].find("cannot load " + dir.path() + "/no-such-libcupti.so"), std::string::npos)
      << lines[0];
  EXPECT_TRUE(dir.List().empty());
}

// Processes that never use CUDA see nothing at all: no output, no file.
void ExpectInvisible(const std::vector<std::string>& argv, int expected_status) {
  ScopedTempDir dir;
  std::map<std::string, std::string> env = {{"GPUWATCH_DEPTH", "not-a-number"}};
  const ProcessResult plain = RunProcess(argv, env, dir.path());
  env["LD_PRELOAD"] = kLib;
  const ProcessResult traced = RunProcess(argv, env, dir.path());
  EXPECT_EQ(plain.exit_code, expected_status);
  EXPECT_EQ(traced.exit_code, expected_status);
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(traced.err, plain.err);
  EXPECT_TRUE(dir.List().empty());
}

TEST(Attach, InvisibleInShell) { ExpectInvisible({"sh", "-c", "exit 3"}, 3); }

TEST(Attach, InvisibleInPython) {
  ExpectInvisible({"python3", "-c", "import sys; print('py', sys.version_info[0])"}, 0);
}

TEST(Attach, InvisibleInExceptionThrowingProgram) {
  ExpectInvisible({kPrograms + "/throw_catch"}, 0);
}

TEST(Attach, ExceptionsStillWorkWhenAttached) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kPrograms + "/throw_catch_cuda"}, PreloadEnv(out), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "caught 1000\n");
  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["gpuwatch"]["attach"], "preload");
  EXPECT_EQ(report["totals"]["kinds"]["device"]["allocs"], 1);
}

TEST(Attach, BadConfigurationValueWarnsOnceAndUsesDefault) {
  ScopedTempDir dir;
  auto env = PreloadEnv(dir.path() + "/r.json");
  env["GPUWATCH_DEPTH"] = "lots";
  env["GPUWATCH_SUMMARY"] = "0";
  const ProcessResult r = RunProcess({kPrograms + "/exit_with", "0"}, env, dir.path());
  EXPECT_EQ(r.exit_code, 0);
  const auto lines = LinesStartingWith(r.err, "gpuwatch:");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0],
            "gpuwatch: ignoring GPUWATCH_DEPTH=\"lots\" (expected an integer from 0 to 128); "
            "using 32");
}

}  // namespace
}  // namespace gpuwatch::testing
