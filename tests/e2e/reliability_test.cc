// Reliability under load: many threads allocating while snapshots are taken.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

TEST(Reliability, EightThreadsHundredThousandPairsWithConcurrentSnapshots) {
  ScopedTempDir dir;
  json report;
  ProcessResult r;
  ASSERT_NO_FATAL_FAILURE(RunPreloaded(dir, {kPrograms + "/stress", "8", "100000"}, &report, &r));
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 800000);
  EXPECT_EQ(device["frees"], 800000);
  EXPECT_EQ(device["current_bytes"], 0);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
  // Every snapshot written while the workers ran is a complete report.
  int parsed = 0;
  for (const std::string& name : dir.List()) {
    if (name.find(".snapshot-") == std::string::npos) continue;
    const json snap = ReadJson(dir.path() + "/" + name);
    ASSERT_TRUE(snap.is_object()) << name;
    EXPECT_EQ(snap["trigger"], "snapshot");
    const uint64_t allocs = snap["totals"]["kinds"]["device"]["allocs"];
    const uint64_t frees = snap["totals"]["kinds"]["device"]["frees"];
    EXPECT_LE(frees, allocs);
    EXPECT_LE(allocs, 800000u);
    ++parsed;
  }
  EXPECT_GT(parsed, 0) << r.out;
}

std::map<std::string, std::string> LeakyLoopEnv(const std::string& out) {
  // Checkpoints off: the exit report is the one write these tests look at.
  return PreloadEnv(out, {{"GPUWATCH_CHECKPOINT_SECONDS", "0"}});
}

std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

const char kLeakyLoopOut[] = "leaky_loop: 8 steps done, 8 history buffers kept\n";

// An output directory that does not exist: one line naming the path and the
// reason, and the program runs and ends as without gpuwatch.
TEST(Reliability, UnwritableOutputCostsOneLineAndTheReport) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/missing/report.json";
  const ProcessResult r = RunProcess({kExamples + "/leaky_loop"}, LeakyLoopEnv(out), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kLeakyLoopOut);
  const std::vector<std::string> lines = LinesWith(r.err, "could not write");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(dir.path() + "/missing"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("No such file or directory"), std::string::npos) << lines[0];
  EXPECT_TRUE(dir.List().empty());
}

// A full disk, as a file size limit makes it (RLIMIT_FSIZE of 16 blocks): the
// report's write fails partway (EFBIG) and the partial file is removed; one
// line says so, and the program's output and exit status are what they were,
// whether it ignores SIGXFSZ or, as by default, would die of it.
TEST(Reliability, FullDiskCostsOneLineAndTheReport) {
  for (const std::string limit : {"ulimit -f 16 && trap '' XFSZ", "ulimit -f 16"}) {
    SCOPED_TRACE(limit);
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r =
        RunProcess({"/bin/sh", "-c", limit + " && exec \"$0\"", kExamples + "/leaky_loop"},
                   LeakyLoopEnv(out), dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, kLeakyLoopOut);
    const std::vector<std::string> lines = LinesWith(r.err, "could not write");
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find("File too large"), std::string::npos) << lines[0];
    EXPECT_TRUE(dir.List().empty()) << "a partial report or temporary file was left behind";
  }
}

// An argument (or a path) that is not UTF-8 cannot go into JSON as it is;
// it used to make the report's writer throw, which ended the program
// (abort, exit 134). Its bytes are written as U+FFFD and nothing else
// changes.
TEST(Reliability, ArgumentsThatAreNotUtf8AreWrittenAsReplacementCharacters) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kExamples + "/leaky_loop", "2", "\xff\xfe"}, LeakyLoopEnv(out), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "leaky_loop: 2 steps done, 2 history buffers kept\n");
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  ASSERT_EQ(report["process"]["command"].size(), 3u);
  EXPECT_EQ(report["process"]["command"][2], "\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD twice
  EXPECT_EQ(report["leaks"]["device"]["count"], 2);
}

// Small stacks: the exit report runs on whichever thread calls exit(), and
// writing one takes far more stack than a host thread may have. A thread of
// 128 KiB that calls exit(8), and a main thread under `ulimit -s 128`: the
// host ends with its own status and the report names its leak.
TEST(Reliability, ReportsAreWrittenFromThreadsWithSmallStacks) {
  const struct {
    std::string mode;
    std::vector<std::string> argv;
    int status;
  } cases[] = {
      {"thread", {kPrograms + "/small_stack", "thread"}, 8},
      {"main", {"/bin/sh", "-c", "ulimit -s 128 && exec \"$0\"", kPrograms + "/small_stack"}, 0},
  };
  for (const auto& c : cases) {
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r = RunProcess(c.argv, LeakyLoopEnv(out), dir.path());
    EXPECT_EQ(r.exit_code, c.status) << c.mode << r.err;
    EXPECT_NE(r.out.find(c.mode == "thread" ? "thread exits" : "main returns"), std::string::npos)
        << c.mode << r.out;
    const json report = ReadJson(out);
    ASSERT_TRUE(report.is_object()) << c.mode << r.err;
    const json& sites = report["leaks"]["device"]["sites"];
    ASSERT_EQ(sites.size(), 1u) << c.mode << sites.dump();
    EXPECT_EQ(sites[0]["location"], ProgramLine("small_stack.cu", "LEAK:" + c.mode)) << c.mode;
    EXPECT_EQ(sites[0]["bytes"], 1 << 20) << c.mode;
  }
}

// A daemon started with stdin, stdout and stderr closed: gpuwatch's pipes
// would be the next descriptors, 0 and 1, and the host's writes to them
// would reach gpuwatch (bytes the background thread took for signal
// requests: reports that nobody asked for). They stay closed (the program's
// exit status is the mask of those something opened); what the host writes
// there goes where it would without gpuwatch (nowhere), and the one report
// is the exit report.
TEST(Reliability, StandardDescriptorsClosedAtStartStayTheHosts) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({"/bin/sh", "-c", "exec \"$0\" <&- >&- 2>&-", kPrograms + "/closed_stdio"},
                 LeakyLoopEnv(out), dir.path());
  EXPECT_EQ(r.exit_code, 0) << "descriptors among 0-2 opened (mask)";
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"report.json"});
  const json report = ReadJson(out);
  EXPECT_EQ(report["trigger"], "exit");
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 1 << 20) << report["leaks"].dump();
}

// A host that ends close to its memory limit (RLIMIT_AS lowered to what it
// maps plus 0 to 32 MiB): the exit report either is written whole or is
// given up with one line, and the host ends with its own status. Before,
// an allocation failing while the report was built unwound through JSON
// destructors that allocate (std::terminate: status 134), and libdw, out of
// memory, ended the process with status 1.
TEST(Reliability, AHostAtItsMemoryLimitKeepsItsStatus) {
#ifdef GPUWATCH_TEST_SANITIZER_RUNTIME
  // ASan's allocator does not fail an allocation under RLIMIT_AS: it stops
  // the process, and its own stack printer then waits for ever on a lock it
  // holds (seen with gcc 12's runtime). That measures the sanitizer, not
  // gpuwatch; the normal build runs this test.
  GTEST_SKIP() << "a sanitizer's allocator cannot run at a memory limit";
#endif
  int written = 0;
  for (int headroom_kib = 0; headroom_kib <= 32 << 10; headroom_kib += 1 << 10) {
    const std::string mode = std::to_string(headroom_kib) + " KiB left";
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r = RunProcess({kPrograms + "/tight_memory", std::to_string(headroom_kib)},
                                       LeakyLoopEnv(out), dir.path());
    EXPECT_EQ(r.exit_code, 0) << mode << r.err;
    EXPECT_EQ(r.out, "tight_memory: limited\n") << mode;
    const json report = ReadJson(out);
    if (report.is_object()) {
      ++written;
      EXPECT_EQ(report["leaks"]["device"]["count"], 2000) << mode;
    } else {
      EXPECT_EQ(LinesWith(r.err, "could not write the exit report").size(), 1u) << mode << r.err;
    }
  }
  EXPECT_GT(written, 0) << "no headroom up to 32 MiB was enough for a report";
}

// gpuwatch keeps 3 of the host's descriptors for the whole run: the two ends
// of the one pipe its signal handlers and callbacks wake its thread through,
// and the live view's socket (it kept 7: three pipes and the socket). Report
// files are open only while they are written or read back.
TEST(Reliability, GpuwatchKeepsThreeDescriptors) {
  ScopedTempDir dir;
  const auto count = [](const ProcessResult& r) {
    int n = -1;
    EXPECT_EQ(std::sscanf(r.out.c_str(), "fds %d", &n), 1) << r.out << r.err;
    return n;
  };
  const ProcessResult without = RunProcess({kPrograms + "/count_fds"}, SimEnv(), dir.path());
  const ProcessResult with =
      RunProcess({kPrograms + "/count_fds"}, LeakyLoopEnv(dir.path() + "/report.json"), dir.path());
  EXPECT_EQ(without.exit_code, 0);
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(count(with) - count(without), 3) << without.out << with.out;
}

}  // namespace
}  // namespace gpuwatch::testing
