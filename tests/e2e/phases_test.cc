// End-to-end tests of phases: NVTX ranges (the toolkit's nvtx3 headers,
// compiled into tests/e2e/programs/nvtx_phases.cu) and gpuwatch_phase_push
// reported per path, with exact bytes, under `gpuwatch run`, LD_PRELOAD and
// the driver's injection, and with another tool named by
// NVTX_INJECTION64_PATH.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string At(const std::string& name) { return ProgramLine("nvtx_phases.cu", "// AT:" + name); }

json UnderGpuwatchRun(ProcessResult* process,
                      const std::map<std::string, std::string>& extra = {}) {
  return RunAttached("nvtx_phases", Attach::kRun, extra, process);
}

// The report's phases by path.
std::map<std::string, json> Paths(const json& report) {
  std::map<std::string, json> paths;
  if (!report.contains("phases")) return paths;
  for (const json& p : report["phases"]["paths"]) paths[p["path"].get<std::string>()] = p;
  return paths;
}

// What the program does in each range (its comments say why).
struct Expected {
  const char* path;
  uint64_t allocs;
  uint64_t alloc_bytes;
  uint64_t live_bytes;
  uint64_t peak_bytes;
  const char* peak_at;  // the AT: marker of the allocation that reached the peak; "": none
  uint64_t launches;
  // The AT: marker of the site whose allocations made in the path (or
  // nested in it) held the most at the peak, and their bytes; "": none.
  const char* top_at = "";
  uint64_t top_bytes = 0;
};

const std::vector<Expected>& ExpectedPaths() {
  static const std::vector<Expected> paths = {
      {"setup", 1, 8 * kMiB, 8 * kMiB, 8 * kMiB, "setup", 0, "setup", 8 * kMiB},
      // A step's peak: the 8 MiB of setup, 4 of forward and 2 of backward;
      // of what the step allocated, forward's 4 MiB held the most (setup's
      // 8 MiB was allocated before it opened).
      {"step", 0, 0, 0, 14 * kMiB, "backward", 0, "forward", 4 * kMiB},
      {"step/forward", 3, 12 * kMiB, 0, 12 * kMiB, "forward", 3, "forward", 4 * kMiB},
      {"step/backward", 3, 6 * kMiB, 0, 14 * kMiB, "backward", 0, "backward", 2 * kMiB},
      // Opened with the 8 MiB of setup live.
      {"io", 0, 0, 0, 8 * kMiB, "", 0},
      {"loader:batch", 1, 3 * kMiB, 3 * kMiB, 11 * kMiB, "batch", 0, "batch", 3 * kMiB},
      {"worker", 1, kMiB, kMiB, 12 * kMiB, "worker", 0, "worker", kMiB},
      {"outer", 0, 0, 0, 12 * kMiB, "", 0},
      {"outer/loader:inner", 0, 0, 0, 12 * kMiB, "", 0},
      // Reopened as a path of its own when "outer" closed under it.
      {"loader:inner", 1, kMiB / 2, kMiB / 2, 12 * kMiB + kMiB / 2, "inner", 0, "inner", kMiB / 2},
      {"api", 1, kMiB / 4, kMiB / 4, 12 * kMiB + 3 * kMiB / 4, "api", 0, "api", kMiB / 4},
      // Start/end ranges: the whole run up to "api", and "load", from before
      // the worker starts to after its 3 MiB (all threads' allocations count).
      {"run", 0, 0, 0, 14 * kMiB, "backward", 0},
      {"load", 0, 0, 0, 11 * kMiB, "batch", 0},
      // 128 KiB kept at each of six marks.
      {"grow", 6, 6 * kMiB / 8, 6 * kMiB / 8, 13 * kMiB + kMiB / 2, "grow", 0, "grow",
       6 * kMiB / 8},
  };
  return paths;
}

void ExpectPaths(const json& report, bool with_api) {
  const std::map<std::string, json> paths = Paths(report);
  size_t expected_count = 0;
  for (const Expected& e : ExpectedPaths()) {
    const bool api = std::string(e.path) == "api" || std::string(e.path) == "grow";
    if (api && !with_api) continue;
    ++expected_count;
    SCOPED_TRACE(e.path);
    const auto it = paths.find(e.path);
    ASSERT_NE(it, paths.end()) << report["phases"].dump(1);
    const json& p = it->second;
    EXPECT_EQ(p["allocs"], e.allocs);
    EXPECT_EQ(p["alloc_bytes"], e.alloc_bytes);
    EXPECT_EQ(p["live_bytes"], e.live_bytes);
    EXPECT_EQ(p["live_count"], e.live_bytes != 0 ? e.allocs : 0);
    EXPECT_EQ(p["peak_bytes"], e.peak_bytes);
    EXPECT_EQ(p["launches"], e.launches);
    if (*e.peak_at != '\0') {
      EXPECT_EQ(p["peak_site"]["location"], At(e.peak_at));
    } else {
      EXPECT_FALSE(p.contains("peak_site")) << p.dump();
    }
    if (*e.top_at != '\0') {
      EXPECT_EQ(p["peak_top_site"]["location"], At(e.top_at));
      EXPECT_EQ(p["peak_top_site"]["bytes"], e.top_bytes);
    } else {
      EXPECT_FALSE(p.contains("peak_top_site")) << p.dump();
    }
    if (std::string(e.path) != "io") {
      EXPECT_EQ(p["copies"], json::object());
    }
  }
  EXPECT_EQ(paths.size(), expected_count) << report["phases"].dump(1);
  // Copies by direction in "io".
  EXPECT_EQ(paths.at("io")["copies"], json::parse(R"({"h2d": {"count": 2, "bytes": 2097152},
                            "d2h": {"count": 1, "bytes": 1048576}})"));
  const json& phases = report["phases"];
  EXPECT_EQ(phases["unbalanced_pops"], 2);
  EXPECT_EQ(phases["open_at_thread_exit"], 1);
  EXPECT_EQ(phases["too_deep"], 0);
  EXPECT_EQ(phases["names_dropped"], 0);
  EXPECT_EQ(phases["unmatched_ends"], 1);
  EXPECT_EQ(phases["ranges_not_tracked"], 0);
  EXPECT_EQ(phases["paths_dropped"], 0);
  EXPECT_EQ(phases["peak_sites_untracked"], 0);
  // Every leak site names the phase that allocated it.
  std::map<std::string, std::string> leak_phases;
  for (const json& site : report["leaks"]["device"]["sites"]) {
    leak_phases[site["location"].get<std::string>()] = site.value("phase", "");
  }
  std::map<std::string, std::string> expected_leaks = {{At("setup"), "setup"},
                                                       {At("batch"), "loader:batch"},
                                                       {At("worker"), "worker"},
                                                       {At("inner"), "loader:inner"}};
  if (with_api) {
    expected_leaks[At("api")] = "api";
    expected_leaks[At("grow")] = "grow";
  }
  EXPECT_EQ(leak_phases, expected_leaks);
  // The growth suspect names its phase too.
  if (with_api) {
    ASSERT_EQ(report["growth"]["suspects"].size(), 1u) << report["growth"].dump(1);
    EXPECT_EQ(report["growth"]["suspects"][0]["location"], At("grow"));
    EXPECT_EQ(report["growth"]["suspects"][0]["phase"], "grow");
  }
}

// The report's path of nvtx_phases run under `gpuwatch run` in `dir`, which
// must succeed: a failure (HasFailure()) when it did not.
std::string GoodReportIn(const ScopedTempDir& dir) {
  ProcessResult r;
  const std::string out = RunReportIn(dir, "nvtx_phases", &r);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(Phases, NvtxRangesUnderGpuwatchRun) {
  ProcessResult process;
  const json report = UnderGpuwatchRun(&process);
  ASSERT_TRUE(report.is_object()) << process.err;
  ExpectPaths(report, true);
  // The steps' ranges opened three times each; "setup" once (the program
  // links cudart: the preload constructor attached before main).
  const std::map<std::string, json> paths = Paths(report);
  EXPECT_EQ(paths.at("step")["opens"], 3);
  EXPECT_EQ(paths.at("step/forward")["opens"], 3);
  EXPECT_EQ(paths.at("setup")["opens"], 1);
  EXPECT_EQ(paths.at("step/forward")["depth"], 2);
}

TEST(Phases, NvtxRangesWithLdPreloadAlone) {
  ProcessResult process;
  const json report = RunAttached("nvtx_phases", Attach::kPreload, {}, &process);
  ASSERT_TRUE(report.is_object()) << process.err;
  ExpectPaths(report, true);
}

TEST(Phases, NvtxRangesWithTheDriversInjectionAlone) {
  // No preload: the driver loads gpuwatch, NVTX loads it again by its own
  // variable (set by hand here); gpuwatch_phase_push is not linked in.
  ProcessResult process;
  const json report = RunAttached("nvtx_phases", Attach::kInjection, {}, &process);
  ASSERT_TRUE(report.is_object()) << process.err;
  ExpectPaths(report, false);
  // "setup" opened before the first CUDA call, so before gpuwatch attached:
  // its allocation is in it all the same, its opening is not counted.
  EXPECT_EQ(Paths(report).at("setup")["opens"], 0);
}

// What the stand-in NVTX tool counts of nvtx_phases with gpuwatch preloaded:
// 19 pushes of the default domain and 20 pops (two with nothing open;
// "worker" is never popped; six "grow" ranges, opened when gpuwatch_mark is
// there), the loader's two ranges, its domain and string handles, and no
// handle it did not make.
constexpr char kOtherToolSawEverything[] =
    "pushes 19 pops 20 domain_pushes 2 domain_pops 2 handles 2 foreign 0\n";

// Runs nvtx_phases under `gpuwatch run` or with LD_PRELOAD alone, with
// `extra` and, when `other_tool`, NVTX_INJECTION64_PATH naming the stand-in
// tool (which writes its counts to dir/other.txt).
json RunNextToAnotherTool(const ScopedTempDir& dir, bool under_run, bool other_tool,
                          std::map<std::string, std::string> extra, ProcessResult* process) {
  if (other_tool) extra.merge(OtherNvtxToolEnv(dir));
  return RunAttached("nvtx_phases", under_run ? Attach::kRun : Attach::kPreload, extra, process);
}

// Only gpuwatch_phase_push reached gpuwatch: its one phase, "api".
void ExpectOnlyTheApiPhase(const json& report) {
  const std::map<std::string, json> paths = Paths(report);
  ASSERT_EQ(paths.size(), 1u) << report["phases"].dump(1);
  EXPECT_EQ(paths.begin()->first, "api");
  EXPECT_EQ(paths.begin()->second["live_bytes"], kMiB / 4);
}

// NVTX_INJECTION64_PATH naming another tool (as Nsight Systems sets it):
// gpuwatch takes the variable and calls that tool first, so both see every
// range, and the handles the program gets are the other tool's.
TEST(Phases, ChainsToAnotherNvtxTool) {
  for (const bool under_run : {true, false}) {
    SCOPED_TRACE(under_run ? "gpuwatch run" : "LD_PRELOAD");
    ScopedTempDir dir;
    ProcessResult process;
    const json report = RunNextToAnotherTool(dir, under_run, true, {}, &process);
    ASSERT_TRUE(report.is_object()) << process.err;
    ExpectPaths(report, true);
    EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: cannot chain"), std::vector<std::string>{});
    // GPUWATCH_NVTX_CHAIN, which gpuwatch sets for itself, is not a stranger.
    EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: unknown"), std::vector<std::string>{});
    EXPECT_EQ(ReadFile(dir.path() + "/other.txt"), kOtherToolSawEverything);
  }
}

// GPUWATCH_NVTX=0: gpuwatch neither sets NVTX_INJECTION64_PATH nor takes it
// from another tool, which gets every range from NVTX itself; only
// gpuwatch_phase_push phases are reported.
TEST(Phases, GpuwatchNvtxOffLeavesNvtxAlone) {
  for (const bool under_run : {true, false}) {
    for (const bool other_tool : {false, true}) {
      SCOPED_TRACE(std::string(under_run ? "gpuwatch run" : "LD_PRELOAD") +
                   (other_tool ? ", another tool" : ", no other tool"));
      ScopedTempDir dir;
      ProcessResult process;
      const json report =
          RunNextToAnotherTool(dir, under_run, other_tool, {{"GPUWATCH_NVTX", "0"}}, &process);
      ASSERT_TRUE(report.is_object()) << process.err;
      ExpectOnlyTheApiPhase(report);
      EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: NVTX"), std::vector<std::string>{});
      EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: ignoring"), std::vector<std::string>{});
      // The other tool, loaded by NVTX itself, sees what it sees when chained.
      if (other_tool) {
        EXPECT_EQ(ReadFile(dir.path() + "/other.txt"), kOtherToolSawEverything);
      }
    }
  }
}

// GPUWATCH_DISABLE=1 with NVTX_INJECTION64_PATH naming gpuwatch: the tool it
// would chain to still gets every range.
TEST(Phases, ADisabledGpuwatchStillHandsRangesToTheChainedTool) {
  EXPECT_EQ(ChainedToolAloneCounts("nvtx_phases"),
            "pushes 13 pops 14 domain_pushes 2 domain_pops 2 handles 2 foreign 0\n");
}

TEST(Phases, ALibraryWithoutNvtxsEntryPointIsNotChained) {
  const std::string other = kSimDir + "/libcupti.so";
  ProcessResult process;
  const json report = UnderGpuwatchRun(&process, {{"NVTX_INJECTION64_PATH", other}});
  ASSERT_TRUE(report.is_object()) << process.err;
  EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: cannot chain"),
            std::vector<std::string>{"gpuwatch: cannot chain NVTX to " + other +
                                     " (it has no InitializeInjectionNvtx2); NVTX ranges go to "
                                     "gpuwatch alone"});
  ExpectPaths(report, true);
}

TEST(Phases, AnUnreadableNvtxToolIsLeftAloneAndSaidSo) {
  ScopedTempDir dir;
  const std::string other = dir.path() + "/no_such_tool.so";
  ProcessResult process;
  const json report =
      RunAttached("nvtx_phases", Attach::kPreload, {{"NVTX_INJECTION64_PATH", other}}, &process);
  ASSERT_TRUE(report.is_object()) << process.err;
  EXPECT_EQ(LinesStartingWith(process.err, "gpuwatch: NVTX_INJECTION64_PATH"),
            std::vector<std::string>{"gpuwatch: NVTX_INJECTION64_PATH names " + other +
                                     ", which cannot be read: NVTX ranges are left to it, and "
                                     "this report has no NVTX phases"});
  ExpectOnlyTheApiPhase(report);
}

TEST(Phases, ReportRendersThePhaseTreeAndLeaksPhases) {
  ScopedTempDir dir;
  ProcessResult r;
  const std::string out = RunReportIn(dir, "nvtx_phases", &r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LinesStartingWith(r.err, "gpuwatch: phases:"),
            std::vector<std::string>{"gpuwatch: phases: 14 phases; highest peak 14.0 MiB in "
                                     "step/backward"});
  const ProcessResult text = RunProcess({kCli, "report", out}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  // Nested phases indented under their parent, in tree order.
  const std::string table = text.out.substr(text.out.find("Memory by phase"));
  const std::vector<std::string> rows = {
      "     8.0 MiB         0 B       0         0 B     3.0 MiB  io",
      "    14.0 MiB         0 B       0         0 B         0 B  step  (peak at " + At("backward") +
          "; most held by " + At("forward") + ", 4.0 MiB)",
      "    14.0 MiB     6.0 MiB       3         0 B         0 B    backward  (peak at " +
          At("backward") + "; most held by " + At("backward") + ", 2.0 MiB)",
      "    12.0 MiB    12.0 MiB       3         0 B         0 B    forward  (peak at " +
          At("forward") + "; most held by " + At("forward") + ", 4.0 MiB)",
      "  2 pops with no range open",
      "  1 range left open when a thread ended"};
  size_t from = 0;
  for (const std::string& row : rows) {
    const size_t at = table.find(row + "\n", from);
    EXPECT_NE(at, std::string::npos) << row << "\nin:\n" << table;
    if (row.find("step") != std::string::npos && at != std::string::npos) from = at;
  }
  EXPECT_NE(text.out.find("     8.0 MiB        1  [in setup] " + At("setup") + " (main)\n"),
            std::string::npos)
      << text.out;
}

TEST(Phases, AMalformedPhasesSectionIsRejectedByName) {
  ScopedTempDir dir;
  const std::string out = GoodReportIn(dir);
  ASSERT_FALSE(HasFailure());
  json report = ReadJson(out);
  report["phases"]["paths"][2]["peak_bytes"] = -5;
  ExpectMalformed(dir, report, "phases.paths[2].peak_bytes is -5, expected a count (not negative)");
}

TEST(Phases, CheckGatesThePeakOfAPhase) {
  ScopedTempDir dir;
  const std::string out = GoodReportIn(dir);
  ASSERT_FALSE(HasFailure());
  // A limit equal to the peak passes; a name matches a whole path or its
  // last parts.
  const ProcessResult pass =
      RunProcess({kCli, "check", out, "--max-leak", "14MiB", "--max-phase-peak", "forward=12MiB",
                  "--max-phase-peak", "step/backward=14MiB"},
                 {}, dir.path());
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  EXPECT_NE(pass.out.find("  ok    phase peak forward: 12.0 MiB while step/forward was open "
                          "(limit 12.0 MiB)\n"),
            std::string::npos)
      << pass.out;
  // Over the limit: every matching path over it, with where it was reached;
  // a phase the report does not have fails too.
  const ProcessResult fail =
      RunProcess({kCli, "check", out, "--max-leak", "14MiB", "--max-phase-peak",
                  "loader:inner=1MiB", "--max-phase-peak", "no_such_phase=1GiB"},
                 {}, dir.path());
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("  FAIL  phase peak loader:inner: 12.5 MiB while loader:inner was open "
                          "(limit 1.0 MiB)\n"
                          "          12.5 MiB in loader:inner, reached at " +
                          At("inner") +
                          "\n"
                          "          12.0 MiB in outer/loader:inner\n"
                          "  FAIL  phase peak no_such_phase: no phase no_such_phase in the report "
                          "(limit 1.0 GiB)\n"),
            std::string::npos)
      << fail.out;
  const ProcessResult bad =
      RunProcess({kCli, "check", out, "--max-phase-peak", "forward"}, {}, dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "gpuwatch check: --max-phase-peak: invalid limit \"forward\" (expected NAME=BYTES, "
            "e.g. forward=12GiB or step/backward=512MiB)\n");
}

TEST(Phases, DiffShowsWhatChangedPerPhase) {
  ScopedTempDir dir;
  const std::string out = GoodReportIn(dir);
  ASSERT_FALSE(HasFailure());
  // The new run: forward peaks 2 MiB higher and allocates 1 MiB more; the
  // worker's phase is gone.
  json report = ReadJson(out);
  json paths = json::array();
  for (json p : report["phases"]["paths"]) {
    if (p["path"] == "worker") continue;
    if (p["path"] == "step/forward") {
      p["peak_bytes"] = 14 * kMiB;
      p["alloc_bytes"] = 13 * kMiB;
    }
    paths.push_back(p);
  }
  report["phases"]["paths"] = paths;
  const std::string changed = WriteReport(dir, "changed.json", report);
  const ProcessResult diff = RunProcess({kCli, "diff", out, changed}, {}, dir.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_NE(diff.out.find("\nPhases (device memory while open; allocated and live in the phase):\n"
                          "  gone      -12.0 MiB    12.0 MiB -> 0 B         worker  allocated "
                          "1.0 MiB -> 0 B  live 1.0 MiB -> 0 B\n"
                          "  grew       +2.0 MiB    12.0 MiB -> 14.0 MiB    step/forward  "
                          "allocated 12.0 MiB -> 13.0 MiB\n"),
            std::string::npos)
      << diff.out;
  EXPECT_NE(diff.out.find("\nNo site changed (phases did: above).\n"), std::string::npos)
      << diff.out;
}

TEST(Phases, MergeSumsEachPhaseAndKeepsTheHighestPeakOfAnyRank) {
  ScopedTempDir dir;
  std::vector<std::string> inputs;
  std::vector<json> reports;
  for (const char* rank : {"0", "1"}) {
    ProcessResult r;
    inputs.push_back(RunReportIn(dir, "nvtx_phases", &r, std::string("rank") + rank + ".json",
                                 {{"RANK", rank}}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    reports.push_back(ReadJson(inputs.back()));
  }
  // Rank 1's forward peaks 6 MiB higher, at its backward line (as a rank
  // with a larger batch might): its report edited.
  const json backward_peak_site = Paths(reports[1])["step/backward"]["peak_site"];
  for (json& p : reports[1]["phases"]["paths"]) {
    if (p["path"] != "step/forward") continue;
    p["peak_bytes"] = 18 * kMiB;
    p["peak_site"] = backward_peak_site;
  }
  inputs[1] = WriteReport(dir, "rank1-edited.json", reports[1]);
  const std::string out = dir.path() + "/merged.json";
  const ProcessResult merge =
      RunProcess({kCli, "merge", inputs[0], inputs[1], "-o", out}, {}, dir.path());
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  const json merged = ReadJson(out);
  const std::map<std::string, json> paths = Paths(merged);
  const std::map<std::string, json> one = Paths(reports[0]);
  ASSERT_EQ(paths.size(), one.size()) << merged["phases"].dump(1);
  // Every path once, in the order of a process's own report.
  std::vector<std::string> order;
  std::vector<std::string> one_order;
  for (const json& p : merged["phases"]["paths"]) order.push_back(p["path"]);
  for (const json& p : reports[0]["phases"]["paths"]) one_order.push_back(p["path"]);
  EXPECT_EQ(order, one_order);
  const uint64_t pid_0 = reports[0]["process"]["pid"];
  const uint64_t pid_1 = reports[1]["process"]["pid"];
  std::map<uint64_t, std::string> merged_sites;
  for (const json& s : merged["sites"]) merged_sites[s["site"]] = s["location"];
  for (const Expected& e : ExpectedPaths()) {
    SCOPED_TRACE(e.path);
    ASSERT_EQ(paths.count(e.path), 1u);
    const json& p = paths.at(e.path);
    // Counts: both processes' (the same program twice).
    EXPECT_EQ(p["processes"], 2);
    EXPECT_EQ(p["allocs"], 2 * e.allocs);
    EXPECT_EQ(p["alloc_bytes"], 2 * e.alloc_bytes);
    EXPECT_EQ(p["live_bytes"], 2 * e.live_bytes);
    EXPECT_EQ(p["live_count"], e.live_bytes != 0 ? 2 * e.allocs : 0);
    EXPECT_EQ(p["launches"], 2 * e.launches);
    EXPECT_EQ(p["opens"], 2 * one.at(e.path)["opens"].get<uint64_t>());
    // The peak: the higher process's, with its sites; the first on a tie.
    const bool edited = std::string(e.path) == "step/forward";
    EXPECT_EQ(p["peak_bytes"], edited ? 18 * kMiB : e.peak_bytes);
    EXPECT_EQ(p["peak_pid"], edited ? pid_1 : pid_0);
    EXPECT_EQ(p["peak_rank"], edited ? "1" : "0");
    const char* peak_at = edited ? "backward" : e.peak_at;
    if (*peak_at == '\0') {
      EXPECT_FALSE(p.contains("peak_site")) << p.dump();
      continue;
    }
    EXPECT_EQ(p["peak_site"]["location"], At(peak_at));
    // Its site id is the merged report's, as its site lists number it.
    EXPECT_EQ(merged_sites[p["peak_site"]["site"]], At(peak_at)) << p.dump();
    if (*e.top_at != '\0') {
      EXPECT_EQ(p["peak_top_site"]["location"], At(e.top_at));
      EXPECT_EQ(p["peak_top_site"]["bytes"], e.top_bytes);
    }
  }
  EXPECT_EQ(paths.at("io")["copies"], json::parse(R"({"h2d": {"count": 4, "bytes": 4194304},
                            "d2h": {"count": 2, "bytes": 2097152}})"));
  EXPECT_EQ(merged["phases"]["unbalanced_pops"], 4);
  EXPECT_EQ(merged["phases"]["open_at_thread_exit"], 2);
  EXPECT_EQ(merged["phases"]["unmatched_ends"], 2);
  EXPECT_EQ(merged["phases"]["too_deep"], 0);
  // The tools read it: the text report and check name the rank.
  const ProcessResult text = RunProcess({kCli, "report", out}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Memory by phase (peak: the highest of any one process, device memory "
                          "while open,\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(
      text.out.find("    18.0 MiB    24.0 MiB       6         0 B         0 B    forward  "
                    "(peak at " +
                    At("backward") + " in rank 1; most held by " + At("forward") + ", 4.0 MiB)\n"),
      std::string::npos)
      << text.out;
  const ProcessResult fail =
      RunProcess({kCli, "check", out, "--max-leak", "1GiB", "--max-phase-peak", "forward=17MiB"},
                 {}, dir.path());
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("  FAIL  phase peak forward: 18.0 MiB while step/forward was open "
                          "(limit 17.0 MiB)\n"
                          "          18.0 MiB in step/forward, reached at " +
                          At("backward") + " in rank 1\n"),
            std::string::npos)
      << fail.out;
  EXPECT_EQ(
      RunProcess({kCli, "check", out, "--max-leak", "1GiB", "--max-phase-peak", "forward=18MiB"},
                 {}, dir.path())
          .exit_code,
      0);
}

TEST(Phases, RangesAreSlicesInTheTraceAndInPerfetto) {
  ScopedTempDir dir;
  const std::string out = GoodReportIn(dir);
  ASSERT_FALSE(HasFailure());
  const json report = ReadReport(out);
  const json& trace = report["trace"];
  // Each range once, with its thread; "worker" closed when its thread ended.
  struct Slice {
    uint64_t start, end, thread;
  };
  std::map<std::string, std::vector<Slice>> slices;
  for (const json& e : trace["events"]) {
    if (e[0] != "phase") continue;
    slices[trace["phases"][e[4].get<size_t>()].get<std::string>()].push_back(
        {e[1].get<uint64_t>(), e[2].get<uint64_t>(), e[3].get<uint64_t>()});
  }
  std::map<std::string, size_t> counts;
  for (const auto& [path, list] : slices) counts[path] = list.size();
  EXPECT_EQ(counts, (std::map<std::string, size_t>{{"setup", 1},
                                                   {"step", 3},
                                                   {"step/forward", 3},
                                                   {"step/backward", 3},
                                                   {"io", 1},
                                                   {"loader:batch", 1},
                                                   {"worker", 1},
                                                   {"outer", 1},
                                                   {"outer/loader:inner", 1},
                                                   {"loader:inner", 1},
                                                   {"api", 1},
                                                   {"grow", 6},
                                                   {"run", 1},
                                                   {"load", 1}}));
  // Nested ranges are nested slices: each forward and backward inside a step.
  for (size_t i = 0; i < 3; ++i) {
    const Slice& step = slices["step"][i];
    for (const char* child : {"step/forward", "step/backward"}) {
      const Slice& c = slices[child][i];
      EXPECT_LE(step.start, c.start) << child << " " << i;
      EXPECT_LE(c.end, step.end) << child << " " << i;
      EXPECT_LE(c.start, c.end);
    }
  }
  // "outer" closed under "loader:inner": the inner range's slice ends with
  // it, and the range goes on as a path of its own from then.
  EXPECT_LE(slices["outer/loader:inner"][0].end, slices["outer"][0].end);
  EXPECT_GE(slices["loader:inner"][0].start, slices["outer"][0].end);
  const uint64_t main_thread = slices["step"][0].thread;
  EXPECT_NE(slices["worker"][0].thread, main_thread);
  EXPECT_EQ(slices["loader:batch"][0].thread, slices["worker"][0].thread);

  // Perfetto: a track of slices per thread, named by the range's own name.
  const ProcessResult perfetto =
      RunProcess({kCli, "report", "--format", "perfetto", out}, {}, dir.path());
  ASSERT_EQ(perfetto.exit_code, 0) << perfetto.err;
  const json doc = json::parse(perfetto.out);
  std::map<int64_t, std::string> tracks;
  for (const json& e : doc["traceEvents"]) {
    if (e["name"] == "thread_name") tracks[e["tid"].get<int64_t>()] = e["args"]["name"];
  }
  std::map<std::string, size_t> on_main;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "phase") continue;
    if (tracks[e["tid"].get<int64_t>()] == "phases (thread " + std::to_string(main_thread) + ")") {
      ++on_main[e["name"].get<std::string>() + " = " + e["args"]["path"].get<std::string>()];
    }
  }
  EXPECT_EQ(on_main, (std::map<std::string, size_t>{{"setup = setup", 1},
                                                    {"step = step", 3},
                                                    {"forward = step/forward", 3},
                                                    {"backward = step/backward", 3},
                                                    {"io = io", 1},
                                                    {"outer = outer", 1},
                                                    {"loader:inner = outer/loader:inner", 1},
                                                    {"loader:inner = loader:inner", 1},
                                                    {"api = api", 1},
                                                    {"grow = grow", 6}}));
}

TEST(Phases, NoSectionWithoutRanges) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", out, "--", kExamples + "/leaky_loop"}, SimEnv(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_FALSE(report.contains("phases"));
  EXPECT_FALSE(report.contains("regions"));  // nor pool regions without NVTX's memory extension
  for (const json& site : report["leaks"]["device"]["sites"]) EXPECT_FALSE(site.contains("phase"));
}

}  // namespace
}  // namespace gpuwatch::testing
