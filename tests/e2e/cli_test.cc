// End-to-end tests of the `gpuwatch` command on reports of programs run on the
// CUDA simulator: run (exit statuses, where the reports went), report, diff,
// check (leaks, suppressions, peak, growth, baselines), merge, and the exit
// status 2 with a clear message for input that is not a readable report.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string LeakyAt() {
  // leaky_loop's leak: the cudaMalloc in AllocateHistory().
  const int line = LineOf(kSourceDir + "/examples/leaky_loop.cu", "// leaks");
  EXPECT_GT(line, 0);
  return "leaky_loop.cu:" + std::to_string(line);
}

std::string GrowthAt(const std::string& marker) { return ProgramLine("growth_loop.cu", marker); }

// Runs a program under `gpuwatch run` and returns the report's path.
std::string Traced(const ScopedTempDir& dir, const std::string& name,
                   const std::vector<std::string>& argv) {
  const std::string out = dir.path() + "/" + name + ".json";
  std::vector<std::string> args = {kCli, "run", "-o", out, "--sample-ms", "0", "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  const ProcessResult r = RunProcess(args, SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

std::string GrowthLoop(const ScopedTempDir& dir, const std::string& name, int iterations,
                       uint64_t leak, const std::string& mode = "") {
  std::vector<std::string> argv = {kPrograms + "/growth_loop", std::to_string(iterations),
                                   std::to_string(leak)};
  if (!mode.empty()) argv.push_back(mode);
  return Traced(dir, name, argv);
}

ProcessResult Cli(const ScopedTempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kCli);
  return RunProcess(args, {}, dir.path());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- run ---------------------------------------------------------------------

TEST(Run, PassesExitStatusesThrough) {
  ScopedTempDir dir;
  for (const int status : {0, 3}) {
    const std::string out = dir.path() + "/r" + std::to_string(status) + ".json";
    const ProcessResult plain =
        RunProcess({kPrograms + "/exit_with", std::to_string(status)}, SimEnv(), dir.path());
    const ProcessResult r =
        RunProcess({kCli, "run", "-o", out, "--", kPrograms + "/exit_with", std::to_string(status)},
                   SimEnv(), dir.path());
    EXPECT_EQ(r.exit_code, status) << r.err;
    EXPECT_EQ(r.out, plain.out);
    // Where the report went is said once, by the command, after the child.
    EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: report written to " + out).size(), 1u) << r.err;
    EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: report written to").size(), 1u) << r.err;
    EXPECT_TRUE(ReadJson(out).is_object());
  }
  const ProcessResult killed =
      RunProcess({kCli, "run", "--", "sh", "-c", "kill -TERM $$"}, SimEnv(), dir.path());
  EXPECT_FALSE(killed.signaled);
  EXPECT_EQ(killed.exit_code, 128 + 15);
  EXPECT_TRUE(Contains(killed.err, "terminated by signal 15")) << killed.err;
}

TEST(Run, SaysWhenNoReportWasWritten) {
  ScopedTempDir dir;
  const ProcessResult r =
      RunProcess({kCli, "run", "--", "sh", "-c", "exit 0"}, SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: no report was written").size(), 1u) << r.err;
  EXPECT_TRUE(dir.List().empty());
}

// A program that used CUDA and then ran another in its place (exec): the
// command says so, not that it ended without running exit handlers; a
// second exec'd image that uses CUDA gets its own report.
TEST(Run, SaysWhenAProgramReplacedItselfByExec) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/r.json";
  const ProcessResult r = RunProcess({kCli, "run", "-o", out, "--", kPrograms + "/exit_with", "0",
                                      "exec", "/bin/sh", "-c", "exit 5"},
                                     SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: " + kPrograms +
                                         "/exit_with used CUDA, then ran another program in its "
                                         "place (exec) before gpuwatch could write its exit "
                                         "report")
                .size(),
            1u)
      << r.err;
  EXPECT_FALSE(Contains(r.err, "without running exit handlers")) << r.err;
  const ProcessResult twice = RunProcess({kCli, "run", "-o", out, "--", kPrograms + "/exit_with",
                                          "0", "exec", kPrograms + "/exit_with", "4"},
                                         SimEnv(), dir.path());
  EXPECT_EQ(twice.exit_code, 4) << twice.err;
  EXPECT_TRUE(Contains(twice.err, "ran another program in its place (exec)")) << twice.err;
  EXPECT_EQ(LinesStartingWith(twice.err, "gpuwatch: report written to " + out).size(), 1u)
      << twice.err;
}

TEST(Run, ForkedChildReportIsListedToo) {
  ScopedTempDir dir;
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", dir.path() + "/f.%p.json", "--", kPrograms + "/fork_child"},
                 SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: report written to").size(), 2u) << r.err;
}

TEST(Run, ExitCodeOption) {
  ScopedTempDir dir;
  const ProcessResult r = RunProcess({kCli, "run", "-o", dir.path() + "/r.json", "--exitcode", "42",
                                      "--", kExamples + "/leaky_loop"},
                                     SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 42) << r.err;
}

// --- check -------------------------------------------------------------------

// What a suppression took is said at run time (issue 36, friction 5): the
// summary lists the suppressed site apart, with its rule, never as "still
// live", then LeakSanitizer's "Suppressions used" table; `gpuwatch report`
// ends its leaks with the same table.
TEST(Run, SaysWhatTheSuppressionsTookAsLeakSanitizerDoes) {
  ScopedTempDir dir;
  const std::string supp = dir.path() + "/ci.supp";
  std::ofstream(supp) << "# the history is kept on purpose\nleak:AllocateHistory\nleak:Unused\n";
  const std::string out = dir.path() + "/r.json";
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", out, "--suppressions", supp, "--", kExamples + "/leaky_loop"},
                 SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(LinesStartingWith(r.err, "gpuwatch: still live").empty()) << r.err;
  const std::vector<std::string> lines = LinesStartingWith(r.err, "gpuwatch: suppressed");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0],
            "gpuwatch: suppressed, still live (not counted as leaked): 2.0 MiB of device memory in "
            "8 allocations from 1 site");
  EXPECT_EQ(LineWith(r.err, {"gpuwatch:      2.0 MiB in      8 at " + LeakyAt()}),
            "gpuwatch:      2.0 MiB in      8 at " + LeakyAt() +
                " ((anonymous namespace)::AllocateHistory()) by leak:AllocateHistory")
      << r.err;
  const std::string table =
      "Suppressions used:\n"
      "     count        bytes  suppression\n"
      "         8      2.0 MiB  leak:AllocateHistory\n";
  std::string prefixed;
  for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1) {
    prefixed += "gpuwatch: " + table.substr(at, end - at + 1);
  }
  EXPECT_TRUE(Contains(r.err, prefixed)) << r.err;
  EXPECT_EQ(ReadJson(out)["leaks"]["device"]["leaked_bytes"], 0);
  const ProcessResult text = Cli(dir, {"report", out});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "No device memory leaked.\nSuppressed: 2.0 MiB\n")) << text.out;
  EXPECT_TRUE(Contains(text.out, "\n\n" + table)) << text.out;
  // Without suppressions: no table, and the site is still live.
  const ProcessResult plain =
      RunProcess({kCli, "run", "-o", out, "--", kExamples + "/leaky_loop"}, SimEnv(), dir.path());
  EXPECT_FALSE(Contains(plain.err, "Suppressions used")) << plain.err;
  EXPECT_EQ(LinesStartingWith(plain.err, "gpuwatch: still live: 2.0 MiB of device memory").size(),
            1u)
      << plain.err;
  EXPECT_FALSE(Contains(Cli(dir, {"report", out}).out, "Suppressions used"));
}

TEST(Check, FailsOnALeakingProgramAndPassesOnACleanOne) {
  ScopedTempDir dir;
  const std::string leaky = Traced(dir, "leaky", {kExamples + "/leaky_loop"});
  const ProcessResult fail = Cli(dir, {"check", leaky});
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  const std::string rule = LineWith(fail.out, {"FAIL", "leak:"});
  EXPECT_TRUE(Contains(rule, "2.0 MiB of device memory leaked in 8 allocations")) << fail.out;
  EXPECT_TRUE(Contains(rule, "(limit 0 B)")) << rule;
  EXPECT_FALSE(LineWith(fail.out, {"2.0 MiB in 8 at " + LeakyAt(), "AllocateHistory"}).empty())
      << fail.out;
  EXPECT_TRUE(Contains(fail.out, "gpuwatch check: FAILED: 1 of 1 rule broken")) << fail.out;

  const std::string clean = GrowthLoop(dir, "clean", 5, 0);
  const ProcessResult pass = Cli(dir, {"check", clean});
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  EXPECT_TRUE(Contains(pass.out, "gpuwatch check: passed")) << pass.out;
}

TEST(Check, SuppressionTurnsTheFailureOff) {
  ScopedTempDir dir;
  const std::string leaky = Traced(dir, "leaky", {kExamples + "/leaky_loop"});
  const std::string supp = dir.path() + "/ci.supp";
  std::ofstream(supp) << "# the history is kept on purpose\nleak:AllocateHistory\n";
  const ProcessResult r = Cli(dir, {"check", leaky, "--suppressions", supp});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "note: 2.0 MiB suppressed by leak:AllocateHistory")) << r.out;
  // A pattern on the file name works as well; one that matches nothing does not.
  std::ofstream(supp) << "leak:leaky_loop.cu\n";
  EXPECT_EQ(Cli(dir, {"check", leaky, "--suppressions", supp}).exit_code, 0);
  std::ofstream(supp) << "leak:SomethingElse\n";
  EXPECT_EQ(Cli(dir, {"check", leaky, "--suppressions", supp}).exit_code, 1);
}

TEST(Check, LeakAndPeakLimitsAcceptSizeSuffixes) {
  ScopedTempDir dir;
  const std::string leaky = Traced(dir, "leaky", {kExamples + "/leaky_loop"});
  EXPECT_EQ(Cli(dir, {"check", leaky, "--max-leak", "2MiB"}).exit_code, 0);
  EXPECT_EQ(Cli(dir, {"check", leaky, "--max-leak", "2097151"}).exit_code, 1);
  EXPECT_EQ(Cli(dir, {"check", leaky, "--max-leak", "4MiB", "--max-peak", "6GiB"}).exit_code, 0);
  // The peak is 7 x 256 KiB + 4 MiB.
  const ProcessResult peak = Cli(dir, {"check", leaky, "--max-leak", "4MiB", "--max-peak", "4MiB"});
  EXPECT_EQ(peak.exit_code, 1);
  EXPECT_FALSE(LineWith(peak.out, {"FAIL", "peak:", "device peak 5.8 MiB (limit 4.0 MiB)"}).empty())
      << peak.out;
  const ProcessResult bad = Cli(dir, {"check", leaky, "--max-leak", "2MB"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(Contains(bad.err, "--max-leak: invalid size \"2MB\"")) << bad.err;
}

TEST(Check, GrowthSuspectOverTheLimitFails) {
  ScopedTempDir dir;
  // Grows 1 MiB per mark for 8 marks, all freed before exit: no leak.
  const std::string report = GrowthLoop(dir, "grow", 8, kMiB, "free-at-end");
  EXPECT_EQ(Cli(dir, {"check", report}).exit_code, 0);
  const ProcessResult r = Cli(dir, {"check", report, "--max-growth", "4MiB"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(LineWith(r.out, {"grows by 1.0 MiB per mark: 1.0 MiB -> 8.0 MiB over marks 1-8",
                                GrowthAt("GROWTH:leak")})
                   .empty())
      << r.out;
  EXPECT_EQ(Cli(dir, {"check", report, "--max-growth", "8MiB"}).exit_code, 0);
  std::ofstream(dir.path() + "/g.supp") << "growth:growth_loop.cu\n";
  EXPECT_EQ(
      Cli(dir, {"check", report, "--max-growth", "4MiB", "--suppressions", dir.path() + "/g.supp"})
          .exit_code,
      0);
}

TEST(Check, GrowthOverABaseline) {
  ScopedTempDir dir;
  const std::string base = GrowthLoop(dir, "base", 5, kMiB);
  const std::string now = GrowthLoop(dir, "new", 10, kMiB);
  const ProcessResult r =
      Cli(dir, {"check", now, "--baseline", base, "--max-growth", "10%", "--max-leak", "1GiB"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_FALSE(LineWith(r.out, {"FAIL", "growth of leaks:", "leaked device memory 10.0 MiB",
                                "baseline 5.0 MiB", "+100.0%"})
                   .empty())
      << r.out;
  EXPECT_FALSE(
      LineWith(r.out, {"+5.0 MiB (5.0 MiB -> 10.0 MiB) at " + GrowthAt("GROWTH:leak")}).empty())
      << r.out;
  EXPECT_EQ(
      Cli(dir, {"check", now, "--baseline", base, "--max-growth", "150%", "--max-leak", "1GiB"})
          .exit_code,
      0);
  const ProcessResult missing = Cli(dir, {"check", now, "--baseline", base});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(Contains(missing.err, "--baseline needs --max-growth")) << missing.err;
}

// --- report, diff, merge ------------------------------------------------------

TEST(Report, TextNamesLeaksGrowthPeakAndTransfersWithFileAndLine) {
  ScopedTempDir dir;
  const std::string leaky = Traced(dir, "leaky", {kExamples + "/leaky_loop"});
  const ProcessResult r = Cli(dir, {"report", leaky});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Leaked device memory: 2.0 MiB in 8 allocations from 1 site"))
      << r.out;
  EXPECT_FALSE(LineWith(r.out, {"2.0 MiB", LeakyAt(), "AllocateHistory"}).empty()) << r.out;
  EXPECT_TRUE(Contains(r.out, "Peak: 5.8 MiB of device memory")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Transfers:")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Growth")) << r.out;

  const std::string grow = GrowthLoop(dir, "grow", 6, 256 * kKiB);
  const ProcessResult g = Cli(dir, {"report", grow});
  EXPECT_FALSE(LineWith(g.out, {"+256.0 KiB/mark", GrowthAt("GROWTH:leak")}).empty()) << g.out;

  const ProcessResult collapsed = Cli(dir, {"report", leaky, "--format", "collapsed"});
  EXPECT_EQ(collapsed.exit_code, 0);
  EXPECT_TRUE(Contains(collapsed.out, "main;(anonymous namespace)::AllocateHistory() 2097152\n"))
      << collapsed.out;
  const ProcessResult as_json = Cli(dir, {"report", leaky, "--format", "json"});
  EXPECT_EQ(ReadJson(leaky), json::parse(as_json.out));
}

TEST(Diff, FiveAndTenIterationsShowTheGrowthAtItsSite) {
  ScopedTempDir dir;
  const std::string five = GrowthLoop(dir, "five", 5, kMiB);
  const std::string ten = GrowthLoop(dir, "ten", 10, kMiB);
  const ProcessResult r = Cli(dir, {"diff", five, ten});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(
      LineWith(r.out, {"device live at exit", "5.0 MiB", "10.0 MiB", "+5.0 MiB", "+100.0%"})
          .empty())
      << r.out;
  EXPECT_FALSE(
      LineWith(r.out, {"grew", "+5.0 MiB", "5.0 MiB -> 10.0 MiB", GrowthAt("GROWTH:leak")}).empty())
      << r.out;
  // Scratch buffers: 5 MiB more allocated in five more iterations.
  EXPECT_FALSE(LineWith(r.out, {"allocations", "10", "20", "+10"}).empty()) << r.out;
  // And the other way round it shrank.
  const ProcessResult back = Cli(dir, {"diff", ten, five});
  EXPECT_FALSE(LineWith(back.out, {"shrank", "-5.0 MiB", GrowthAt("GROWTH:leak")}).empty())
      << back.out;
}

TEST(Merge, TotalsAreExactSums) {
  ScopedTempDir dir;
  const std::vector<std::string> inputs = {GrowthLoop(dir, "a", 4, kMiB),
                                           GrowthLoop(dir, "b", 5, kMiB),
                                           Traced(dir, "c", {kExamples + "/leaky_loop"})};
  const std::string out = dir.path() + "/merged.json";
  std::vector<std::string> args = {"merge"};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), {"-o", out});
  const ProcessResult r = Cli(dir, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json merged = ReadJson(out);
  ASSERT_TRUE(merged.is_object());
  EXPECT_EQ(merged["trigger"], "merge");
  ASSERT_EQ(merged["processes"].size(), 3u);
  uint64_t current = 0;
  uint64_t peak = 0;
  uint64_t allocs = 0;
  uint64_t launches = 0;
  for (const std::string& in : inputs) {
    const json report = ReadJson(in);
    current += report["totals"]["device_current_bytes"].get<uint64_t>();
    peak += report["totals"]["device_peak_bytes"].get<uint64_t>();
    allocs += report["totals"]["kinds"]["device"]["allocs"].get<uint64_t>();
    launches += report["totals"]["kernel_launches"].get<uint64_t>();
  }
  EXPECT_EQ(current, 4 * kMiB + 5 * kMiB + 2 * kMiB);
  EXPECT_EQ(merged["totals"]["device_current_bytes"], current);
  EXPECT_EQ(merged["totals"]["device_peak_bytes"], peak);
  EXPECT_EQ(merged["totals"]["kinds"]["device"]["allocs"], allocs);
  EXPECT_EQ(merged["totals"]["kernel_launches"], launches);
  EXPECT_EQ(merged["leaks"]["device"]["bytes"], current);
  EXPECT_EQ(merged["leaks"]["device"]["leaked_bytes"], current);
  // The growth_loop site is summed across its two processes.
  json site;
  for (const json& s : merged["leaks"]["device"]["sites"]) {
    if (s["location"] == GrowthAt("GROWTH:leak")) site = s;
  }
  ASSERT_TRUE(site.is_object()) << merged["leaks"].dump(1);
  EXPECT_EQ(site["bytes"], 9 * kMiB);
  EXPECT_EQ(site["count"], 9);
  EXPECT_EQ(site["processes"], 2);
  // Its allocations by size (sites[].sizes), added bucket by bucket: 9 of
  // 1 MiB, in the bucket up to 1 MiB.
  json allocated;
  for (const json& s : merged["sites"]) {
    if (s["location"] == GrowthAt("GROWTH:leak")) allocated = s;
  }
  ASSERT_TRUE(allocated.is_object()) << merged["sites"].dump(1);
  EXPECT_EQ(allocated["sizes"], json::array({0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0}));
  // Its growth: 1 MiB per mark in each process, 2 MiB per mark for the job.
  ASSERT_FALSE(merged["growth"]["suspects"].empty());
  EXPECT_EQ(merged["growth"]["suspects"][0]["rate"].get<double>(), 2.0 * kMiB);
  // The merged report is a report: check and report read it.
  EXPECT_EQ(Cli(dir, {"check", out, "--max-leak", "11MiB"}).exit_code, 0);
  EXPECT_EQ(Cli(dir, {"check", out, "--max-leak", "10MiB"}).exit_code, 1);
  const ProcessResult text = Cli(dir, {"report", out});
  EXPECT_TRUE(Contains(text.out, "merged from 3 processes")) << text.out;
  // One report per process.
  const ProcessResult twice = Cli(dir, {"merge", inputs[0], inputs[0], "-o", out + "2"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_TRUE(Contains(twice.err, "one report per process")) << twice.err;
}

TEST(Merge, WritesTheCurrentVersionWithAFrameTable) {
  ScopedTempDir dir;
  const std::string a = GrowthLoop(dir, "a", 4, kMiB);
  const std::string c = Traced(dir, "c", {kExamples + "/leaky_loop"});
  const std::string out = dir.path() + "/merged.json";
  const ProcessResult r = Cli(dir, {"merge", a, c, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // As written, not as the tools read it (ReadJson inlines the frame table).
  json merged = json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(merged.is_object());
  const json input = json::parse(ReadFile(a), nullptr, /*allow_exceptions=*/false);
  EXPECT_EQ(merged["version"], 2);
  EXPECT_EQ(merged["version"], input["version"]);  // what the library writes
  ASSERT_TRUE(merged["frame_table"].is_array());
  EXPECT_FALSE(merged["frame_table"].empty());
  size_t sites = 0;
  for (const json* list : {&merged["leaks"]["device"]["sites"], &merged["sites"],
                           &merged["peak"]["sites"], &merged["growth"]["suspects"]}) {
    for (const json& site : *list) {
      ++sites;
      EXPECT_FALSE(site.contains("frames")) << site.dump();
      ASSERT_TRUE(site.contains("stack")) << site.dump();
      for (const json& index : site["stack"]) EXPECT_LT(index, merged["frame_table"].size());
    }
  }
  EXPECT_GT(sites, 0u);
  // Each distinct frame once.
  std::set<std::string> frames;
  for (const json& f : merged["frame_table"]) EXPECT_TRUE(frames.insert(f.dump()).second) << f;
  // The tools still find each site's file:line and functions through it.
  const ProcessResult text = Cli(dir, {"report", out});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_FALSE(LineWith(text.out, {"2.0 MiB", LeakyAt(), "AllocateHistory"}).empty()) << text.out;
  EXPECT_FALSE(LineWith(text.out, {"4.0 MiB", GrowthAt("GROWTH:leak")}).empty()) << text.out;
  const ProcessResult collapsed = Cli(dir, {"report", out, "--format", "collapsed"});
  EXPECT_TRUE(Contains(collapsed.out, "main;(anonymous namespace)::AllocateHistory() 2097152\n"))
      << collapsed.out;
}

// --- bad input and arguments ---------------------------------------------------

// A report no subcommand may read: its file name, its contents, and what the
// line that refuses it must say.
struct BadReport {
  std::string name;
  std::string contents;
  std::string message;
};

// Writes each of `cases` into `dir` and gives it to report, check, diff and
// merge (`good` on the other side): each exits 2 with one line "gpuwatch
// COMMAND: PATH: ..." that says the case's message; with `nothing_else`, that
// line is all it writes.
void ExpectEveryCommandRefuses(const ScopedTempDir& dir, const std::string& good,
                               const std::vector<BadReport>& cases, bool nothing_else) {
  for (const BadReport& c : cases) {
    const std::string path = dir.path() + "/" + c.name;
    std::ofstream(path) << c.contents;
    const std::vector<std::vector<std::string>> commands = {
        {"report", path},
        {"check", path},
        {"diff", good, path},
        {"merge", good, path, "-o", dir.path() + "/m.json"}};
    for (const auto& args : commands) {
      const ProcessResult r = Cli(dir, args);
      EXPECT_EQ(r.exit_code, 2) << c.name << " " << args[0];
      if (nothing_else) {
        EXPECT_EQ(r.out, "") << c.name << " " << args[0];
      }
      const auto lines = LinesStartingWith(r.err, "gpuwatch " + args[0] + ": " + path + ": ");
      ASSERT_EQ(lines.size(), 1u) << c.name << " " << args[0] << ": " << r.err.substr(0, 500);
      EXPECT_TRUE(Contains(lines[0], c.message)) << lines[0];
      if (nothing_else) {
        EXPECT_EQ(r.err, lines[0] + "\n") << c.name << " " << args[0];
      }
    }
  }
}

TEST(BadInput, TruncatedForeignOrNewerReportsGiveExitTwoAndNameTheProblem) {
  ScopedTempDir dir;
  const std::string good = Traced(dir, "good", {kExamples + "/leaky_loop"});
  const std::string text = ReadFile(good);
  json newer = ReadJson(good);
  newer["version"] = 99;
  const std::vector<BadReport> cases = {
      {"truncated.json", text.substr(0, text.size() / 2), "truncated"},
      {"foreign.json", R"({"traceEvents": []})", "not a gpuwatch report"},
      {"other-schema.json", R"({"schema": "heaptrack", "version": 1})",
       "not a gpuwatch report (its schema is \"heaptrack\")"},
      {"newer.json", newer.dump(), "report version 99 is newer than this gpuwatch reads"},
      {"text.json", "hello\n", "not JSON"},
      {"empty.json", "", "empty file"},
  };
  ASSERT_NO_FATAL_FAILURE(ExpectEveryCommandRefuses(dir, good, cases, /*nothing_else=*/false));
  const ProcessResult missing = Cli(dir, {"check", dir.path() + "/nope.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(Contains(missing.err, "nope.json: cannot read: No such file or directory"))
      << missing.err;
}

// Reports a hostile or broken writer could leave: every subcommand refuses
// them with exit 2 and one line naming the file, the field and the problem.
TEST(BadInput, HostileReportsGiveExitTwoAndNameTheField) {
  ScopedTempDir dir;
  const std::string good = Traced(dir, "good", {kExamples + "/leaky_loop"});
  const json report = ReadJson(good);
  ASSERT_TRUE(report.is_object());
  json negative = report;
  negative["leaks"]["device"]["sites"][0]["bytes"] = -4096;
  json wrong_type = report;
  wrong_type["totals"]["device_peak_bytes"] = "6 MiB";
  json huge = report;
  huge["peak"]["device_bytes"] = 1e19;
  json long_string = report;
  long_string["leaks"]["device"]["sites"][0]["location"] = std::string(2 << 20, 'x');
  std::string deep = report.dump();
  deep.insert(deep.size() - 1, R"(, "x": )" + std::string(100, '[') + std::string(100, ']'));
  std::string nan = report.dump();
  nan.insert(nan.size() - 1, R"(, "x": NaN)");
  std::string overflow = report.dump();
  overflow.insert(overflow.size() - 1, R"(, "x": 1e999)");
  const std::vector<BadReport> cases = {
      {"negative.json", negative.dump(),
       "malformed gpuwatch report: leaks.device.sites[0].bytes is -4096, expected a count (not "
       "negative)"},
      {"wrong-type.json", wrong_type.dump(),
       "malformed gpuwatch report: totals.device_peak_bytes is \"6 MiB\", expected a count"},
      {"huge.json", huge.dump(),
       "malformed gpuwatch report: peak.device_bytes is 1e+19, expected a count (an integer)"},
      {"long-string.json", long_string.dump(),
       "malformed gpuwatch report: leaks.device.sites[0].location is a string of 2097152 bytes"},
      {"deep.json", deep, "not a gpuwatch report: nested deeper than 64 levels"},
      {"nan.json", nan, "not JSON (parse error at byte"},
      {"overflow.json", overflow,
       "not a gpuwatch report: a number is out of range (number overflow parsing '1e999')"},
  };
  ExpectEveryCommandRefuses(dir, good, cases, /*nothing_else=*/true);
}

// What is not a regular file (a directory, /dev/zero, a FIFO nobody writes
// to), or is larger than the limit, is refused before it is read: a report
// and a suppressions file alike, exit 2 and one line saying what it is.
// (/dev/zero used to grow the tool to gigabytes, a FIFO hung it, a directory
// was an "empty file" or, as suppressions, passed as if empty.)
TEST(BadInput, WhatIsNotARegularFileOrIsTooLargeIsRefusedUnread) {
  ScopedTempDir dir;
  const std::string good = Traced(dir, "good", {kExamples + "/leaky_loop"});
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const struct {
    std::string path;
    std::string what;
  } cases[] = {{dir.path(), "a directory, not a file"},
               {"/dev/zero", "a device, not a regular file"},
               {fifo, "a FIFO, not a regular file"}};
  for (const auto& c : cases) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"report", c.path}, {"check", good, "--suppressions", c.path}}) {
      const ProcessResult r = Cli(dir, args);
      EXPECT_EQ(r.exit_code, 2) << c.path << " " << args[0];
      EXPECT_TRUE(Contains(r.err, c.path + ": cannot read: " + c.what) ||
                  Contains(r.err, "cannot read suppressions file " + c.path + ": " + c.what))
          << r.err;
    }
  }
  const ProcessResult big =
      RunProcess({kCli, "report", good}, {{"GPUWATCH_REPORT_MAX_BYTES", "100"}}, dir.path());
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_TRUE(Contains(big.err, good + ": cannot read: " + std::to_string(ReadFile(good).size()) +
                                    " bytes, over the limit of 100 (GPUWATCH_REPORT_MAX_BYTES "
                                    "raises it)"))
      << big.err;
  const std::string supp = dir.path() + "/big.supp";
  std::ofstream(supp) << std::string((1 << 20) + 1, '#');
  const ProcessResult r = Cli(dir, {"check", good, "--suppressions", supp});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "over the limit of 1048576")) << r.err;
}

// GPUWATCH_SUPPRESSIONS naming what is not a regular file: one line, nothing
// suppressed, the host runs as without it (/dev/zero used to exhaust memory
// before main, a FIFO to hang the host, a directory to be ignored silently).
TEST(BadInput, SuppressionsThatAreNotAFileCostOneLine) {
  ScopedTempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& supp : {dir.path(), std::string("/dev/zero"), fifo}) {
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r =
        RunProcess({kExamples + "/leaky_loop"}, PreloadEnv(out, {{"GPUWATCH_SUPPRESSIONS", supp}}),
                   dir.path());
    EXPECT_EQ(r.exit_code, 0) << supp << r.err;
    EXPECT_EQ(r.out, "leaky_loop: 8 steps done, 8 history buffers kept\n") << supp;
    EXPECT_TRUE(Contains(r.err, "cannot read suppressions file " + supp + ": ")) << r.err;
    EXPECT_TRUE(Contains(r.err, "; nothing is suppressed")) << r.err;
    EXPECT_EQ(ReadJson(out)["leaks"]["device"]["sites"].size(), 1u) << supp;
  }
}

// merge never writes over one of its inputs, by the same path or another.
TEST(BadInput, MergeRefusesToOverwriteAnInput) {
  ScopedTempDir dir;
  const std::string a = Traced(dir, "a", {kExamples + "/leaky_loop"});
  const std::string b = Traced(dir, "b", {kExamples + "/leaky_loop"});
  const std::string before = ReadFile(a);
  for (const std::string& output : {a, dir.path() + "/./a.json"}) {
    const ProcessResult r = Cli(dir, {"merge", a, b, "-o", output});
    EXPECT_EQ(r.exit_code, 2) << output;
    EXPECT_TRUE(Contains(r.err, "is the input " + a)) << r.err;
  }
  EXPECT_EQ(ReadFile(a), before);
}

TEST(BadInput, WrongArgumentsGiveExitTwo) {
  ScopedTempDir dir;
  EXPECT_EQ(Cli(dir, {"check"}).exit_code, 2);
  EXPECT_EQ(Cli(dir, {"report", "x.json", "--format", "xml"}).exit_code, 2);
  EXPECT_EQ(Cli(dir, {"merge", "x.json"}).exit_code, 2);
  EXPECT_EQ(Cli(dir, {"frobnicate"}).exit_code, 2);
  std::ofstream(dir.path() + "/bad.supp") << "leak:ok\nleek:typo\n";
  const std::string good = Traced(dir, "good", {kPrograms + "/growth_loop", "2", "0"});
  const ProcessResult r = Cli(dir, {"check", good, "--suppressions", dir.path() + "/bad.supp"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "bad.supp:2: unknown suppression type \"leek\"")) << r.err;
}

// A newcomer's slips (issue 36, friction 9): a mistyped command gets the
// nearest one, and a growth limit without a unit is refused, not taken as
// bytes.
TEST(BadInput, AMistypedCommandIsNamedWithTheNearestOne) {
  ScopedTempDir dir;
  const ProcessResult typo = Cli(dir, {"repotr", "x.json"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err, "gpuwatch: unknown command \"repotr\"; did you mean \"report\"?\n");
  EXPECT_EQ(Cli(dir, {"chek", "x.json"}).err,
            "gpuwatch: unknown command \"chek\"; did you mean \"check\"?\n");
  const ProcessResult far = Cli(dir, {"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err,
            "gpuwatch: unknown command \"frobnicate\" (the commands: run, report, diff, check, "
            "merge, top, why, exporter)\n");
}

TEST(BadInput, AGrowthLimitNeedsAUnitOrAPercentage) {
  ScopedTempDir dir;
  // Grows 1 MiB per mark for 8 marks, all freed before exit: no leak.
  const std::string report = GrowthLoop(dir, "grow", 8, kMiB, "free-at-end");
  for (const char* bare : {"10", "0", "1.5"}) {
    const ProcessResult r = Cli(dir, {"check", report, "--max-growth", bare});
    EXPECT_EQ(r.exit_code, 2) << bare;
    EXPECT_EQ(r.err, std::string("gpuwatch check: --max-growth: invalid limit \"") + bare +
                         "\" (expected a percentage such as 10% or a size with its unit such as "
                         "0B or 64MiB)\n")
        << r.err;
  }
  EXPECT_EQ(Cli(dir, {"check", report, "--max-growth", "0B"}).exit_code, 1);
  EXPECT_EQ(Cli(dir, {"check", report, "--max-growth", "10 B"}).exit_code, 1);
  EXPECT_EQ(Cli(dir, {"check", report, "--max-growth", "8MiB"}).exit_code, 0);
}

TEST(Help, EverySubcommandHasHelp) {
  ScopedTempDir dir;
  for (const char* command : {"run", "report", "diff", "check", "merge"}) {
    const ProcessResult r = Cli(dir, {command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_TRUE(Contains(r.out, "Usage")) << command << ": " << r.out;
  }
  EXPECT_TRUE(Contains(Cli(dir, {"check", "--help"}).out, "--max-growth"));
}

}  // namespace
}  // namespace gpuwatch::testing
