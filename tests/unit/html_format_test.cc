// The HTML renderer of `gpuwatch report --format html`: the report goes into
// the page as JSON that no string can break out of, and the page refers to
// nothing outside itself.
#include "tools/formats/html_format.h"

#include <gtest/gtest.h>

#include <string>

#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch::tools {
namespace {

const char kHostile[] = "</script><script>alert(1)</script><!-- & -->";

// The text of the page's data element.
std::string DataOf(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"gw-data\">";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = page.find("</script>", begin);
  if (end == std::string::npos) return "";
  return page.substr(begin + open.size(), end - begin - open.size());
}

json HostileReport() {
  return {{"schema", "gpuwatch-report"},
          {"version", 1},
          {"trigger", "exit"},
          {"label", kHostile},
          {"process", {{"pid", 7}, {"command", {kHostile}}}},
          {"leaks",
           {{"device",
             {{"bytes", 4096},
              {"count", 1},
              {"sites",
               {{{"site", 3},
                 {"location", "a.cu:12"},
                 {"bytes", 4096},
                 {"count", 1},
                 {"frames", {{{"function", kHostile}, {"file", "a.cu"}, {"line", 12}}}}}}}}}}},
          {"timeline",
           {{"marks",
             {{"total", 1},
              {"samples",
               {{{"time_ns", 5}, {"device_bytes", 4096}, {"mark", 1}, {"label", kHostile}}}}}}}},
          {"kernels", {{"launches", 1}}}};
}

// The page's sites name their frames by index into its frame_table: the
// same document with each site's `frames` back in place.
json Inlined(json doc) {
  const json table = doc["frame_table"];
  ForEachReportSite(&doc, [&table](json& site) {
    if (!site.contains("stack")) return;
    json frames = json::array();
    for (const json& i : site["stack"]) frames.push_back(table.at(i.get<size_t>()));
    site.erase("stack");
    site["frames"] = std::move(frames);
  });
  doc.erase("frame_table");
  return doc;
}

// The report as ReadReport gives it: its typed model.
Report ReportOf(const json& doc) {
  Report r;
  std::string error;
  EXPECT_TRUE(ReadReportModel(doc, &r.model, &error)) << error;
  return r;
}

TEST(ScriptSafeJson, EscapesWhatCouldEndTheScriptAndParsesBackTheSame) {
  const json doc = {{"f", kHostile}, {"n", 1}};
  const std::string text = ScriptSafeJson(doc);
  EXPECT_EQ(text.find('<'), std::string::npos) << text;
  EXPECT_EQ(text.find('>'), std::string::npos) << text;
  EXPECT_EQ(text.find('&'), std::string::npos) << text;
  EXPECT_EQ(text, R"({"f":"\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e)"
                  R"(\u003c!-- \u0026 --\u003e","n":1})");
  EXPECT_EQ(json::parse(text), doc);
}

TEST(ScriptSafeJson, InvalidUtf8BecomesTheReplacementCharacter) {
  const json doc = {{"f", std::string("a\xff"
                                      "b")}};
  EXPECT_EQ(ScriptSafeJson(doc),
            "{\"f\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(HtmlReport, EmbedsTheShownSectionsAsSafeJson) {
  const Report report = ReportOf(HostileReport());
  const std::string page = HtmlReport(report);
  const json doc = ReportDocument(report.model);  // as `--format json` shows it
  ASSERT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  const std::string data = DataOf(page);
  ASSERT_FALSE(data.empty());
  const json embedded = json::parse(data);
  EXPECT_EQ(Inlined(embedded)["leaks"], doc["leaks"]);
  EXPECT_EQ(embedded["leaks"]["device"]["sites"][0]["stack"], json::array({0}));
  EXPECT_EQ(embedded["frame_table"][0]["function"], kHostile);
  EXPECT_EQ(embedded["process"], doc["process"]);
  EXPECT_EQ(embedded["process"]["command"][0], kHostile);
  EXPECT_EQ(embedded["label"], kHostile);
  EXPECT_FALSE(embedded.contains("kernels"));  // not shown, so not embedded
  // The timeline, as the typed model writes it.
  EXPECT_EQ(embedded["timeline"]["marks"]["samples"][0]["label"], kHostile);
  EXPECT_EQ(embedded["timeline"]["marks"]["samples"][0]["device_bytes"], 4096);
  // The hostile strings appear only escaped: the first "</script>" after the
  // data element's start is its own end.
  EXPECT_EQ(page.find(kHostile), std::string::npos);
  EXPECT_EQ(page.find("alert(1)</script>"), std::string::npos);
  EXPECT_EQ(page.find("gpuwatch_report_placeholder"), std::string::npos);
}

// 1,000 sites through one helper: its frames once in the page, not 1,000
// times; each listed site's allocation sizes; the trace's memory events with
// their sites, for the chart's steps.
TEST(HtmlReport, SharesFramesAndCarriesSizesAndMemoryEvents) {
  json doc = HostileReport();
  json& sites = doc["leaks"]["device"]["sites"];
  const json helper = {{"function", "Leak(unsigned long)"}, {"file", "w.cu"}, {"line", 23}};
  sites = json::array();
  doc["sites"] = json::array();
  for (int i = 0; i < 1000; ++i) {
    const json caller = {
        {"function", "Path<" + std::to_string(i) + ">()"}, {"file", "w.cu"}, {"line", 40}};
    sites.push_back({{"site", i + 1},
                     {"location", "w.cu:23"},
                     {"bytes", 4096},
                     {"count", 1},
                     {"frames", {helper, caller}}});
  }
  doc["sites"].push_back({{"site", 5000},
                          {"location", "w.cu:23"},
                          {"allocs", 6},
                          {"alloc_bytes", 100},
                          {"largest", 64},
                          {"frames", {helper}},
                          {"sizes", {3, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0}}});
  doc["trace"] = {{"capacity", 8},
                  {"recorded", 3},
                  {"dropped", 1},
                  {"sites", {{{"site", 7}, {"location", "w.cu:23"}}}},
                  {"events", {{"mem", 10, 0, 4096, 7}, {"mem", 20, 0, 0}}}};
  Report report;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &report.model, &error)) << error;
  ASSERT_TRUE(report.model.trace.has_value());
  report.model.InlineFrameTable();
  const json embedded = json::parse(DataOf(HtmlReport(report)));
  EXPECT_EQ(embedded["frame_table"].size(), 1001u);  // the helper once, each caller once
  EXPECT_EQ(embedded["leaks"]["device"]["sites"][999]["stack"], json::array({0, 1000}));
  // Site 5000 is in no list the page shows: no sizes for it.
  EXPECT_EQ(embedded["site_allocations"], json::object());
  EXPECT_EQ(embedded["memory_steps"],
            json::parse(R"({"recorded": 3, "dropped": 1, "sites": [[7, "w.cu:23"]],
                            "events": [10, 0, 4096, 0, 20, 0, 0, -1]})"));
  // A listed site's sizes: allocations, bytes, largest, then the buckets.
  doc["sites"][0]["site"] = 1;
  ASSERT_TRUE(ReadReportModel(doc, &report.model, &error)) << error;
  EXPECT_EQ(json::parse(DataOf(HtmlReport(report)))["site_allocations"],
            json::parse(R"({"1": [6, 100, 64, 3, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0]})"));
}

// The process's findings, in the text report's words; none without them.
TEST(HtmlReport, CarriesTheFindingsInTheTextReportsWords) {
  json doc = HostileReport();
  Report report;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &report.model, &error)) << error;
  EXPECT_FALSE(json::parse(DataOf(HtmlReport(report))).contains("page_findings"));
  doc["lifecycle"] = {
      {"first_call_observed", true},
      {"findings",
       {{{"type", "alloc_churn"},
         {"site", 3},
         {"location", "loop.cu:12"},
         {"count", 50},
         {"cycles", 50},
         {"bytes", 52428800},
         {"call_ns", 1500000}},
        {{"type", "context_churn"}, {"contexts_created", 5}, {"contexts_destroyed", 4}}}}};
  ASSERT_TRUE(ReadReportModel(doc, &report.model, &error)) << error;
  const json findings = json::parse(DataOf(HtmlReport(report)))["page_findings"];
  ASSERT_EQ(findings.size(), 2u) << findings.dump(1);
  EXPECT_EQ(findings[0][0], "alloc_churn");
  EXPECT_EQ(findings[0][1], AllocChurnText(report.model.lifecycle->findings[0].churn.value()));
  EXPECT_EQ(findings[0][1].get<std::string>().substr(0, 70),
            "50 allocations at loop.cu:12 freed and made again (50 cycles of alloca");
  EXPECT_EQ(findings[1][0], "context_churn");
  EXPECT_EQ(findings[1][1], ContextChurnText(5, 4));
}

TEST(HtmlReport, RefersToNothingOutsideThePage) {
  const std::string page = HtmlReport(ReportOf(HostileReport()));
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  // Data reaches the page as text only.
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
  EXPECT_EQ(page.find("document.write"), std::string::npos);
}

}  // namespace
}  // namespace gpuwatch::tools
