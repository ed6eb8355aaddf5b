// gpuwatch inside someone else's process: a report that a callback causes
// (out of memory, a context destroyed with memory live) is written by
// gpuwatch's own thread, never on the application's call; and a signal
// that arrives while gpuwatch holds one of its locks cannot leave the
// process hanging in its exit (interpose/callbacks/guard.h).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

const std::string kProbe = kPrograms + "/libthread_probe.so";

// The thread that renamed each file into place, by the file's name.
std::map<std::string, std::string> Writers(const std::string& log) {
  std::map<std::string, std::string> writers;
  const std::string text = ReadFile(log);
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) writers[line.substr(0, tab)] = line.substr(tab + 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return writers;
}

const std::string kSource = kSourceDir + "/tests/e2e/programs/reentry.cu";

// Runs `reentry MODE` preloaded with the probe; `log` receives its renames.
ProcessResult RunProbed(const std::string& mode, const ScopedTempDir& dir,
                        std::map<std::string, std::string> env = {}) {
  env["LD_LIBRARY_PATH"] = kSimDir;
  env["LD_PRELOAD"] = kLib + ":" + kProbe;
  env["GPUWATCH_OUTPUT"] = dir.path() + "/report.json";
  env["GWTEST_RENAME_LOG"] = dir.path() + "/renames.txt";
  return RunProcess({"timeout", "-s", "KILL", "120", kPrograms + "/reentry", mode}, env,
                    dir.path());
}

TEST(Reentry, AnOutOfMemoryReportIsWrittenByGpuwatchsThreadWithTheLiveMemoryOfThatMoment) {
  ScopedTempDir dir;
  const ProcessResult r =
      RunProbed("oom", dir, {{"GWSIM_DEVICE_MEMORY", std::to_string(512 * kMiB)}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto writers = Writers(dir.path() + "/renames.txt");
  ASSERT_EQ(writers.count("report.json.oom-1"), 1u) << r.err;
  EXPECT_EQ(writers.at("report.json.oom-1"), "gpuwatch-bg");
  EXPECT_EQ(writers.at("report.json"), "reentry");  // the exit report: the exiting thread
  // Written after the failing call returned, it holds what was live at the
  // failure (the program freed everything before it exited).
  const json report = ReadJson(dir.path() + "/report.json.oom-1");
  EXPECT_EQ(report["trigger"], "oom");
  EXPECT_EQ(report["oom"]["location"], "reentry.cu:" + std::to_string(LineOf(kSource, "AT:oom")));
  EXPECT_EQ(report["oom"]["device_total_bytes"], 512 * kMiB);
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 512 * kMiB);
  EXPECT_EQ(ReadJson(dir.path() + "/report.json")["totals"]["device_current_bytes"], 0);
  EXPECT_EQ(LinesStartingWith(r.err,
                              "gpuwatch: out of memory: cudaMalloc of 256.0 MiB failed at "
                              "reentry.cu:")
                .size(),
            1u)
      << r.err;
}

TEST(Reentry, AContextReportIsWrittenByGpuwatchsThreadWithTheMemoryLiveInIt) {
  ScopedTempDir dir;
  const ProcessResult r = RunProbed("reset", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto writers = Writers(dir.path() + "/renames.txt");
  ASSERT_EQ(writers.count("report.json.context-1"), 1u) << r.err;
  EXPECT_EQ(writers.at("report.json.context-1"), "gpuwatch-bg");
  const json context = ReadJson(dir.path() + "/report.json.context-1");
  EXPECT_EQ(context["trigger"], "context_destroy");
  EXPECT_EQ(context["totals"]["kinds"]["device"]["current_bytes"], 1 * kMiB);
  ASSERT_EQ(context["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(context["leaks"]["device"]["sites"][0]["location"],
            "reentry.cu:" + std::to_string(LineOf(kSource, "AT:reset_leak")));
}

// SIGTERM arrives inside a cudaMalloc's callback, and the program's handler
// calls exit(). While gpuwatch holds the live table's lock (the third lock it
// takes there), the exit report would wait for that lock, held by the
// exiting thread itself, forever: it is given up with one line, and the
// program ends with its own status. Outside its locks, the reports are
// written as usual. `timeout` turns a hang into a failure (status 137).
ProcessResult RunInterrupted(const std::vector<std::string>& when,
                             const std::map<std::string, std::string>& env,
                             const std::string& cwd) {
  std::vector<std::string> argv = {"timeout", "-s", "KILL", "120", kPrograms + "/reentry",
                                   "signal"};
  argv.insert(argv.end(), when.begin(), when.end());
  return RunProcess(argv, env, cwd);
}

constexpr char kNoExitReport[] =
    "gpuwatch: no exit report: the process exited from a signal handler that interrupted "
    "gpuwatch while it held a lock the report needs";
constexpr char kNoSignalReport[] =
    "gpuwatch: no report for this signal: it interrupted gpuwatch while it held a lock the "
    "report needs";

// Preloaded: gpuwatch attaches before main(), so the program's handler
// replaces gpuwatch's own.
std::map<std::string, std::string> Preloaded(const std::string& out) {
  return {
      {"LD_LIBRARY_PATH", kSimDir}, {"LD_PRELOAD", kLib + ":" + kProbe}, {"GPUWATCH_OUTPUT", out}};
}

// Injected at the first CUDA call: the program's handler came first, so
// gpuwatch's handler runs and then chains to it.
std::map<std::string, std::string> Injected(const std::string& out) {
  return {{"LD_LIBRARY_PATH", kSimDir},
          {"LD_PRELOAD", kProbe},
          {"CUDA_INJECTION64_PATH", kLib},
          {"GPUWATCH_OUTPUT", out}};
}

// The program interrupted while gpuwatch holds a lock ("locked 2"), with
// gpuwatch attached as `attach` (Preloaded or Injected) gives it: the
// handler's exit(3) ends it, stderr says once each of `notices`, and no
// report is written.
void ExpectLockedRunExits3WithoutReports(
    std::map<std::string, std::string> (*attach)(const std::string&),
    const std::vector<const char*>& notices) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunInterrupted({"locked", "2"}, attach(out), dir.path());
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  for (const char* notice : notices) {
    EXPECT_EQ(LinesStartingWith(r.err, notice).size(), 1u) << r.err;
  }
  EXPECT_TRUE(ReadFile(out).empty());
}

TEST(Reentry, AnExitFromASignalThatInterruptedGpuwatchHoldingALockEndsWithTheProgramsStatus) {
  ExpectLockedRunExits3WithoutReports(Preloaded, {kNoExitReport});
}

TEST(Reentry, AChainedHandlerDoesNotWaitForAReportThatNeedsTheInterruptedThreadsLock) {
  ExpectLockedRunExits3WithoutReports(Injected, {kNoSignalReport, kNoExitReport});
}

TEST(Reentry, ASignalThatInterruptsGpuwatchOutsideItsLocksStillGetsItsReports) {
#ifdef GPUWATCH_TEST_SANITIZER_RUNTIME
  // The sanitizer's runtime, preloaded first, intercepts clock_gettime: the
  // probe then sees the interceptor as its caller, never libgpuwatch.so.
  GTEST_SKIP() << "the probe's clock_gettime hook sits behind the sanitizer's interceptor";
#endif
  for (const bool injected : {false, true}) {
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r =
        RunInterrupted({"unlocked"}, injected ? Injected(out) : Preloaded(out), dir.path());
    EXPECT_FALSE(r.signaled) << injected;
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_TRUE(LinesStartingWith(r.err, "gpuwatch: no ").empty()) << r.err;
    // Injected, gpuwatch's handler wrote the signal's report before the
    // program's handler ran; its exit() then wrote the exit report over it.
    EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: report written to " + out).size(),
              injected ? 2u : 1u)
        << r.err;
    const json report = ReadJson(out);
    EXPECT_EQ(report["trigger"], "exit") << injected;
    // The first cudaMalloc; the interrupted one never reached the table.
    EXPECT_EQ(report["totals"]["kinds"]["device"]["allocs"], 1) << injected;
    EXPECT_EQ(report["totals"]["kinds"]["device"]["current_bytes"], 1 * kMiB) << injected;
  }
}

// A stop signal that ends the process while a report is being written (here
// a snapshot, its temporary file written, not yet renamed) leaves no
// `.tmp.` file beside the report.
TEST(Reentry, AStopSignalDuringAReportLeavesNoTemporaryFile) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kPrograms + "/reentry", "snapshot_term"}, Preloaded(out), dir.path());
  ASSERT_TRUE(r.signaled) << r.err;
  EXPECT_EQ(r.signal, SIGTERM);
  for (const std::string& name : dir.List()) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace gpuwatch::testing
