// End-to-end tests of how sites are named and grouped: the program's own
// allocation helpers (--alloc-fn, GPUWATCH_ALLOC_FN) trimmed so that their
// callers are the sites, in every output of a report.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Traced {
  json report;
  std::string err;   // gpuwatch run's stderr: the summary
  std::string text;  // gpuwatch report
  std::string collapsed;
};

// alloc_helper under `gpuwatch run` with `flags` and `env` added, and its
// report as text and collapsed stacks.
Traced RunAllocHelper(const ScopedTempDir& dir, const std::string& name,
                      const std::vector<std::string>& flags,
                      const std::map<std::string, std::string>& env = {}) {
  Traced t;
  const std::string out = dir.path() + "/" + name + ".json";
  std::vector<std::string> args = {kCli, "run", "-o", out, "--sample-ms", "0"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("--");
  args.push_back(kPrograms + "/alloc_helper");
  auto child_env = SimEnv();
  for (const auto& [k, v] : env) child_env[k] = v;
  const ProcessResult r = RunProcess(args, child_env, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  t.err = r.err;
  t.report = ReadJson(out);
  t.text = RunProcess({kCli, "report", out}, {}, dir.path()).out;
  t.collapsed = RunProcess({kCli, "report", out, "--format", "collapsed"}, {}, dir.path()).out;
  return t;
}

std::string At(const std::string& marker) { return ProgramLine("alloc_helper.cu", marker); }

// Without --alloc-fn every leak is at a line of the helper; the callers'
// lines name no site.
TEST(AllocFn, WithoutItEverySiteIsTheHelper) {
  ScopedTempDir dir;
  const Traced t = RunAllocHelper(dir, "plain", {});
  const json& sites = t.report["leaks"]["device"]["sites"];
  ASSERT_FALSE(sites.empty()) << t.report["leaks"].dump(1);
  for (const json& s : sites) {
    const std::string location = s["location"];
    EXPECT_TRUE(location == At("HELPER:large") || location == At("HELPER:small")) << s.dump(1);
    EXPECT_EQ(s["frames"][0]["function"], "Alloc(unsigned long)") << s.dump(1);
  }
  EXPECT_EQ(t.report["leaks"]["device"]["bytes"], 9 * kMiB);
  EXPECT_FALSE(Contains(t.err, "at " + At("CALLER:weights"))) << t.err;
}

size_t Occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Three call paths reach the helper's small line: the stderr summary and the
// text report give that line one row, its three callers (the first frame
// where the stacks differ) under it; a long table ends in a summary row.
TEST(SiteGroups, SitesThatReadTheSameAreOneRowWithTheirCallPaths) {
  ScopedTempDir dir;
  const Traced t = RunAllocHelper(dir, "grouped", {});
  const std::string small = At("HELPER:small") + " (Alloc(unsigned long))";
  EXPECT_EQ(Occurrences(t.err, small), 1u) << t.err;
  EXPECT_TRUE(Contains(t.err, "5.0 MiB in      3 at " + small + ", 3 call paths\n")) << t.err;
  // The text report's leaks section, and its peak and allocation sites
  // sections: one row for the helper's line in each, its call paths under it.
  const std::string leaks = t.text.substr(0, t.text.find("\nGrowth:"));
  EXPECT_EQ(Occurrences(leaks, small), 1u) << leaks;
  EXPECT_TRUE(Contains(leaks, small + ", 3 call paths:")) << leaks;
  const auto section = [&t](const std::string& title) {
    const size_t at = t.text.find("\n" + title);
    return at == std::string::npos ? std::string()
                                   : t.text.substr(at, t.text.find("\n\n", at) - at);
  };
  const std::string peak = section("Peak: ");
  EXPECT_EQ(Occurrences(peak, small), 1u) << peak;
  EXPECT_TRUE(Contains(peak, "     5.0 MiB           " + small + ", 3 call paths:")) << peak;
  EXPECT_TRUE(Contains(peak, "       3.0 MiB             <- main (" + At("CALLER:weights") + ")"))
      << peak;
  const std::string allocated = section("Device allocation sites");
  EXPECT_EQ(Occurrences(allocated, small), 1u) << allocated;
  EXPECT_TRUE(Contains(allocated, "     5.0 MiB        3  " + small + ", 3 call paths:"))
      << allocated;
  const struct {
    std::string caller;
    std::string function;
  } paths[] = {{At("CALLER:weights"), "main"},
               {At("CALLER:cache"), "main"},
               {At("SCRATCH:inner"), "AllocScratch(unsigned long)"}};
  for (const auto& path : paths) {
    EXPECT_TRUE(Contains(t.err, " via " + path.caller + " (" + path.function + ")\n"))
        << path.caller << "\n"
        << t.err;
    EXPECT_TRUE(Contains(leaks, "<- " + path.function + " (" + path.caller + ")\n"))
        << path.caller << "\n"
        << leaks;
  }
  // The large line has one call path: a row of its own, as before.
  EXPECT_TRUE(
      Contains(t.err, "4.0 MiB in      1 at " + At("HELPER:large") + " (Alloc(unsigned long))\n"))
      << t.err;
  // --top 1: one location, then a row for the other.
  const ProcessResult top1 =
      RunProcess({kCli, "report", dir.path() + "/grouped.json", "--top", "1"}, {}, dir.path());
  const std::string top1_leaks = top1.out.substr(0, top1.out.find("\nGrowth:"));
  EXPECT_TRUE(Contains(top1_leaks, small + ", 3 call paths:")) << top1.out;
  EXPECT_FALSE(Contains(top1_leaks, At("HELPER:large"))) << top1.out;
  EXPECT_TRUE(Contains(top1_leaks, "\n  ... and 1 more location (--top to show more)\n"))
      << top1.out;
}

// The three leaks of the program by the line each site reads in `t`.
void ExpectCallerSites(const Traced& t, const std::string& scratch_at) {
  const json& device = t.report["leaks"]["device"];
  ASSERT_EQ(device["sites"].size(), 3u) << device.dump(1);
  const struct {
    std::string at;
    uint64_t bytes;
    uint64_t count;
  } expected[] = {
      {At("CALLER:weights"), 3 * kMiB, 1},
      // The loop's two calls take two lines of the helper: one site.
      {At("CALLER:cache"), 5 * kMiB, 2},
      {scratch_at, 1 * kMiB, 1},
  };
  for (const auto& e : expected) {
    const json site = SiteAt(device, e.at);
    ASSERT_FALSE(site.is_null()) << e.at << "\n" << device.dump(1);
    EXPECT_EQ(site["bytes"], e.bytes) << e.at;
    EXPECT_EQ(site["count"], e.count) << e.at;
    EXPECT_EQ(site["frames"][0]["line"], std::stoi(e.at.substr(e.at.find(':') + 1))) << e.at;
    // Every output names the same line: the stderr summary, the text report.
    EXPECT_TRUE(Contains(t.err, "at " + e.at)) << e.at << "\n" << t.err;
    EXPECT_TRUE(Contains(t.text, e.at)) << e.at << "\n" << t.text;
  }
  // The allocation sites agree with the leaks.
  const json cache_site = SiteAt(t.report, At("CALLER:cache"));
  ASSERT_FALSE(cache_site.is_null()) << t.report["sites"].dump(1);
  EXPECT_EQ(cache_site["allocs"], 2);
  EXPECT_EQ(cache_site["alloc_bytes"], 5 * kMiB);
  // No collapsed stack ends in the helper: its frames are gone.
  EXPECT_FALSE(t.collapsed.empty());
  EXPECT_FALSE(Contains(t.collapsed, "Alloc(unsigned long)")) << t.collapsed;
  EXPECT_FALSE(Contains(t.text, At("HELPER:small"))) << t.text;
}

// --alloc-fn Alloc: its callers are the sites, and AllocScratch (not named)
// is the site of what it allocates through Alloc.
TEST(AllocFn, TheFlagNamesTheCallers) {
  ScopedTempDir dir;
  const Traced t = RunAllocHelper(dir, "flag", {"--alloc-fn", "Alloc"});
  ExpectCallerSites(t, At("SCRATCH:inner"));
}

// GPUWATCH_ALLOC_FN, comma-separated, with a glob that names both helpers.
TEST(AllocFn, TheVariableTakesAListAndGlobs) {
  ScopedTempDir dir;
  const Traced t = RunAllocHelper(dir, "env", {}, {{"GPUWATCH_ALLOC_FN", "NoSuchHelper, Alloc*"}});
  ExpectCallerSites(t, At("CALLER:scratch"));
  EXPECT_FALSE(Contains(t.collapsed, "AllocScratch")) << t.collapsed;
  EXPECT_FALSE(Contains(t.err, "GPUWATCH_ALLOC_FN")) << t.err;  // known: no warning
}

// --- cudaMalloc/cudaFree churn -----------------------------------------------

// The alloc_churn findings of a report, by location.
std::map<std::string, json> ChurnFindings(const json& report) {
  std::map<std::string, json> out;
  for (const json& f : report["lifecycle"]["findings"]) {
    if (f["type"] == "alloc_churn") out[f["location"].get<std::string>()] = f;
  }
  return out;
}

// A site that allocates and frees in a loop is a finding, with its count,
// cycles and the time in those calls, in the report, the summary and the
// text report; a site under 10 cycles, stream-ordered memory and a buffer
// held through the loops are not.
TEST(Churn, LoopsThatAllocateAndFreeAreFindings) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/churn.json";
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", out, "--sample-ms", "0", "--", kPrograms + "/churn_loop"},
                 SimEnv(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const auto at = [](const std::string& marker) { return ProgramLine("churn_loop.cu", marker); };
  const std::map<std::string, json> findings = ChurnFindings(report);
  ASSERT_EQ(findings.size(), 2u) << report["lifecycle"].dump(1);
  const struct {
    std::string at;
    uint64_t count;
    uint64_t cycles;
    uint64_t bytes;
  } expected[] = {{at("CHURN:step"), 50, 50, 50 * kMiB},
                  {at("CHURN:pair"), 40, 20, 40 * 64 * kKiB}};
  for (const auto& e : expected) {
    ASSERT_EQ(findings.count(e.at), 1u) << e.at << "\n" << report["lifecycle"].dump(1);
    const json& f = findings.at(e.at);
    EXPECT_EQ(f["count"], e.count) << f.dump();
    EXPECT_EQ(f["cycles"], e.cycles) << f.dump();
    EXPECT_EQ(f["bytes"], e.bytes) << f.dump();
    EXPECT_GT(f["call_ns"].get<uint64_t>(), 0u) << f.dump();
    const json site = SiteAt(report, e.at);
    ASSERT_FALSE(site.is_null()) << e.at;
    EXPECT_EQ(site["site"], f["site"]);
    EXPECT_EQ(site["frees"], e.count);
    EXPECT_EQ(site["churn_cycles"], e.cycles);
    EXPECT_EQ(site["call_ns"], f["call_ns"]);
    const std::string words = std::to_string(e.count) + " allocations at " + e.at + " freed";
    EXPECT_TRUE(Contains(r.err, "gpuwatch: finding: " + words)) << r.err;
    const ProcessResult text = RunProcess({kCli, "report", out}, {}, dir.path());
    EXPECT_TRUE(Contains(text.out, "finding: " + words)) << text.out;
  }
  // The figures of the sites that are no finding.
  const json few = SiteAt(report, at("FEW"));
  ASSERT_FALSE(few.is_null());
  EXPECT_EQ(few["churn_cycles"], 9);
  const json pooled = SiteAt(report, at("POOLED"));
  ASSERT_FALSE(pooled.is_null());
  EXPECT_EQ(pooled["frees"], 30);
  EXPECT_EQ(pooled["churn_cycles"], 0);
  const json kept = SiteAt(report, at("KEPT"));
  ASSERT_FALSE(kept.is_null());
  EXPECT_EQ(kept["frees"], 1);
  EXPECT_EQ(kept["churn_cycles"], 1);
}

}  // namespace
}  // namespace gpuwatch::testing
