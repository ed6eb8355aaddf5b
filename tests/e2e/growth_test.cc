// End-to-end tests of growth detection and of what the library does per
// process: growth suspects at the right file:line with the right rate, pause
// and resume, forked children reporting only their own allocations, and
// GPUWATCH_EXITCODE. Programs run on the CUDA simulator with libgpuwatch.so
// preloaded.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string GrowthAt(const std::string& marker) { return ProgramLine("growth_loop.cu", marker); }

std::string ForkAt(const std::string& marker) { return ProgramLine("fork_child.cu", marker); }

// Periodic sampling off: the tests look at the marks alone.
std::map<std::string, std::string> MarksOnlyEnv(const std::string& output) {
  return PreloadEnv(output, {{"GPUWATCH_SAMPLE_MS", "0"}});
}

json RunGrowthLoop(const ScopedTempDir& dir, const std::vector<std::string>& args,
                   ProcessResult* result = nullptr) {
  const std::string out = dir.path() + "/report.json";
  std::vector<std::string> argv = {kPrograms + "/growth_loop"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = RunProcess(argv, MarksOnlyEnv(out), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (result != nullptr) *result = r;
  return ReadJson(out);
}

TEST(Growth, LeakPerMarkIsASuspectAtItsLineWithItsRate) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"10", std::to_string(256 * kKiB)});
  ASSERT_TRUE(report.is_object());
  const json& growth = report["growth"];
  EXPECT_EQ(growth["basis"], "mark");
  EXPECT_EQ(growth["samples"], 10);
  // The balanced scratch buffer is live at no mark: only the kept one grows.
  ASSERT_EQ(growth["suspects"].size(), 1u) << growth.dump(1);
  const json& g = growth["suspects"][0];
  EXPECT_EQ(g["location"], GrowthAt("GROWTH:leak"));
  EXPECT_EQ(g["frames"][0]["line"],
            LineOf(kSourceDir + "/tests/e2e/programs/growth_loop.cu", "GROWTH:leak"));
  EXPECT_EQ(g["unit"], "mark");
  EXPECT_EQ(g["rate"].get<double>(), static_cast<double>(256 * kKiB));
  EXPECT_EQ(g["first_bytes"], 256 * kKiB);
  EXPECT_EQ(g["last_bytes"], 10 * 256 * kKiB);
  EXPECT_EQ(g["growth_bytes"], 9 * 256 * kKiB);
  EXPECT_EQ(g["from"].get<double>(), 1.0);
  EXPECT_EQ(g["to"].get<double>(), 10.0);
  EXPECT_EQ(g["samples"], 10);
  ASSERT_EQ(g["series"].size(), 10u);
  EXPECT_EQ(g["series"][4], 5 * 256 * kKiB);
  // The timeline holds every mark with its label and the device total.
  const json& marks = report["timeline"]["marks"];
  EXPECT_EQ(marks["total"], 10);
  ASSERT_EQ(marks["samples"].size(), 10u);
  EXPECT_EQ(marks["samples"][2]["mark"], 3);
  EXPECT_EQ(marks["samples"][2]["label"], "step");
  EXPECT_EQ(marks["samples"][2]["device_bytes"], 3 * 256 * kKiB);
}

TEST(Growth, MemoryFreedBeforeExitIsStillReportedAsGrowth) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"8", std::to_string(1 * kMiB), "free-at-end"});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["totals"]["device_current_bytes"], 0);
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 0);
  ASSERT_EQ(report["growth"]["suspects"].size(), 1u);
  EXPECT_EQ(report["growth"]["suspects"][0]["location"], GrowthAt("GROWTH:leak"));
  EXPECT_EQ(report["growth"]["suspects"][0]["rate"].get<double>(), static_cast<double>(kMiB));
}

TEST(Growth, BalancedLoopHasNoSuspect) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"10", "0"});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["growth"]["basis"], "mark");
  EXPECT_TRUE(report["growth"]["suspects"].empty()) << report["growth"].dump(1);
}

TEST(Growth, TimelineStaysBoundedOverAThousandMarks) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"1000", std::to_string(4 * kKiB)});
  ASSERT_TRUE(report.is_object());
  const json& marks = report["timeline"]["marks"];
  EXPECT_EQ(marks["total"], 1000);
  const size_t capacity = report["timeline"]["capacity"];
  EXPECT_LE(marks["samples"].size(), capacity + 1);
  EXPECT_GE(marks["samples"].size(), capacity / 2);
  // Thinned evenly, the first and the newest kept: the rate is still exact.
  EXPECT_EQ(marks["samples"][0]["mark"], 1);
  EXPECT_EQ(marks["samples"].back()["mark"], 1000);
  ASSERT_EQ(report["growth"]["suspects"].size(), 1u);
  const json& g = report["growth"]["suspects"][0];
  EXPECT_EQ(g["rate"].get<double>(), static_cast<double>(4 * kKiB));
  EXPECT_EQ(g["last_bytes"], 1000 * 4 * kKiB);
}

// Four threads mark their steps at once (gpuwatch_mark's kept scan is
// taken by one, the others scan afresh): every mark is counted, each sample
// is whole, and the leak is exact.
TEST(Growth, MarksFromManyThreadsAtOnceAreEachCounted) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"200", std::to_string(4 * kKiB), "threads"});
  ASSERT_TRUE(report.is_object());
  const json& marks = report["timeline"]["marks"];
  EXPECT_EQ(marks["total"], 4 * 200);
  EXPECT_EQ(marks["samples"].back()["mark"], 4 * 200);
  const uint64_t kept = 4 * kKiB * 4 * 200;  // 4 KiB per step, 4 threads of 200 steps
  EXPECT_EQ(report["leaks"]["device"]["bytes"], kept);
  uint64_t previous = 0;
  for (const json& sample : marks["samples"]) {
    EXPECT_GT(sample["mark"].get<uint64_t>(), previous);
    previous = sample["mark"];
    EXPECT_EQ(sample["label"], "step");
    // At most 4 scratch buffers of 1 MiB besides what was kept so far.
    EXPECT_LE(sample["device_bytes"].get<uint64_t>(), 4 * kMiB + kept);
  }
  ASSERT_EQ(report["growth"]["suspects"].size(), 1u) << report["growth"].dump(1);
  EXPECT_EQ(report["growth"]["suspects"][0]["location"], GrowthAt("GROWTH:leak"));
}

TEST(Growth, WithoutMarksPeriodicSamplesGiveARatePerSecond) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = MarksOnlyEnv(out);
  env["GPUWATCH_SAMPLE_MS"] = "1";
  // 60 iterations of at least 2 ms each, 64 KiB kept per iteration.
  const ProcessResult r = RunProcess(
      {kPrograms + "/growth_loop", "60", std::to_string(64 * kKiB), "timed"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["timeline"]["marks"]["total"], 0);
  EXPECT_EQ(report["timeline"]["interval_ms"], 1);
  EXPECT_GE(report["timeline"]["periodic"]["total"].get<int>(), 4);
  EXPECT_EQ(report["growth"]["basis"], "second");
  ASSERT_EQ(report["growth"]["suspects"].size(), 1u) << report["growth"].dump(1);
  const json& g = report["growth"]["suspects"][0];
  EXPECT_EQ(g["location"], GrowthAt("GROWTH:leak"));
  EXPECT_EQ(g["unit"], "second");
  // 64 KiB per iteration of 2 ms or more: 32 MiB/s at most over the whole run,
  // 48 MiB/s over the shortest window that makes a suspect (three allocations
  // at least 4 ms apart).
  EXPECT_GT(g["rate"].get<double>(), 0.0);
  EXPECT_LE(g["rate"].get<double>(), 48.0 * kMiB);
}

TEST(Growth, PauseStopsRecordingAllocationsButNotFrees) {
  ScopedTempDir dir;
  const json report = RunGrowthLoop(dir, {"3", std::to_string(256 * kKiB), "pause"});
  ASSERT_TRUE(report.is_object());
  const json& device = report["totals"]["kinds"]["device"];
  // 3 scratch buffers and 3 kept ones; the 4 MiB made while paused is unseen,
  // the free made while paused is seen.
  EXPECT_EQ(device["allocs"], 6);
  EXPECT_EQ(device["frees"], 3);
  EXPECT_EQ(device["current_bytes"], 3 * 256 * kKiB);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
  ASSERT_EQ(report["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(report["leaks"]["device"]["sites"][0]["location"], GrowthAt("GROWTH:leak"));
}

TEST(Growth, PythonCtypesExampleMarksIterations) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/py.json";
  std::map<std::string, std::string> env = SimEnv();
  const ProcessResult r = RunProcess({kCli, "run", "-o", out, "--sample-ms", "0", "--", "python3",
                                      kSourceDir + "/examples/mark_iterations.py", "--steps", "6"},
                                     env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gpuwatch is attached"), std::string::npos) << r.out;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["growth"]["basis"], "mark");
  EXPECT_EQ(report["timeline"]["marks"]["total"], 6);
  ASSERT_EQ(report["growth"]["suspects"].size(), 1u) << report["growth"].dump(1);
  const json& g = report["growth"]["suspects"][0];
  EXPECT_EQ(g["rate"].get<double>(), static_cast<double>(kMiB));
  // With Python frames the site is the script's line.
  const int line = LineOf(kSourceDir + "/examples/mark_iterations.py", "# kept: the leak");
  EXPECT_EQ(g["location"], "mark_iterations.py:" + std::to_string(line)) << g.dump(1);
}

// --- Forked children ---------------------------------------------------------

struct ForkRun {
  ProcessResult result;
  std::string parent_pid;
  std::string child_pid;
};

ForkRun RunForkChild(const ScopedTempDir& dir, const std::string& pattern,
                     const std::string& sample_ms = "0", const std::string& mode = "") {
  ForkRun run;
  auto env = MarksOnlyEnv(dir.path() + "/" + pattern);
  env["GPUWATCH_SAMPLE_MS"] = sample_ms;
  std::vector<std::string> argv = {kPrograms + "/fork_child"};
  if (!mode.empty()) argv.push_back(mode);
  run.result = RunProcess(argv, env, dir.path());
  std::istringstream lines(run.result.out);
  std::string word;
  std::string pid;
  while (lines >> word >> pid) (word == "parent" ? run.parent_pid : run.child_pid) = pid;
  return run;
}

void ExpectOnlyChildAllocations(const json& child) {
  ASSERT_TRUE(child.is_object());
  EXPECT_EQ(child["totals"]["kinds"]["device"]["allocs"], 1);
  EXPECT_EQ(child["totals"]["device_current_bytes"], 256 * kKiB);
  ASSERT_EQ(child["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(child["leaks"]["device"]["sites"][0]["location"], ForkAt("FORK:child"));
}

TEST(Fork, ChildReportHoldsOnlyItsOwnAllocations) {
  ScopedTempDir dir;
  const ForkRun run = RunForkChild(dir, "r.%p.json");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_FALSE(run.child_pid.empty()) << run.result.out;
  const json child = ReadJson(dir.path() + "/r." + run.child_pid + ".json");
  ExpectOnlyChildAllocations(child);
  EXPECT_EQ(child["process"]["pid"], std::stoi(run.child_pid));
  // The parent's report has its two allocations and not the child's.
  const json parent = ReadJson(dir.path() + "/r." + run.parent_pid + ".json");
  ASSERT_TRUE(parent.is_object());
  EXPECT_EQ(parent["totals"]["kinds"]["device"]["allocs"], 2);
  EXPECT_EQ(parent["totals"]["device_current_bytes"], 1 * kMiB + 512 * kKiB);
  for (const json& site : parent["leaks"]["device"]["sites"]) {
    EXPECT_NE(site["location"], ForkAt("FORK:child"));
  }
  EXPECT_EQ(dir.List().size(), 2u);
}

// gpuwatch's thread samples every millisecond, allocating as it does: the
// fork must wait until it is idle, or the child inherits a locked allocator
// where the allocator has no fork handlers of its own (GCC 12's ASan: without
// the wait, most runs of this test hang in the asan build).
TEST(Fork, ChildForkedWhileTheBackgroundThreadSamplesReportsItsOwn) {
  ScopedTempDir dir;
  const ForkRun run = RunForkChild(dir, "r.%p.json", "1");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_FALSE(run.child_pid.empty()) << run.result.out;
  ExpectOnlyChildAllocations(ReadJson(dir.path() + "/r." + run.child_pid + ".json"));
  const json parent = ReadJson(dir.path() + "/r." + run.parent_pid + ".json");
  ASSERT_TRUE(parent.is_object());
  EXPECT_EQ(parent["totals"]["device_current_bytes"], 1 * kMiB + 512 * kKiB);
}

// Another thread is inside gpuwatch (allocating and freeing) when the program
// forks: the child, which makes no CUDA call, exits through gpuwatch's exit
// handlers without a deadlock and writes no report; the parent's totals are
// exact.
TEST(Fork, ForkWhileAnotherThreadAllocatesLeavesTheChildFreeAndTheParentExact) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer's allocator has no fork handlers (GCC 12): a child forked
  // while the other thread is inside malloc can hang in its own exit path.
  GTEST_SKIP()
      << "the sanitizer runtime's allocator is not fork-safe with other allocating threads";
#endif
  ScopedTempDir dir;
  const ForkRun run = RunForkChild(dir, "r.%p.json", "0", "busy");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_FALSE(run.child_pid.empty()) << run.result.out;
  EXPECT_EQ(dir.List(), std::vector<std::string>{"r." + run.parent_pid + ".json"});
  const json parent = ReadJson(dir.path() + "/r." + run.parent_pid + ".json");
  ASSERT_TRUE(parent.is_object());
  EXPECT_EQ(parent["totals"]["kinds"]["device"]["allocs"], 2 + 20000);
  EXPECT_EQ(parent["totals"]["kinds"]["device"]["frees"], 20000);
  EXPECT_EQ(parent["totals"]["device_current_bytes"], 1 * kMiB + 512 * kKiB);
}

// A child that execs (a worker started with fork + exec): the new image
// attaches gpuwatch afresh and reports only what it did.
TEST(Fork, ChildThatExecsReportsOnlyTheNewImage) {
  ScopedTempDir dir;
  const ForkRun run = RunForkChild(dir, "r.%p.json", "0", "exec");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_FALSE(run.child_pid.empty()) << run.result.out;
  const json child = ReadJson(dir.path() + "/r." + run.child_pid + ".json");
  ASSERT_TRUE(child.is_object());
  EXPECT_EQ(child["totals"]["kinds"]["device"]["allocs"], 1);
  EXPECT_EQ(child["totals"]["device_current_bytes"], 256 * kKiB);
  ASSERT_EQ(child["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(child["leaks"]["device"]["sites"][0]["location"], ForkAt("FORK:exec"));
  const json parent = ReadJson(dir.path() + "/r." + run.parent_pid + ".json");
  EXPECT_EQ(parent["totals"]["kinds"]["device"]["allocs"], 2);
  EXPECT_EQ(parent["totals"]["device_current_bytes"], 1 * kMiB + 512 * kKiB);
}

TEST(Fork, ChildOfAFixedOutputPathWritesBesideIt) {
  ScopedTempDir dir;
  const ForkRun run = RunForkChild(dir, "r.json");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ExpectOnlyChildAllocations(ReadJson(dir.path() + "/r.json.child-" + run.child_pid));
  EXPECT_EQ(ReadJson(dir.path() + "/r.json")["totals"]["device_current_bytes"],
            1 * kMiB + 512 * kKiB);
}

// --- GPUWATCH_EXITCODE ----------------------------------------------------------

TEST(ExitCode, LeakTurnsStatusZeroIntoTheCodeAndKeepsOutput) {
  ScopedTempDir dir;
  auto env = MarksOnlyEnv(dir.path() + "/r.json");
  const ProcessResult plain = RunProcess({kExamples + "/leaky_loop"}, env, dir.path());
  env["GPUWATCH_EXITCODE"] = "23";
  const ProcessResult r = RunProcess({kExamples + "/leaky_loop"}, env, dir.path());
  EXPECT_EQ(r.exit_code, 23) << r.err;
  // stdout is flushed before the status changes, even when it is a pipe.
  EXPECT_EQ(r.out, plain.out);
  EXPECT_NE(r.err.find("gpuwatch: exit status 0 changed to 23: 2.0 MiB of device memory leaked"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(ReadJson(dir.path() + "/r.json").is_object());
}

TEST(ExitCode, SuppressedLeakLeavesStatusZero) {
  ScopedTempDir dir;
  const std::string supp = dir.path() + "/gpuwatch.supp";
  std::ofstream(supp) << "# kept on purpose\nleak:AllocateHistory\n";
  auto env = MarksOnlyEnv(dir.path() + "/r.json");
  env["GPUWATCH_EXITCODE"] = "23";
  env["GPUWATCH_SUPPRESSIONS"] = supp;
  const ProcessResult r = RunProcess({kExamples + "/leaky_loop"}, env, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(dir.path() + "/r.json");
  ASSERT_TRUE(report.is_object());
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], 2 * kMiB);
  EXPECT_EQ(device["leaked_bytes"], 0);
  EXPECT_EQ(device["suppressed_bytes"], 2 * kMiB);
  EXPECT_EQ(device["sites"][0]["suppressed"], "leak:AllocateHistory");
}

TEST(ExitCode, NonZeroStatusAndCleanProgramsAreLeftAlone) {
  ScopedTempDir dir;
  auto env = MarksOnlyEnv(dir.path() + "/r.json");
  env["GPUWATCH_EXITCODE"] = "23";
  // exit_with leaks 1 MiB but exits 3 on its own: 3 it stays.
  EXPECT_EQ(RunProcess({kPrograms + "/exit_with", "3"}, env, dir.path()).exit_code, 3);
  const ProcessResult clean = RunProcess({kPrograms + "/growth_loop", "3", "0"}, env, dir.path());
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.err.find("changed to"), std::string::npos) << clean.err;
}

}  // namespace
}  // namespace gpuwatch::testing
