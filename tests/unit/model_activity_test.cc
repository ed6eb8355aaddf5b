// The typed transfers, kernels, timeline and lifecycle sections
// (libgpuwatch/report/model_activity.h): what ToJson writes reads back to
// the same values and writes the same document again; fields written only
// with a count, and the lifecycle's nulls, keep their shape; a mistyped field
// of each section is refused with its path named.
#include "libgpuwatch/report/model_activity.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuwatch {
namespace {

using nlohmann::json;

ReportModel ActivityModel() {
  ReportModel m;
  m.frame_table = {{"Copy()", "/src/t.cu", 44, "/bin/app", false},
                   {"main", "/src/t.cu", 90, "/bin/app", false}};
  ReportTransfers& t = m.transfers.emplace();
  TransferTotal timed;
  timed.direction = "h2d";
  timed.host = "pageable";
  timed.count = 6;
  timed.bytes = 6291456;
  timed.timed_count = 6;
  timed.duration_ns = 393216;
  timed.gbps = 16.0;
  t.totals.push_back(timed);
  TransferTotal untimed;
  untimed.direction = "d2h";
  untimed.host = "pinned";
  untimed.count = 2;
  untimed.bytes = 128;
  t.totals.push_back(untimed);
  t.best_gbps = {{"h2d", 32.5}, {"d2h", 16.0}};
  TransferSite& s = t.sites.emplace_back();
  s.site = 7;
  s.location = "t.cu:44";
  s.stack = {0, 1};
  s.all = timed;
  s.sync = 1;
  s.async = 5;
  s.directions["h2d"] = timed;
  s.hosts["pageable"] = untimed;
  s.histogram = {{0, 1}, {4096, 200}};
  TransferFindingRow& f = t.findings.emplace_back();
  f.type = "slow_copies";
  f.site = 7;
  f.location = "t.cu:44";
  f.count = 6;
  f.bytes = 6291456;
  f.message = "h2d copies at t.cu:44 reach 16.0 GB/s, best h2d is 32.5 GB/s";
  f.advice = "pin it";
  f.direction = "h2d";
  f.gbps = 16.0;
  f.best_gbps = 32.5;
  TransferFindingRow& small = t.findings.emplace_back();
  small.type = "small_copies";
  small.site = 7;
  small.count = 200;
  t.unmatched_records = 3;
  t.pending_dropped = 1;

  ReportKernels& k = m.kernels.emplace();
  k.launches = 10;
  k.distinct = 2;
  k.timing = true;
  k.kernels.push_back({7, 7, 123456, "void Fill<4>(float*)", "_Z4FillILi4EEvPf"});
  k.kernels.push_back({3, 0, 0, "Other()", "_Z5Otherv"});

  ReportTimeline& tl = m.timeline.emplace();
  tl.capacity = 256;
  tl.interval_ms = 1000;
  tl.marks.total = 8;
  tl.marks.samples = {{62547995, 262144, 1, "step"}, {72547995, 524288, 2, ""}};
  tl.periodic.total = 1;
  tl.periodic.samples = {{1000000000, 4096, 0, ""}};
  TimelineSite& ts = tl.sites.emplace_back();
  ts.site = 4;
  ts.location = "leaky_loop.cu:45";
  ts.stack = {1};
  ts.max_bytes = 524288;
  ts.marks = {262144, 524288};
  ts.periodic = {0};

  ReportLifecycle& l = m.lifecycle.emplace();
  l.first_call_ns = 4412909;
  l.context_ready_ns = 4461441;
  l.first_call_observed = true;
  l.blocked = {{"device", {331, 1}}, {"stream", {1623, 1}}, {"event", {0, 0}}, {"copy", {9, 26}}};
  l.blocked_total_ns = 1963;
  l.init_latency_ns = 48532;
  l.teardown_ns = 598674;
  l.exit_status = 3;
  l.first_launch_ns = 4493120;
  l.cold_start_ns = 80211;
  l.contexts = {2, 1, 4, 9437184, 0};
  l.findings.push_back(
      {.contexts_created = 5, .contexts_destroyed = 4, .type = "context_churn", .churn = {}});
  const AllocChurn churn{.site = 7,
                         .count = 50,
                         .cycles = 50,
                         .bytes = 52428800,
                         .call_ns = 913000,
                         .location = "churn_loop.cu:31"};
  l.findings.push_back({.type = kAllocChurnType, .churn = churn});
  return m;
}

void ExpectSameFigures(const TransferFigures& a, const TransferFigures& b,
                       const std::string& what) {
  for (const CountField<TransferFigures>& c : TransferFigures::Counts()) {
    EXPECT_EQ(a.*c.member, b.*c.member) << what << "." << c.key;
  }
  EXPECT_EQ(a.gbps, b.gbps) << what;
}

TEST(ModelActivity, WhatIsWrittenReadsBackTheSame) {
  const ReportModel m = ActivityModel();
  json doc = json::object();
  m.ToJson(&doc);
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &r, &error)) << error;

  ASSERT_TRUE(r.transfers.has_value());
  const ReportTransfers& t = *r.transfers;
  ASSERT_EQ(t.totals.size(), 2u);
  EXPECT_EQ(t.totals[0].direction, "h2d");
  EXPECT_EQ(t.totals[0].host, "pageable");
  ExpectSameFigures(t.totals[0], m.transfers->totals[0], "totals[0]");
  ExpectSameFigures(t.totals[1], m.transfers->totals[1], "totals[1]");
  EXPECT_FALSE(t.totals[1].gbps.has_value());
  EXPECT_EQ(t.best_gbps, m.transfers->best_gbps);
  EXPECT_TRUE(t.process_figures);
  EXPECT_EQ(t.unmatched_records, 3u);
  EXPECT_EQ(t.pending_dropped, 1u);
  ASSERT_EQ(t.sites.size(), 1u);
  const TransferSite& s = t.sites[0];
  EXPECT_EQ(s.site, 7u);
  EXPECT_EQ(s.location, "t.cu:44");
  EXPECT_EQ(s.stack, (std::vector<uint32_t>{0, 1}));
  ExpectSameFigures(s.all, m.transfers->sites[0].all, "sites[0]");
  EXPECT_EQ(s.sync, 1u);
  EXPECT_EQ(s.async, 5u);
  ASSERT_EQ(s.directions.size(), 1u);
  ExpectSameFigures(s.directions.at("h2d"), m.transfers->totals[0], "directions.h2d");
  ASSERT_EQ(s.hosts.size(), 1u);
  ExpectSameFigures(s.hosts.at("pageable"), m.transfers->totals[1], "hosts.pageable");
  ASSERT_EQ(s.histogram.size(), 2u);
  EXPECT_EQ(s.histogram[1].min_bytes, 4096u);
  EXPECT_EQ(s.histogram[1].count, 200u);
  ASSERT_EQ(t.findings.size(), 2u);
  const TransferFindingRow& f = t.findings[0];
  EXPECT_EQ(f.type, "slow_copies");
  EXPECT_EQ(f.site, 7u);
  EXPECT_EQ(f.location, "t.cu:44");
  EXPECT_EQ(f.count, 6u);
  EXPECT_EQ(f.bytes, 6291456u);
  EXPECT_EQ(f.message, m.transfers->findings[0].message);
  EXPECT_EQ(f.advice, "pin it");
  EXPECT_EQ(f.direction, "h2d");
  EXPECT_EQ(f.gbps, 16.0);
  EXPECT_EQ(f.best_gbps, 32.5);
  EXPECT_EQ(t.findings[1].direction, "");
  EXPECT_FALSE(t.findings[1].gbps.has_value());

  ASSERT_TRUE(r.kernels.has_value());
  EXPECT_EQ(r.kernels->launches, 10u);
  EXPECT_EQ(r.kernels->distinct, 2u);
  EXPECT_TRUE(r.kernels->timing);
  ASSERT_EQ(r.kernels->kernels.size(), 2u);
  EXPECT_EQ(r.kernels->kernels[0].name, "void Fill<4>(float*)");
  EXPECT_EQ(r.kernels->kernels[0].mangled, "_Z4FillILi4EEvPf");
  EXPECT_EQ(r.kernels->kernels[0].launches, 7u);
  EXPECT_EQ(r.kernels->kernels[0].timed, 7u);
  EXPECT_EQ(r.kernels->kernels[0].gpu_ns, 123456u);
  EXPECT_EQ(r.kernels->kernels[1].launches, 3u);

  ASSERT_TRUE(r.timeline.has_value());
  const ReportTimeline& tl = *r.timeline;
  EXPECT_EQ(tl.capacity, 256u);
  EXPECT_EQ(tl.interval_ms, 1000u);
  EXPECT_EQ(tl.marks.total, 8u);
  ASSERT_EQ(tl.marks.samples.size(), 2u);
  EXPECT_EQ(tl.marks.samples[0].time_ns, 62547995u);
  EXPECT_EQ(tl.marks.samples[0].device_bytes, 262144u);
  EXPECT_EQ(tl.marks.samples[0].mark, 1u);
  EXPECT_EQ(tl.marks.samples[0].label, "step");
  EXPECT_EQ(tl.periodic.total, 1u);
  ASSERT_EQ(tl.periodic.samples.size(), 1u);
  EXPECT_EQ(tl.periodic.samples[0].mark, 0u);
  ASSERT_EQ(tl.sites.size(), 1u);
  EXPECT_EQ(tl.sites[0].site, 4u);
  EXPECT_EQ(tl.sites[0].location, "leaky_loop.cu:45");
  EXPECT_EQ(tl.sites[0].stack, std::vector<uint32_t>{1});
  EXPECT_EQ(tl.sites[0].max_bytes, 524288u);
  EXPECT_EQ(tl.sites[0].marks, m.timeline->sites[0].marks);
  EXPECT_EQ(tl.sites[0].periodic, m.timeline->sites[0].periodic);

  ASSERT_TRUE(r.lifecycle.has_value());
  const ReportLifecycle& l = *r.lifecycle;
  EXPECT_EQ(l.first_call_ns, 4412909u);
  EXPECT_EQ(l.context_ready_ns, 4461441u);
  EXPECT_TRUE(l.first_call_observed);
  ASSERT_EQ(l.blocked.size(), 4u);
  EXPECT_EQ(l.blocked.at("copy").ns, 9u);
  EXPECT_EQ(l.blocked.at("copy").count, 26u);
  EXPECT_EQ(l.blocked_total_ns, 1963u);
  EXPECT_EQ(l.init_latency_ns, 48532u);
  EXPECT_EQ(l.teardown_ns, 598674u);
  EXPECT_EQ(l.exit_status, 3);
  EXPECT_EQ(l.first_launch_ns, 4493120u);
  EXPECT_EQ(l.cold_start_ns, 80211u);
  EXPECT_EQ(l.contexts.created, 2u);
  EXPECT_EQ(l.contexts.destroyed, 1u);
  ASSERT_EQ(l.findings.size(), 2u);
  EXPECT_EQ(l.findings[0].type, "context_churn");
  EXPECT_EQ(l.findings[0].contexts_created, 5u);
  EXPECT_EQ(l.findings[0].contexts_destroyed, 4u);
  EXPECT_FALSE(l.findings[0].churn.has_value());
  EXPECT_EQ(l.findings[1].type, "alloc_churn");
  ASSERT_TRUE(l.findings[1].churn.has_value());
  EXPECT_EQ(l.findings[1].churn->site, 7u);
  EXPECT_EQ(l.findings[1].churn->cycles, 50u);
  EXPECT_EQ(l.findings[1].churn->bytes, 52428800u);
  EXPECT_EQ(l.findings[1].churn->call_ns, 913000u);
  EXPECT_EQ(l.findings[1].churn->location, "churn_loop.cu:31");
  EXPECT_EQ(l.contexts.freed_count, 4u);
  EXPECT_EQ(l.contexts.freed_bytes, 9437184u);
  EXPECT_EQ(l.contexts.destroys_kept, 0u);

  // Written again, the document is the same.
  json again = json::object();
  r.ToJson(&again);
  EXPECT_EQ(again, doc);
}

// The fields written only with a count, and the lifecycle's nulls, as the
// library has always written them (docs/report-format.md).
TEST(ModelActivity, OptionalFieldsKeepTheirShape) {
  ReportModel m = ActivityModel();
  json doc = json::object();
  m.ToJson(&doc);
  const json& untimed = doc["transfers"]["totals"][1];
  EXPECT_EQ(untimed, json::parse(R"({"direction": "d2h", "host": "pinned", "count": 2,
                                     "bytes": 128})"));
  EXPECT_EQ(doc["transfers"]["totals"][0]["gbps"], 16.0);
  EXPECT_EQ(doc["transfers"]["findings"][1].count("direction"), 0u);
  EXPECT_EQ(doc["transfers"]["findings"][1].count("best_gbps"), 0u);
  EXPECT_EQ(doc["transfers"]["sites"][0]["histogram"],
            json::parse(R"([{"min_bytes": 0, "count": 1}, {"min_bytes": 4096, "count": 200}])"));
  EXPECT_EQ(doc["kernels"]["kernels"][1],
            json::parse(R"j({"name": "Other()", "mangled": "_Z5Otherv", "launches": 3})j"));
  EXPECT_EQ(doc["timeline"]["periodic"]["samples"][0],
            json::parse(R"({"time_ns": 1000000000, "device_bytes": 4096})"));
  EXPECT_EQ(doc["timeline"]["marks"]["samples"][1]["label"], "");
  EXPECT_EQ(doc["lifecycle"]["blocked"]["total_ns"], 1963);
  EXPECT_EQ(doc["lifecycle"]["blocked"]["device"], json::parse(R"({"ns": 331, "count": 1})"));

  // A report written before exit: null, never absent, and read back so.
  m.lifecycle->init_latency_ns.reset();
  m.lifecycle->teardown_ns.reset();
  m.lifecycle->exit_status.reset();
  // A merged report's transfers: the totals alone.
  m.transfers->process_figures = false;
  m.transfers->sites.clear();
  m.transfers->findings.clear();
  json before = json::object();
  m.ToJson(&before);
  for (const char* k : {"init_latency_ns", "teardown_ns", "exit_status"}) {
    ASSERT_TRUE(before["lifecycle"].contains(k)) << k;
    EXPECT_TRUE(before["lifecycle"][k].is_null()) << k;
  }
  EXPECT_EQ(before["transfers"].size(), 3u);  // totals, sites, findings
  EXPECT_FALSE(before["transfers"].contains("best_gbps"));
  EXPECT_FALSE(before["transfers"].contains("unmatched_records"));
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(before, &r, &error)) << error;
  EXPECT_FALSE(r.lifecycle->teardown_ns.has_value());
  EXPECT_FALSE(r.lifecycle->exit_status.has_value());
  EXPECT_FALSE(r.transfers->process_figures);
  json again = json::object();
  r.ToJson(&again);
  EXPECT_EQ(again, before);
}

// Sites of these sections are sites like any other: their stacks name
// frames of the table, and BuildFrameTable/InlineFrameTable cover them.
TEST(ModelActivity, SitesShareTheFrameTable) {
  ReportModel m = ActivityModel();
  m.InlineFrameTable();
  ASSERT_EQ(m.transfers->sites[0].frames.size(), 2u);
  EXPECT_EQ(m.transfers->sites[0].frames[0].function, "Copy()");
  ASSERT_EQ(m.timeline->sites[0].frames.size(), 1u);
  EXPECT_EQ(m.timeline->sites[0].frames[0].function, "main");
  m.BuildFrameTable();
  EXPECT_EQ(m.frame_table.size(), 2u);
  EXPECT_EQ(m.transfers->sites[0].stack, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(m.timeline->sites[0].stack, std::vector<uint32_t>{1});
  json doc = json::object();
  ActivityModel().ToJson(&doc);
  doc["timeline"]["sites"][0]["stack"] = {2};
  ReportModel r;
  std::string error;
  EXPECT_FALSE(ReadReportModel(doc, &r, &error));
  EXPECT_EQ(error, "timeline.sites[0].stack[0] is 2, past the end of frame_table (2 frames)");
}

// A mistyped field of each section is refused, named by its path.
TEST(ModelActivity, AMistypedFieldIsNamed) {
  struct Case {
    const char* section;
    const char* text;
    const char* problem;
  };
  const Case kCases[] = {
      {"transfers", R"({"totals": [{"direction": "h2d", "bytes": -1}]})",
       "transfers.totals[0].bytes is -1, expected a count (not negative)"},
      {"transfers", R"({"totals": [{"direction": 3}]})",
       "transfers.totals[0].direction is 3, expected a string"},
      {"transfers", R"({"totals": [7]})", "transfers.totals[0] is 7, expected an object"},
      {"transfers", R"({"totals": [{"gbps": "fast"}]})",
       "transfers.totals[0].gbps is \"fast\", expected a number"},
      {"transfers", R"({"best_gbps": {"h2d": "x"}})",
       "transfers.best_gbps.h2d is \"x\", expected a number"},
      {"transfers", R"({"sites": [{"site": 1, "stack": [], "async": 1.5}]})",
       "transfers.sites[0].async is 1.5, expected a count (an integer)"},
      {"transfers", R"({"sites": [{"directions": {"h2d": {"count": "2"}}}]})",
       "transfers.sites[0].directions.h2d.count is \"2\", expected a count (an integer)"},
      {"transfers", R"({"sites": [{"hosts": {"pinned": 4}}]})",
       "transfers.sites[0].hosts.pinned is 4, expected an object"},
      {"transfers", R"({"sites": [{"histogram": [{"min_bytes": -4}]}]})",
       "transfers.sites[0].histogram[0].min_bytes is -4, expected a count (not negative)"},
      {"transfers", R"({"findings": [{"message": 5}]})",
       "transfers.findings[0].message is 5, expected a string"},
      {"transfers", R"({"unmatched_records": true})",
       "transfers.unmatched_records is true, expected a count (an integer)"},
      {"kernels", R"({"timing": "yes"})", "kernels.timing is \"yes\", expected true or false"},
      {"kernels", R"({"kernels": [{"name": "k", "gpu_ns": -1}]})",
       "kernels.kernels[0].gpu_ns is -1, expected a count (not negative)"},
      {"kernels", R"({"distinct": 2.5})", "kernels.distinct is 2.5, expected a count (an integer)"},
      {"timeline", R"({"sites": [{"site": 1, "marks": [1, "x"]}]})",
       "timeline.sites[0].marks[1] is \"x\", expected a count (an integer)"},
      {"timeline", R"({"marks": {"samples": [{"label": 1}]}})",
       "timeline.marks.samples[0].label is 1, expected a string"},
      {"timeline", R"({"periodic": []})", "timeline.periodic is an array, expected an object"},
      {"timeline", R"({"capacity": -256})",
       "timeline.capacity is -256, expected a count (not negative)"},
      {"lifecycle", R"({"teardown_ns": "slow"})",
       "lifecycle.teardown_ns is \"slow\", expected a count (an integer)"},
      {"lifecycle", R"({"exit_status": 0.5})", "lifecycle.exit_status is 0.5, expected an integer"},
      {"lifecycle", R"({"blocked": {"device": {"ns": -1}}})",
       "lifecycle.blocked.device.ns is -1, expected a count (not negative)"},
      {"lifecycle", R"({"blocked": {"total_ns": "x"}})",
       "lifecycle.blocked.total_ns is \"x\", expected a count (an integer)"},
      {"lifecycle", R"({"first_call_observed": 1})",
       "lifecycle.first_call_observed is 1, expected true or false"},
      {"lifecycle", R"({"contexts": {"freed_bytes": "9"}})",
       "lifecycle.contexts.freed_bytes is \"9\", expected a count (an integer)"},
      {"kernels", "[]", "kernels is an array, expected an object"},
  };
  for (const Case& c : kCases) {
    ReportModel r;
    std::string error;
    EXPECT_FALSE(ReadReportModel({{c.section, json::parse(c.text)}}, &r, &error)) << c.text;
    EXPECT_EQ(error, c.problem);
  }

  // Absent or null fields read as 0, "" or absent.
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(
      json::parse(R"({"lifecycle": {"teardown_ns": null}, "kernels": {}, "timeline": {}})"), &r,
      &error))
      << error;
  EXPECT_FALSE(r.lifecycle->teardown_ns.has_value());
  EXPECT_FALSE(r.lifecycle->first_call_observed);
  EXPECT_TRUE(r.kernels->kernels.empty());
  EXPECT_TRUE(r.timeline->sites.empty());
  EXPECT_FALSE(r.transfers.has_value());
}

// Each section's field table names distinct members, with the rule merge
// applies.
TEST(ModelActivity, FieldTablesNameEachMemberOnce) {
  TransferFigures f;
  uint64_t n = 1;
  for (const CountField<TransferFigures>& c : TransferFigures::Counts()) f.*c.member = n++;
  EXPECT_EQ(f.count + f.bytes + f.timed_count + f.duration_ns, 1u + 2 + 3 + 4);
  for (const CountField<TransferFigures>& c : TransferFigures::Counts()) {
    EXPECT_EQ(c.merge, MergeRule::kSum) << c.key;
  }
  EXPECT_EQ(ReportLifecycle::Counts()[0].merge, MergeRule::kMin);
  EXPECT_EQ(KernelRow::Counts().size(), 3u);
  EXPECT_EQ(ContextFigures::Counts()[3].key, std::string("freed_bytes"));
}

}  // namespace
}  // namespace gpuwatch
