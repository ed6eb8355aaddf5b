// `gpuwatch report --format html` on the report of examples/leaky_loop run on
// the CUDA simulator: timeline.sites (the per-site series the chart stacks),
// the page's content, -o, and exit status 2 when -o cannot be written. The
// page in a browser: tests/html/check_html.py.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

// leaky_loop's leak: the cudaMalloc in AllocateHistory().
std::string LeakyAt() {
  return "leaky_loop.cu:" +
         std::to_string(LineOf(kSourceDir + "/examples/leaky_loop.cu", "// leaks"));
}

// leaky_loop (8 steps, a mark after each) under `gpuwatch run`; its report's path.
std::string LeakyReport(const ScopedTempDir& dir) {
  const std::string out = dir.path() + "/leaky.json";
  const ProcessResult r = RunProcess({kCli, "run", "-o", out, "--sample-ms", "0", "--library", kLib,
                                      "--", kExamples + "/leaky_loop"},
                                     SimEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// `gpuwatch report REPORT --format html`, to the file `page` unless it is empty.
ProcessResult Html(const ScopedTempDir& dir, const std::string& report,
                   const std::string& page = "") {
  std::vector<std::string> args = {kCli, "report", report, "--format", "html"};
  if (!page.empty()) args.insert(args.end(), {"-o", page});
  return RunProcess(args, {}, dir.path());
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(Timeline, ListsTheTopSitesWithTheirBytesAtEverySample) {
  ScopedTempDir dir;
  const json report = ReadJson(LeakyReport(dir));
  ASSERT_TRUE(report.is_object());
  const json& timeline = report["timeline"];
  ASSERT_EQ(timeline["marks"]["samples"].size(), 8u);
  // At every mark only the history buffers are live: one site, 256 KiB more each step.
  ASSERT_EQ(timeline["sites"].size(), 1u) << timeline["sites"].dump();
  const json& site = timeline["sites"][0];
  EXPECT_EQ(site["location"], LeakyAt());
  EXPECT_EQ(site["site"], report["leaks"]["device"]["sites"][0]["site"]);
  EXPECT_EQ(site["max_bytes"], 2048 * kKiB);
  std::vector<uint64_t> expected;
  for (uint64_t step = 1; step <= 8; ++step) expected.push_back(step * 256 * kKiB);
  EXPECT_EQ(site["marks"].get<std::vector<uint64_t>>(), expected);
  EXPECT_EQ(site["periodic"], json::array());
  ASSERT_TRUE(site["frames"].is_array());
  EXPECT_EQ(site["frames"][0]["function"], "(anonymous namespace)::AllocateHistory()");
  // Each site's bytes never exceed the sample's total.
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_LE(site["marks"][i].get<uint64_t>(),
              timeline["marks"]["samples"][i]["device_bytes"].get<uint64_t>());
  }
}

TEST(HtmlReport, IsOneSelfContainedPageNamingTheLeak) {
  ScopedTempDir dir;
  const std::string report = LeakyReport(dir);
  const std::string page = dir.path() + "/leaky.html";
  const ProcessResult r = Html(dir, report, page);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  const std::string html = ReadFile(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("\"location\":\"" + LeakyAt() + "\""), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // Without -o the page goes to stdout.
  const ProcessResult to_stdout = Html(dir, report);
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_EQ(to_stdout.out, html);
}

TEST(HtmlReport, OutputThatCannotBeWrittenExits2NamingIt) {
  ScopedTempDir dir;
  const std::string report = LeakyReport(dir);
  const std::string page = dir.path() + "/no-such-dir/leaky.html";
  const ProcessResult r = Html(dir, report, page);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuwatch report: cannot write " + page + ": No such file or directory\n");
}

TEST(HtmlReport, BadInputLeavesTheOutputAlone) {
  ScopedTempDir dir;
  const std::string bad = dir.path() + "/bad.json";
  std::ofstream(bad) << "{\"schema\": \"something else\"}";
  const std::string page = dir.path() + "/page.html";
  const ProcessResult r = Html(dir, bad, page);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(page));
}

}  // namespace
}  // namespace gpuwatch::testing
