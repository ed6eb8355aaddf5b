// The typed report model: what ToJson writes, ReadReportModel reads back to
// the same values, field by field, and the field tables agree with the
// structs they list.
#include "libgpuwatch/report/report_model.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/report_model_checks.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

ReportModel FullModel() {
  ReportModel m;
  m.trigger = "exit";
  m.label = "step 7";
  m.gpuwatch_version = "0.1.0";
  m.attach = "preload";
  m.cupti = "/usr/local/cuda/lib64/libcupti.so.13";
  m.process = {4242, "node1", "3", {"./train", "--fast"}, 5200000, "expandable_segments"};
  Number(&m.totals, 100);
  Number(&m.totals.kinds["device"], 200);
  Number(&m.totals.kinds["pinned_host"], 300);
  Number(&m.totals.copies["h2d"], 400);
  m.stack_depth = 32;
  m.unwind = ReportUnwind{7, "cfi", 2};
  m.frame_table = {{"inner()", "/src/a.cu", 12, "/bin/app", true},
                   {"main", "/src/a.cu", 40, "/bin/app", false}};
  LeakSite leak;
  leak.site = 3;
  leak.location = "a.cu:12";
  leak.stack = {0, 1};
  leak.category = "";  // an explicit "none" is kept
  leak.suppressed = "leak:inner";
  Number(&leak, 500);
  leak.kinds = {{"device", 510}, {"managed", 7}};
  m.leaks_device.sites.push_back(leak);
  Number(&m.leaks_device, 600);
  m.leaks_device.split.Add(leak.bytes, leak.count, /*suppressed=*/true, "");
  Number(&m.leaks_host, 700);
  Number(&m.peak, 800);
  m.peak.kinds = {{"device", 801}};
  PeakSite peak;
  peak.site = 4;
  peak.location = "a.cu:40";
  peak.stack = {1};
  Number(&peak, 900);
  m.peak.sites.push_back(peak);
  AllocSite alloc;
  alloc.site = 5;
  alloc.location = "a.cu:12";
  alloc.processes = 2;
  Number(&alloc, 1000);
  m.sites.push_back(alloc);
  ReportGrowth& growth = m.growth.emplace();
  growth.basis = "mark";
  growth.samples = 16;
  GrowthSite suspect;
  suspect.site = 6;
  suspect.location = "a.cu:12";
  suspect.category = "caching-allocator";
  Number(&suspect, 1100);
  suspect.rate = 1048576.5;
  suspect.unit = "mark";
  suspect.from = 1;
  suspect.to = 16.25;
  suspect.series = {0, 1, 2};
  growth.suspects.push_back(suspect);
  OomSite& oom = m.oom.emplace();
  oom.site = 8;
  oom.location = "a.cu:40";
  Number(&oom, 1200);
  oom.kind = "device";
  oom.api = "cudaMalloc";
  oom.error = 2;
  oom.device = 1;
  m.merged_from = 2;
  MergedProcess row;
  Number(&row, 1300);
  row.file = "r0.json";
  row.host = "node1";
  row.rank = "0";
  row.command = {"./train"};
  row.trigger = "exit";
  m.processes.push_back(row);
  return m;
}

TEST(ReportModel, WhatIsWrittenReadsBackTheSame) {
  const ReportModel m = FullModel();
  json doc = json::object();
  doc["future"] = {{"launches", 9}};  // a section the model does not type is kept
  m.ToJson(&doc);
  EXPECT_EQ(doc["schema"], "gpuwatch-report");
  EXPECT_EQ(doc["version"], kReportSchemaVersion);
  EXPECT_EQ(doc["future"]["launches"], 9);

  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &r, &error)) << error;
  EXPECT_EQ(r.trigger, m.trigger);
  EXPECT_EQ(r.label, m.label);
  EXPECT_EQ(r.gpuwatch_version, m.gpuwatch_version);
  EXPECT_EQ(r.attach, m.attach);
  EXPECT_EQ(r.cupti, m.cupti);
  EXPECT_EQ(r.process.pid, 4242u);
  EXPECT_EQ(r.process.host, "node1");
  EXPECT_EQ(r.process.rank, "3");
  EXPECT_EQ(r.process.command, m.process.command);
  EXPECT_EQ(r.process.elapsed_ns, 5200000u);
  EXPECT_EQ(r.process.pytorch_allocator, "expandable_segments");
  ExpectSameCounts(r.totals, m.totals, "totals");
  ASSERT_EQ(r.totals.kinds.size(), 2u);
  ExpectSameCounts(r.totals.kinds.at("device"), m.totals.kinds.at("device"), "kinds.device");
  ExpectSameCounts(r.totals.kinds.at("pinned_host"), m.totals.kinds.at("pinned_host"),
                   "kinds.pinned_host");
  ExpectSameCounts(r.totals.copies.at("h2d"), m.totals.copies.at("h2d"), "copies.h2d");
  EXPECT_EQ(r.stack_depth, 32);
  ASSERT_TRUE(r.unwind.has_value());
  EXPECT_EQ(r.unwind->tool_frames, 7u);
  EXPECT_EQ(r.unwind->unwinder, "cfi");
  EXPECT_EQ(r.unwind->unwind_fallbacks, 2u);

  ASSERT_EQ(r.frame_table.size(), 2u);
  EXPECT_EQ(r.frame_table[0].function, "inner()");
  EXPECT_EQ(r.frame_table[0].file, "/src/a.cu");
  EXPECT_EQ(r.frame_table[0].line, 12u);
  EXPECT_EQ(r.frame_table[0].module, "/bin/app");
  EXPECT_TRUE(r.frame_table[0].inlined);
  EXPECT_FALSE(r.frame_table[1].inlined);

  ExpectSameCounts(r.leaks_device, m.leaks_device, "leaks.device");
  EXPECT_EQ(r.leaks_device.split.suppressed_bytes, m.leaks_device.sites[0].bytes);
  EXPECT_EQ(r.leaks_device.split.leaked_bytes,
            m.leaks_device.bytes - m.leaks_device.sites[0].bytes);
  ASSERT_EQ(r.leaks_device.sites.size(), 1u);
  const LeakSite& leak = r.leaks_device.sites[0];
  ExpectSameSite(leak, m.leaks_device.sites[0], "leak");
  ExpectSameCounts(leak, m.leaks_device.sites[0], "leak");
  EXPECT_EQ(leak.kinds, m.leaks_device.sites[0].kinds);
  ASSERT_TRUE(leak.category.has_value());
  EXPECT_EQ(*leak.category, "");
  ExpectSameCounts(r.leaks_host, m.leaks_host, "leaks.host");
  EXPECT_TRUE(r.leaks_host.sites.empty());

  ExpectSameCounts(r.peak, m.peak, "peak");
  EXPECT_EQ(r.peak.kinds, m.peak.kinds);
  ASSERT_EQ(r.peak.sites.size(), 1u);
  ExpectSameSite(r.peak.sites[0], m.peak.sites[0], "peak site");
  ExpectSameCounts(r.peak.sites[0], m.peak.sites[0], "peak site");

  ASSERT_EQ(r.sites.size(), 1u);
  ExpectSameSite(r.sites[0], m.sites[0], "alloc site");
  ExpectSameCounts(r.sites[0], m.sites[0], "alloc site");

  ASSERT_TRUE(r.growth.has_value());
  EXPECT_EQ(r.growth->basis, "mark");
  EXPECT_EQ(r.growth->samples, 16u);
  ASSERT_EQ(r.growth->suspects.size(), 1u);
  const GrowthSite& g = r.growth->suspects[0];
  ExpectSameSite(g, m.growth->suspects[0], "suspect");
  ExpectSameCounts(g, m.growth->suspects[0], "suspect");
  EXPECT_EQ(g.rate, 1048576.5);
  EXPECT_EQ(g.unit, "mark");
  EXPECT_EQ(g.from, 1.0);
  EXPECT_EQ(g.to, 16.25);
  EXPECT_EQ(g.series, m.growth->suspects[0].series);

  ASSERT_TRUE(r.oom.has_value());
  ExpectSameSite(*r.oom, *m.oom, "oom");
  ExpectSameCounts(*r.oom, *m.oom, "oom");
  EXPECT_EQ(r.oom->kind, "device");
  EXPECT_EQ(r.oom->api, "cudaMalloc");
  EXPECT_EQ(r.oom->error, 2);
  EXPECT_EQ(r.oom->device, 1);

  EXPECT_EQ(r.merged_from, 2u);
  ASSERT_EQ(r.processes.size(), 1u);
  ExpectSameCounts(r.processes[0], m.processes[0], "processes[0]");
  EXPECT_EQ(r.processes[0].file, "r0.json");
  EXPECT_EQ(r.processes[0].command, m.processes[0].command);
  EXPECT_EQ(r.processes[0].trigger, "exit");

  // Written again, the document is the same.
  json again = json::object();
  again["future"] = {{"launches", 9}};
  r.ToJson(&again);
  EXPECT_EQ(again, doc);
}

// Each field table names its struct's count members once, under their own
// JSON keys: a struct's counts all land in distinct members.
TEST(ReportModel, FieldTablesNameEachMemberOnce) {
  AllocSite a;
  Number(&a, 1);
  uint64_t sum = 0;
  for (const CountField<AllocSite>& f : AllocSite::Counts()) sum += a.*f.member;
  // allocs .. host_alloc_bytes, then frees, churn_cycles, call_ns.
  EXPECT_EQ(sum, 1u + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10);
  EXPECT_EQ(AllocSite::Counts().size(), 10u);
  EXPECT_EQ(AllocSite::Counts()[8].key, std::string("churn_cycles"));
  EXPECT_EQ(AllocSite::Counts()[2].key, std::string("largest"));
  EXPECT_EQ(AllocSite::Counts()[2].merge, MergeRule::kMax);
  EXPECT_EQ(LeakSite::Counts()[2].key, std::string("oldest_ns"));
  EXPECT_EQ(LeakSite::Counts()[2].merge, MergeRule::kMin);
}

// Fields a report leaves out read as 0 or absent; a mistyped one is named.
TEST(ReportModel, MissingFieldsReadAsZeroAndAMistypedOneIsNamed) {
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel({{"sites", {{{"site", 1}}}}}, &r, &error)) << error;
  ASSERT_EQ(r.sites.size(), 1u);
  EXPECT_EQ(r.sites[0].allocs, 0u);
  EXPECT_FALSE(r.growth.has_value());
  EXPECT_FALSE(r.oom.has_value());
  EXPECT_FALSE(r.unwind.has_value());
  EXPECT_FALSE(ReadReportModel({{"sites", {{{"site", 1}, {"largest", "big"}}}}}, &r, &error));
  EXPECT_EQ(error, "sites[0].largest is \"big\", expected a count (an integer)");
  EXPECT_FALSE(ReadReportModel({{"oom", {{"error", 1.5}}}}, &r, &error));
  EXPECT_EQ(error, "oom.error is 1.5, expected an integer");
  EXPECT_FALSE(ReadReportModel({{"processes", {{{"pid", -3}}}}}, &r, &error));
  EXPECT_EQ(error, "processes[0].pid is -3, expected a count (not negative)");
}

}  // namespace
}  // namespace gpuwatch

namespace gpuwatch {
namespace {

// A signed field (oom.error, oom.device) is an integer within +-2^53; an
// unsigned 2^63 (INT64_MIN once wrapped) is refused, not passed to llabs.
TEST(ReportFieldReader, IntegersBeyondTheLimitAreRefusedWhateverTheirSign) {
  const nlohmann::json oom = nlohmann::json::parse(
      R"({"ok": -7, "max": 9007199254740992, "wrapped": 9223372036854775808, "low": -9007199254740993})");
  ReportFieldReader r;
  EXPECT_EQ(r.IntegerAt(oom, "oom", "ok"), -7);
  EXPECT_EQ(r.IntegerAt(oom, "oom", "max"), 9007199254740992);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.IntegerAt(oom, "oom", "wrapped"), 0);
  EXPECT_EQ(r.problem(), "oom.wrapped is 9223372036854775808, expected an integer");
  ReportFieldReader low;
  EXPECT_EQ(low.IntegerAt(oom, "oom", "low"), 0);
  EXPECT_TRUE(low.failed());
}

}  // namespace
}  // namespace gpuwatch
