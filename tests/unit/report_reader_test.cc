#include "tools/reading/report_reader.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

#include "tools/reading/report_validate.h"

namespace gpuwatch::tools {
namespace {

TEST(ParseBytes, PlainAndBinarySuffixes) {
  uint64_t v = 0;
  const std::pair<const char*, uint64_t> good[] = {
      {"0", 0},
      {"4096", 4096},
      {"4KiB", 4096},
      {"512 MiB", 512u << 20},
      {"1.5GiB", 3ull << 29},
      {"2gib", 2ull << 30},
      {"100B", 100},
  };
  for (const auto& [text, bytes] : good) {
    EXPECT_TRUE(ParseBytes(text, &v)) << text;
    EXPECT_EQ(v, bytes) << text;
  }
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

// The event trace is read only when asked for; nothing else is dropped (a
// section's own "trace" key, deeper down, stays), and a bad number inside
// the trace is refused either way, so every command gives the same verdict.
TEST_F(ReadReportTest, TheTraceIsKeptOnlyWhenAskedFor) {
  const std::string path = dir_ + "/r.json";
  std::ofstream(path) << R"({"schema": "gpuwatch-report", "version": 2, "totals": {},
      "leaks": {"device": {}}, "sites": [], "label": "x",
      "lifecycle": {"trace": 7, "first_call_ns": 5},
      "trace": {"capacity": 4, "events": [["mem", 1, 0, 4096]]}})";
  Report skipped;
  Report kept;
  std::string error;
  ASSERT_TRUE(ReadReport(path, &skipped, &error)) << error;
  ASSERT_TRUE(ReadReport(path, &kept, &error, TraceSection::kKeep)) << error;
  ASSERT_TRUE(skipped.model.lifecycle.has_value());  // its own "trace" key did not drop it
  EXPECT_EQ(skipped.model.lifecycle->first_call_ns, 5U);
  EXPECT_EQ(skipped.model.label, "x");
  EXPECT_FALSE(skipped.model.trace.has_value());
  ASSERT_TRUE(kept.model.trace.has_value());
  EXPECT_EQ(ReportTraceJson(*kept.model.trace)["events"], json::parse(R"([["mem", 1, 0, 4096]])"));
  json kept_doc = ReportDocument(kept.model);
  EXPECT_TRUE(kept_doc.contains("trace"));
  kept_doc.erase("trace");
  EXPECT_EQ(kept_doc, ReportDocument(skipped.model));
  std::ofstream(path) << R"({"schema": "gpuwatch-report", "version": 2, "totals": {},
      "leaks": {"device": {}}, "sites": [], "trace": {"events": [["mem", 1e999]]}})";
  EXPECT_FALSE(ReadReport(path, &skipped, &error));
  EXPECT_NE(error.find("a number is out of range"), std::string::npos) << error;
}

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
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 3})"),
            "report version 3 is newer than this gpuwatch reads (2); use a newer gpuwatch");
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

// A site entry as the model's reader reads it.
ReportSite SiteOf(const json& site) {
  ReportFieldReader reader;
  reader.frame_table_size = SIZE_MAX;
  ReportSite out;
  EXPECT_TRUE(reader.Site(site, "", &out)) << reader.problem();
  return out;
}

TEST(SiteKey, SameStackSameKeyAcrossBuildDirectories) {
  json a = Site("F()", "a.cc", 10, 1);
  json b = Site("F()", "a.cc", 10, 2);
  b["frames"][0]["file"] = "/other/checkout/a.cc";
  EXPECT_EQ(SiteKey(SiteOf(a)), SiteKey(SiteOf(b)));
  EXPECT_NE(SiteKey(SiteOf(a)), SiteKey(SiteOf(Site("F()", "a.cc", 11, 1))));
  EXPECT_EQ(Describe(SiteOf(a)), "a.cc:10 (F())");
}

// A leaks section as the reader types it.
LeakList LeaksOf(const json& section) {
  ReportModel m;
  std::string error;
  EXPECT_TRUE(ReadReportModel({{"leaks", {{"device", section}}}}, &m, &error)) << error;
  return m.leaks_device;
}

TEST(SplitLeaks, SuppressedCategorizedAndLeaked) {
  json doc = {{"bytes", 111}, {"count", 3}, {"omitted_bytes", 0}};
  doc["sites"] = {Site("Leak()", "a.cc", 1, 100), Site("Kept()", "b.cc", 2, 10),
                  Site("cublasCreate_v2", "", 0, 1, "/usr/lib/libcublas.so.13")};
  doc["sites"][1]["suppressed"] = "leak:Kept";
  const LeakList section = LeaksOf(doc);
  ASSERT_EQ(section.sites.size(), 3u);
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

// Hostile and corrupted reports (issue 8; tests/fuzz/corpus holds the fuzzer's
// seeds for each): refused with the field and the problem named, never read
// with made-up figures.
std::string WithMember(const std::string& where) {
  return R"({"schema": "gpuwatch-report", "version": 1, "totals": {}, "leaks": {"device": {}},
             "sites": [], )" +
         where + "}";
}

TEST_F(ReadReportTest, RefusesHostileReportsNamingTheField) {
  // A number beyond a double used to escape ReadReport as json::out_of_range,
  // which `gpuwatch` printed without the file (tests/fuzz/corpus/huge_number.json).
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 1, "x": 1e999})"),
            "not a gpuwatch report: a number is out of range (number overflow parsing '1e999')");
  EXPECT_EQ(Error(std::string(200, '[') + std::string(200, ']')),
            "not a gpuwatch report: nested deeper than 64 levels (at byte 64)");
  // Brackets inside strings are not nesting.
  EXPECT_EQ(Error(WithMember(R"("label": ")" + std::string(500, '[') + R"(")")), "");
  EXPECT_EQ(Error(WithMember(R"("peak": {"device_bytes": -1})")),
            "malformed gpuwatch report: peak.device_bytes is -1, expected a count (not negative)");
  EXPECT_EQ(Error(WithMember(R"("process": {"pid": 1.5})")),
            "malformed gpuwatch report: process.pid is 1.5, expected a count (an integer)");
  EXPECT_EQ(Error(WithMember(R"("peak": {"device_bytes": 18446744073709551615})")),
            "malformed gpuwatch report: peak.device_bytes is 18446744073709551615, expected a "
            "count of at most 2^53");
  EXPECT_EQ(Error(WithMember(R"("oom": {"size": "6 MiB"})")),
            "malformed gpuwatch report: oom.size is \"6 MiB\", expected a count (an integer)");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 1, "totals": {"kinds": {"device":
                  {"allocs": true}}}, "leaks": {"device": {}}, "sites": []})"),
            "malformed gpuwatch report: totals.kinds.device.allocs is true, expected a count (an "
            "integer)");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 1, "totals": {},
                  "leaks": {"device": {"sites": [{"bytes": 1, "frames": [{"line": "x"}]}]}},
                  "sites": []})"),
            "malformed gpuwatch report: leaks.device.sites[0].frames[0].line is \"x\", expected a "
            "count (an integer)");
  EXPECT_EQ(Error(R"({"schema": "gpuwatch-report", "version": 1, "totals": {},
                  "leaks": {"device": {"sites": [7]}}, "sites": []})"),
            "malformed gpuwatch report: leaks.device.sites[0] is 7, expected an object (a site)");
  EXPECT_EQ(Error(WithMember(R"("sites": {}, "x": 0)")),
            "malformed gpuwatch report: no \"sites\" section");
  EXPECT_EQ(Error(WithMember(R"("growth": {"suspects": [{"rate": "fast"}]})")),
            "malformed gpuwatch report: growth.suspects[0].rate is \"fast\", expected a number");
  EXPECT_EQ(Error(WithMember(R"("growth": {"suspects": [{"rate": 1e300}]})")),
            "malformed gpuwatch report: growth.suspects[0].rate is 1e+300, expected a number of at "
            "most 2^53");
  EXPECT_EQ(Error(WithMember(R"("transfers": [])")),
            "malformed gpuwatch report: transfers is an array, expected an object");
  EXPECT_EQ(Error(WithMember(R"("process": {"command": ["./a", 3]})")),
            "malformed gpuwatch report: process.command[1] is 3, expected a string");
  const std::string long_string(kMaxReportString + 1, 'x');
  EXPECT_EQ(Error(WithMember(R"("process": {"host": ")" + long_string + R"("})")),
            "malformed gpuwatch report: process.host is a string of 1048577 bytes (at most "
            "1048576)");
  EXPECT_EQ(Error(WithMember(R"("frame_table": {"0": {}})")),
            "malformed gpuwatch report: frame_table is an object, expected an array");
  EXPECT_EQ(
      Error(WithMember(R"("frame_table": [{"line": -2}])")),
      "malformed gpuwatch report: frame_table[0].line is -2, expected a count (not negative)");
  EXPECT_EQ(Error(WithMember(R"("frame_table": [{}], "peak": {"sites": [{"stack": [0, 1]}]})")),
            "malformed gpuwatch report: peak.sites[0].stack[1] is 1, past the end of frame_table "
            "(1 frames)");
  EXPECT_EQ(Error(WithMember(R"("oom": {"stack": [-1]})")),
            "malformed gpuwatch report: oom.stack[0] is -1, expected a count (not negative)");
  // JSON has no NaN or infinity: such a report is not JSON, and the byte
  // named is the N.
  const std::string nan = WithMember(R"("growth": {"suspects": [{"rate": NaN}]})");
  EXPECT_EQ(Error(nan),
            "not JSON (parse error at byte " + std::to_string(nan.find("NaN") + 1) + ")");
  // Unknown fields are not checked (readers ignore them), known ones absent
  // or null are fine.
  EXPECT_EQ(Error(WithMember(R"("future": {"bytes": "x"}, "oom": null, "peak": {})")), "");
}

// Version 2: a site's frames are indices into the frame table; reading gives
// each site its frames, in order, wherever sites are listed, and drops the
// table.
TEST_F(ReadReportTest, SitesGetTheirFramesFromTheFrameTable) {
  const std::string path = dir_ + "/r.json";
  std::ofstream(path) << R"({"schema": "gpuwatch-report", "version": 2, "totals": {},
      "frame_table": [{"function": "inner", "file": "a.cu", "line": 3, "module": "m"},
                      {"function": "main", "file": "a.cu", "line": 9, "module": "m"}],
      "leaks": {"device": {"sites": [{"site": 1, "stack": [0, 1]}]},
                "host": {"sites": [{"site": 2, "stack": [1]}]}},
      "peak": {"sites": [{"site": 1, "stack": [0, 1]}]},
      "sites": [{"site": 3, "stack": []}],
      "growth": {"suspects": [{"site": 1, "stack": [1, 0]}]},
      "transfers": {"sites": [{"site": 1, "stack": [0]}]},
      "timeline": {"sites": [{"site": 1, "stack": [1]}]},
      "oom": {"site": 1, "stack": [0, 1]}})";
  Report r;
  std::string error;
  ASSERT_TRUE(ReadReport(path, &r, &error)) << error;
  const json d = ReportDocument(r.model);
  EXPECT_FALSE(d.contains("frame_table"));
  const json inner = {{"function", "inner"}, {"file", "a.cu"}, {"line", 3}, {"module", "m"}};
  const json outer = {{"function", "main"}, {"file", "a.cu"}, {"line", 9}, {"module", "m"}};
  EXPECT_EQ(d["leaks"]["device"]["sites"][0]["frames"], json::array({inner, outer}));
  EXPECT_FALSE(d["leaks"]["device"]["sites"][0].contains("stack"));
  EXPECT_EQ(d["leaks"]["host"]["sites"][0]["frames"], json::array({outer}));
  EXPECT_EQ(d["peak"]["sites"][0]["frames"], json::array({inner, outer}));
  EXPECT_EQ(d["sites"][0]["frames"], json::array());
  EXPECT_EQ(d["growth"]["suspects"][0]["frames"], json::array({outer, inner}));
  EXPECT_EQ(d["transfers"]["sites"][0]["frames"], json::array({inner}));
  EXPECT_EQ(d["timeline"]["sites"][0]["frames"], json::array({outer}));
  EXPECT_EQ(d["oom"]["frames"], json::array({inner, outer}));
  EXPECT_EQ(FunctionOf(SiteOf(d["leaks"]["device"]["sites"][0])), "inner");
  // The typed sections read the same frames.
  const ReportModel& m = r.model;
  EXPECT_TRUE(m.frame_table.empty());
  ASSERT_EQ(m.leaks_device.sites.size(), 1u);
  ASSERT_EQ(m.leaks_device.sites[0].frames.size(), 2u);
  EXPECT_EQ(m.leaks_device.sites[0].frames[0].function, "inner");
  EXPECT_EQ(m.leaks_device.sites[0].frames[1].line, 9u);
  EXPECT_TRUE(m.leaks_device.sites[0].stack.empty());
  ASSERT_TRUE(m.growth.has_value());
  ASSERT_EQ(m.growth->suspects.size(), 1u);
  EXPECT_EQ(m.growth->suspects[0].frames[0].function, "main");
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_EQ(FunctionOf(*m.oom), "inner");
  ASSERT_TRUE(m.transfers.has_value());
  ASSERT_EQ(m.transfers->sites.size(), 1u);
  ASSERT_EQ(m.transfers->sites[0].frames.size(), 1u);
  EXPECT_EQ(m.transfers->sites[0].frames[0].function, "inner");
  ASSERT_TRUE(m.timeline.has_value());
  ASSERT_EQ(m.timeline->sites.size(), 1u);
  ASSERT_EQ(m.timeline->sites[0].frames.size(), 1u);
  EXPECT_EQ(m.timeline->sites[0].frames[0].function, "main");
}

// The inverse (what merge writes with): each distinct frame once, sites by
// index, and inlining gives every site its frames back as they were.
TEST(BuildFrameTable, ListsEachFrameOnceAndInliningUndoesIt) {
  json doc = json::object();
  doc["leaks"]["device"]["sites"] = json::array({Site("F()", "a.cc", 10, 1)});
  doc["sites"] = json::array({Site("G()", "b.cc", 2, 1), json{{"site", 7}}});
  doc["growth"]["suspects"] = json::array({Site("F()", "a.cc", 10, 1)});
  const json original = doc;
  ReportModel m;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &m, &error)) << error;
  m.BuildFrameTable();
  json written = json::object();
  m.ToJson(&written);
  ASSERT_TRUE(written["frame_table"].is_array());
  EXPECT_EQ(written["frame_table"].size(), 3u);  // F(), main, G(): main once
  EXPECT_EQ(written["leaks"]["device"]["sites"][0]["stack"], json::array({0, 1}));
  EXPECT_EQ(written["sites"][0]["stack"], json::array({2, 1}));
  EXPECT_FALSE(written["sites"][0].contains("frames"));
  EXPECT_EQ(written["sites"][1]["stack"], json::array());  // had no frames
  EXPECT_EQ(written["growth"]["suspects"][0]["stack"], json::array({0, 1}));
  EXPECT_EQ(ValidateReport(written), "");
  InlineFrameTable(&written);
  EXPECT_EQ(written["leaks"]["device"]["sites"][0]["frames"],
            original["leaks"]["device"]["sites"][0]["frames"]);
  EXPECT_EQ(written["sites"][0]["frames"], original["sites"][0]["frames"]);
  EXPECT_EQ(written["sites"][1]["frames"], json::array());
  EXPECT_EQ(written["growth"]["suspects"][0]["frames"],
            original["growth"]["suspects"][0]["frames"]);
  // Every figure read is written back as it was.
  EXPECT_EQ(written["leaks"]["device"]["sites"][0]["bytes"], 1);
  EXPECT_EQ(written["sites"][1]["site"], 7);
}

// The split every writer and reader shares: suppressed before categorized;
// what is neither is leaked, and so are the sites a section omitted.
TEST(LeakSplitFigures, SuppressedFirstThenCategorized) {
  LeakSplitFigures f;
  EXPECT_EQ(f.Add(100, 2, false, ""), LeakVerdict::kLeaked);
  EXPECT_EQ(f.Add(10, 1, true, "cublas"), LeakVerdict::kSuppressed);
  EXPECT_EQ(f.Add(5, 1, false, "cublas"), LeakVerdict::kCategorized);
  EXPECT_EQ(f.Add(3, 1, false, "nccl", /*categories_leak=*/true), LeakVerdict::kLeaked);
  EXPECT_EQ(f.leaked_bytes, 103u);
  EXPECT_EQ(f.LeakedBytesOf(1000), 985u);  // 882 bytes of omitted sites included
  json section = {{"bytes", 1000}, {"count", 9}};
  f.WriteTo(&section);
  EXPECT_EQ(section["leaked_bytes"], 985u);
  EXPECT_EQ(section["leaked_count"], 7u);
  EXPECT_EQ(section["suppressed_bytes"], 10u);
  EXPECT_EQ(section["categorized_bytes"], 5u);
  EXPECT_EQ(section["categories"], json({{"cublas", 5}}));
}

}  // namespace
}  // namespace gpuwatch::tools
