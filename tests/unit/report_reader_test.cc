#include "tools/report_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace gpuwatch::tools {
namespace {

TEST(ParseBytes, PlainAndBinarySuffixes) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseBytes("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ParseBytes("4096", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(ParseBytes("4KiB", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(ParseBytes("512 MiB", &v));
  EXPECT_EQ(v, 512u << 20);
  EXPECT_TRUE(ParseBytes("1.5GiB", &v));
  EXPECT_EQ(v, 3ull << 29);
  EXPECT_TRUE(ParseBytes("2gib", &v));
  EXPECT_EQ(v, 2ull << 30);
  EXPECT_TRUE(ParseBytes("100B", &v));
  EXPECT_EQ(v, 100u);
  for (const char* bad : {"", "MiB", "10MB", "10 M", "-1", "1e3", "1..5KiB", "99999999999TiB"}) {
    EXPECT_FALSE(ParseBytes(bad, &v)) << bad;
  }
}

TEST(Format, SignedBytesAndPercentChange) {
  EXPECT_EQ(SignedBytes(0), "0 B");
  EXPECT_EQ(SignedBytes(5 << 20), "+5.0 MiB");
  EXPECT_EQ(SignedBytes(-512), "-512 B");
  EXPECT_EQ(PercentChange(100, 150), "+50.0%");
  EXPECT_EQ(PercentChange(100, 97), "-3.0%");
  EXPECT_EQ(PercentChange(0, 5), "new");
}

class ReadReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpuwatch-reader-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Writes `text` to a file and returns ReadReport's error ("" on success).
  std::string Error(const std::string& text) {
    const std::string path = dir_ + "/r.json";
    std::ofstream(path) << text;
    Report r;
    std::string error;
    if (ReadReport(path, &r, &error)) return "";
    EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
    return error.substr(path.size() + 2);
  }

  std::string dir_;
};

constexpr char kMinimal[] =
    R"({"schema": "gpuwatch-report", "version": 1, "totals": {}, "leaks": {"device": {}},
        "sites": []})";

TEST_F(ReadReportTest, AcceptsAMinimalReport) { EXPECT_EQ(Error(kMinimal), ""); }

TEST_F(ReadReportTest, NamesEachProblem) {
  const std::string minimal = kMinimal;
  EXPECT_EQ(Error(""), "empty file (was the process killed before it wrote its report?)");
  EXPECT_EQ(Error(minimal.substr(0, 40)),
            "truncated: the JSON ends at byte 40 before the report is complete");
  EXPECT_EQ(Error(minimal.substr(0, 13)),  // inside a string
            "truncated: the JSON ends at byte 13 before the report is complete");
  EXPECT_EQ(Error("{\"a\": tru}"), "not JSON (parse error at byte 10)");
  EXPECT_EQ(Error("[1, 2]"), "not a gpuwatch report (no \"schema\": \"gpuwatch-report\")");
  EXPECT_EQ(Error(R"({"schema": "memray"})"), "not a gpuwatch report (its schema is \"memray\")");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": "1"})"),
            "gpuwatch report without a valid \"version\"");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 2})"),
            "report version 2 is newer than this gpuwatch reads (1); use a newer gpuwatch");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 1, "totals": {}})"),
            "malformed gpuwatch report: no \"leaks.device\" section");
  Report r;
  std::string error;
  EXPECT_FALSE(ReadReport(dir_ + "/missing.json", &r, &error));
  EXPECT_EQ(error, dir_ + "/missing.json: cannot read: No such file or directory");
}

json Site(const std::string& function, const std::string& file, int line, uint64_t bytes,
          const std::string& module = "/bin/app") {
  return {{"location", file + ":" + std::to_string(line)},
          {"bytes", bytes},
          {"count", 1},
          {"frames",
           {{{"function", function}, {"file", "/src/" + file}, {"line", line}, {"module", module}},
            {{"function", "main"}, {"file", "/src/main.cc"}, {"line", 3}, {"module", module}}}}};
}

TEST(SiteKey, SameStackSameKeyAcrossBuildDirectories) {
  json a = Site("F()", "a.cc", 10, 1);
  json b = Site("F()", "a.cc", 10, 2);
  b["frames"][0]["file"] = "/other/checkout/a.cc";
  EXPECT_EQ(SiteKey(a), SiteKey(b));
  EXPECT_NE(SiteKey(a), SiteKey(Site("F()", "a.cc", 11, 1)));
  EXPECT_EQ(Describe(a), "a.cc:10 (F())");
}

TEST(SplitLeaks, SuppressedCategorizedAndLeaked) {
  json section = {{"bytes", 111}, {"count", 3}, {"omitted_bytes", 0}};
  section["sites"] = {Site("Leak()", "a.cc", 1, 100), Site("Kept()", "b.cc", 2, 10),
                      Site("cublasCreate_v2", "", 0, 1, "/usr/lib/libcublas.so.13")};
  section["sites"][1]["suppressed"] = "leak:Kept";
  const LeakSplit split = SplitLeaks(section, nullptr, false);
  EXPECT_EQ(split.leaked_bytes, 100u);
  EXPECT_EQ(split.suppressed_bytes, 10u);
  EXPECT_EQ(split.categorized_bytes, 1u);
  ASSERT_EQ(split.category_of.size(), 1u);
  EXPECT_EQ(split.category_of[0], "cublas");
  EXPECT_EQ(split.suppressed_by[0], "leak:Kept");
  EXPECT_EQ(SplitLeaks(section, nullptr, true).leaked_bytes, 101u);
  Suppressions extra;
  std::string error;
  ASSERT_TRUE(extra.Parse("leak:a.cc\n", "x", &error));
  EXPECT_EQ(SplitLeaks(section, &extra, false).leaked_bytes, 0u);
}

}  // namespace
}  // namespace gpuwatch::tools
