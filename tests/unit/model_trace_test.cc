// The typed event trace (libgpuwatch/report/model_trace.h): what ToJson and
// Dump write reads back to the same trace, Dump's event lines are what the
// document prints, a mistyped field or a reference past a table is named by
// its path, and the tools' reader, which reads the events straight from the
// text, reads what the document reader reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"
#include "tools/reading/report_reader.h"
#include "tools/reading/report_validate.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

ReportTraceEvent Event(TraceEventType type, uint64_t time_ns, uint64_t end_ns, uint64_t value,
                       uint64_t stream, int32_t device, uint32_t ref, uint16_t word0 = 0,
                       uint16_t word1 = 0) {
  return {.time_ns = time_ns,
          .end_ns = end_ns,
          .value = value,
          .stream = stream,
          .device = device,
          .ref = ref,
          .word = {word0, word1},
          .type = type};
}

// Every event type, each table used, strings JSON must escape and one that
// is not UTF-8.
ReportTrace FullTrace() {
  ReportTrace t;
  t.capacity = 65536;
  t.recorded = 9;
  t.dropped = 1;
  t.devices.resize(2);
  t.devices[0].live_bytes = 4096;
  t.devices[0].peak_bytes = 8192;
  t.devices[1].device = 1;
  t.devices[1].peak_bytes = 1 << 20;
  t.sites = {{5, "a.cu:47"}, {9, "b.cu:3"}};
  t.names = {"Touch(char*)", "(anonymous namespace)::Fill<float>(float*, int)"};
  t.phases = {"step", "step/forward"};
  TraceTexts texts(&t);
  uint16_t h2d = 0;
  uint16_t pageable = 0;
  uint16_t device = 0;
  EXPECT_TRUE(texts.Word("h2d", &h2d));
  EXPECT_TRUE(texts.Word("pageable", &pageable));
  EXPECT_TRUE(texts.Word("device", &device));
  using T = TraceEventType;
  t.events = {
      Event(T::kMem, 100, 0, 4096, 0, 0, 0),
      Event(T::kPeak, 110, 0, 4096, 0, 0, 0),
      Event(T::kCopy, 120, 180, 4096, 7, 1, 1, h2d, pageable),
      Event(T::kKernel, 200, 260, 0, 13, 1, 1),
      Event(T::kMark, 300, 0, 1, 0, 0, texts.Label("step \"1\" <ok>")),
      Event(T::kMark, 310, 0, 2, 0, 0, texts.Label("caf\xc3\xa9 \xff")),
      Event(T::kPhase, 400, 450, 0, 21497, 0, 1),
      Event(T::kOom, 500, 0, uint64_t{1} << 36, 0, -1, 0, device),
      Event(T::kMem, 600, 0, 0, 0, 1, 1),
  };
  t.events.back().has_ref = true;  // its site, b.cu:3; the first mem event is an older report's
  return t;
}

ReportModel WithTrace(ReportTrace trace) {
  ReportModel m;
  m.trigger = "exit";
  m.trace = std::move(trace);
  return m;
}

TEST(ReportTrace, WhatIsWrittenReadsBackTheSame) {
  ReportModel m = WithTrace(FullTrace());
  json doc = json::object();
  m.ToJson(&doc);
  const json& events = doc["trace"]["events"];
  ASSERT_EQ(events.size(), 9u);
  EXPECT_EQ(events[0], json::parse(R"(["mem", 100, 0, 4096])"));
  EXPECT_EQ(events[2], json::parse(R"(["copy", 120, 180, 1, 7, 4096, "h2d", "pageable", 9])"));
  EXPECT_EQ(events[3], json::parse(R"(["kernel", 200, 260, 1, 13, 1])"));
  EXPECT_EQ(events[4], json::parse(R"(["mark", 300, 1, "step \"1\" <ok>"])"));
  EXPECT_EQ(events[6], json::parse(R"(["phase", 400, 450, 21497, 1])"));
  EXPECT_EQ(events[7], json::parse(R"(["oom", 500, -1, 68719476736, "device", 5])"));
  EXPECT_EQ(events[8], json::parse(R"(["mem", 600, 1, 0, 9])"));
  EXPECT_EQ(doc["trace"]["sites"], json::parse(R"([{"site": 5, "location": "a.cu:47"},
                                                   {"site": 9, "location": "b.cu:3"}])"));
  EXPECT_EQ(doc["trace"]["devices"][1],
            json::parse(R"({"device": 1, "live_bytes": 0, "peak_bytes": 1048576})"));
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &r, &error)) << error;
  ASSERT_TRUE(r.trace.has_value());
  EXPECT_EQ(r.trace->WordOf(r.trace->events[2], 1), "pageable");
  EXPECT_EQ(r.trace->SiteOf(r.trace->events[7]).location, "a.cu:47");
  // The label that was not UTF-8 went through the JSON as a document: it
  // does not compare with the struct's bytes, and is left out.
  m.trace->labels[1] = r.trace->labels[1];
  EXPECT_EQ(*r.trace, *m.trace);
}

// Dump writes the events from their structs, the document's text from the
// rest: the same text, byte for byte, as printing the whole document, the
// string that is not UTF-8 included (U+FFFD).
TEST(ReportTrace, DumpPrintsTheEventsAsTheDocumentWould) {
  const ReportModel m = WithTrace(FullTrace());
  json doc = json::object();
  doc["kernels"] = {{"launches", 9}};
  json full = doc;
  m.ToJson(&full);
  const std::string text = m.Dump(doc);
  EXPECT_EQ(text, DumpReport(full));
  EXPECT_NE(text.find("\n      [\"mark\",310,2,\"caf\xc3\xa9 \xef\xbf\xbd\"],\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n      [\"oom\",500,-1,68719476736,\"device\",5],\n"), std::string::npos)
      << text;
  const std::string end = ",\n      [\"mem\",600,1,0,9]\n    ]\n  }\n}\n";
  EXPECT_EQ(text.substr(text.size() - end.size()), end);
  const ReportModel empty = WithTrace(ReportTrace{});
  json none = json::object();
  empty.ToJson(&none);
  EXPECT_EQ(empty.Dump(json::object()), DumpReport(none));
}

// An event's line is made in a buffer of its own: one longer than it (a
// label of 600 characters, one of 250 after 250 more, escapes included) is
// printed whole, the same as the document.
TEST(ReportTrace, AnEventLongerThanItsLineBufferIsPrintedWhole) {
  ReportTrace trace = FullTrace();
  TraceTexts texts(&trace);
  const std::string long_label = std::string(300, 'x') + "\"\\" + std::string(300, 'y');
  trace.events.push_back(
      Event(TraceEventType::kMark, 700, 0, uint64_t{1} << 63, 0, 0, texts.Label(long_label)));
  trace.events.push_back(
      Event(TraceEventType::kMark, 800, 0, 3, 0, 0, texts.Label(std::string(250, 'z'))));
  const ReportModel m = WithTrace(std::move(trace));
  json full = json::object();
  m.ToJson(&full);
  const std::string text = m.Dump(json::object());
  EXPECT_EQ(text, DumpReport(full));
  EXPECT_NE(text.find("[\"mark\",700,9223372036854775808,\"" + std::string(300, 'x') + "\\\"\\\\" +
                      std::string(300, 'y') + "\"]"),
            std::string::npos);
}

// Fields a trace leaves out read as 0 or empty; a mistyped one, an event of
// the wrong shape or a reference past its table is named by its path. An
// event of a type this build does not know is skipped, and counted in the
// paths of those after it.
TEST(ReportTrace, AMistypedFieldOrABadReferenceIsNamed) {
  ReportModel r;
  std::string error;
  ASSERT_TRUE(
      ReadReportModel(json::parse(R"({"trace": {"events": [["peak", 5, 7]]}})"), &r, &error))
      << error;
  ASSERT_TRUE(r.trace.has_value());
  EXPECT_EQ(r.trace->capacity, 0u);
  EXPECT_TRUE(r.trace->sites.empty());
  ASSERT_EQ(r.trace->events.size(), 1u);
  EXPECT_EQ(r.trace->events[0].value, 7u);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"capacity": "big"})", "trace.capacity is \"big\", expected a count (an integer)"},
      {R"({"devices": [{"device": 1.5}]})", "trace.devices[0].device is 1.5, expected an integer"},
      {R"({"devices": [{"peak_bytes": -1}]})",
       "trace.devices[0].peak_bytes is -1, expected a count (not negative)"},
      {R"({"sites": [7]})", "trace.sites[0] is 7, expected an object"},
      {R"({"sites": [{"site": 4294967296}]})",
       "trace.sites[0].site is 4294967296, expected a site id (below 2^32)"},
      {R"({"names": ["a", 7]})", "trace.names[1] is 7, expected a string"},
      {R"({"phases": "step"})", "trace.phases is \"step\", expected an array"},
      {R"({"events": {}})", "trace.events is an object, expected an array"},
      {R"({"events": [["mem", 1, 0, 1], {"type": "mem"}]})",
       "trace.events[1] is an object, expected an event (an array of its type and elements)"},
      {R"({"events": [[]]})",
       "trace.events[0] is an array, expected an event (an array of its type and elements)"},
      {R"({"events": [[7, 1]]})", "trace.events[0][0] is 7, expected an event type (a string)"},
      {R"({"events": [["mem", 1, 0]]})",
       "trace.events[0] is a \"mem\" event of 3 elements, expected 4"},
      {R"({"events": [["mem", 1, 0, "4096"]]})",
       "trace.events[0][3] is \"4096\", expected a count (an integer)"},
      {R"({"events": [["mem", -1, 0, 1]]})",
       "trace.events[0][1] is -1, expected a count (not negative)"},
      {R"({"events": [["mem", 1, 2147483648, 1]]})",
       "trace.events[0][2] is 2147483648, expected a device ordinal (a 32-bit integer)"},
      {R"({"events": [["mark", 1, 1, 5]]})", "trace.events[0][3] is 5, expected a string"},
      {R"({"events": [["copy", 1, 2, 0, 7, 64, "h2d", ["pageable"], 5]]})",
       "trace.events[0][7] is an array, expected a string"},
      {R"({"events": [["oom", 1, 0, 64, "device", 4294967296]]})",
       "trace.events[0][5] is 4294967296, expected an index or a site id (below 2^32)"},
      {R"({"sites": [{"site": 5}], "events": [["oom", 1, 0, 64, "device", 5],
                                              ["copy", 1, 2, 0, 7, 64, "h2d", "pageable", 6]]})",
       "trace.events[1][8] is 6, a site trace.sites does not list"},
      {R"({"sites": [{"site": 5}], "events": [["mem", 1, 0, 64, 5], ["mem", 2, 0, 0, 6]]})",
       "trace.events[1][4] is 6, a site trace.sites does not list"},
      {R"({"names": ["k"], "events": [["kernel", 1, 2, 0, 7, 0], ["kernel", 1, 2, 0, 7, 1]]})",
       "trace.events[1][5] is 1, past the end of trace.names, which has 1"},
      {R"({"events": [["alloc", 1], ["later", 2, 3], ["phase", 1, 2, 3, 0]]})",
       "trace.events[2][4] is 0, past the end of trace.phases, which has 0"},
  };
  for (const auto& [trace, problem] : bad) {
    EXPECT_FALSE(ReadReportModel({{"trace", json::parse(trace)}}, &r, &error)) << trace;
    EXPECT_EQ(error, problem) << trace;
  }
}

TEST(TraceTexts, EachStringOnceAndAtMost65536Words) {
  ReportTrace t;
  TraceTexts texts(&t);
  uint16_t index = 7;
  ASSERT_TRUE(texts.Word("h2d", &index));
  EXPECT_EQ(index, 0);
  ASSERT_TRUE(texts.Word("d2h", &index));
  ASSERT_TRUE(texts.Word("h2d", &index));
  EXPECT_EQ(index, 0);
  EXPECT_EQ(t.words, (std::vector<std::string>{"h2d", "d2h"}));
  EXPECT_EQ(texts.Label("a"), 0u);
  EXPECT_EQ(texts.Label("b"), 1u);
  EXPECT_EQ(texts.Label("a"), 0u);
  for (int i = 2; i < 65536; ++i) ASSERT_TRUE(texts.Word(std::to_string(i), &index));
  EXPECT_EQ(index, 65535);
  EXPECT_FALSE(texts.Word("one more", &index));
  EXPECT_TRUE(texts.Word("h2d", &index));
}

class ReadTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpuwatch-trace-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    path_ = std::string(dir) + "/r.json";
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // ReadReport of a report with `trace`, its trace kept; "" or its problem.
  std::string Read(const std::string& trace, tools::Report* r) {
    std::ofstream(path_) << R"({"schema": "gpuwatch-report", "version": 2, "totals": {},
        "leaks": {"device": {}}, "sites": [], "trace": )"
                         << trace << "}";
    std::string error;
    if (tools::ReadReport(path_, r, &error, tools::TraceSection::kKeep)) return "";
    EXPECT_EQ(error.rfind(path_ + ": malformed gpuwatch report: ", 0), 0u) << error;
    return error.substr(error.find(": malformed gpuwatch report: ") + 29);
  }

  std::string dir_;
  std::string path_;
};

// The tools' reader reads the events from the text as it parses it, not
// from a document: it reads what ReadReportModel reads from one, tables
// after the events included, and names the same problems.
TEST_F(ReadTraceTest, EventsReadFromTheTextAreTheDocumentsEvents) {
  json doc = json::object();
  WithTrace(FullTrace()).ToJson(&doc);
  // As a file holds it: the label that is not UTF-8 with U+FFFD.
  doc = json::parse(doc.dump(-1, ' ', false, json::error_handler_t::replace));
  ReportModel from_doc;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &from_doc, &error)) << error;
  tools::Report r;
  // The events first: the sites, names and phases they refer to come after.
  std::string text = "{\"events\": " + doc["trace"]["events"].dump();
  for (const auto& [key, value] : doc["trace"].items()) {
    if (key != "events") text += ", \"" + key + "\": " + value.dump();
  }
  ASSERT_EQ(Read(text + "}", &r), "");
  ASSERT_TRUE(r.model.trace.has_value());
  EXPECT_EQ(*r.model.trace, *from_doc.trace);

  EXPECT_EQ(
      Read(R"({"names": ["k"], "events": [["kernel", 1, 2, 0, 7, 0], ["mem", 1, 0, [4]]]})", &r),
      "trace.events[1][3] is an array, expected a count (an integer)");
  EXPECT_EQ(Read(R"({"events": [["mem", 1, 0, 4], 5]})", &r),
            "trace.events[1] is 5, expected an event (an array of its type and elements)");
  EXPECT_EQ(Read(R"({"events": [["new", {"a": [1, 2]}], ["kernel", 1, 2, 0, 7, 3]]})", &r),
            "trace.events[1][5] is 3, past the end of trace.names, which has 0");
  EXPECT_EQ(Read(R"({"sites": [{"site": "5"}], "events": []})", &r),
            "trace.sites[0].site is \"5\", expected a count (an integer)");
  const std::string long_label(tools::kMaxReportString + 1, 'x');
  EXPECT_EQ(Read(R"({"events": [["mark", 1, 1, ")" + long_label + R"("]]})", &r),
            "trace.events[0][3] is a string of 1048577 bytes (at most 1048576)");
  // The same file read without its trace: nothing of it is read.
  std::string skipped_error;
  tools::Report skipped;
  ASSERT_TRUE(tools::ReadReport(path_, &skipped, &skipped_error)) << skipped_error;
  EXPECT_FALSE(skipped.model.trace.has_value());
}

}  // namespace
}  // namespace gpuwatch
