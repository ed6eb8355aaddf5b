// The `phases` and `regions` sections of the report model: what ToJson
// writes, ReadReportModel reads back to the same values and writes again to
// the same document; a mistyped field is named by its path.
#include <gtest/gtest.h>

#include <string>

#include "libgpuwatch/report/report_model.h"
#include "tests/unit/report_model_checks.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

ReportModel ModelWithPhasesAndRegions() {
  ReportModel m;
  m.trigger = "merge";
  m.frame_table = {{"pool_alloc()", "/src/pool.cc", 12, "/bin/app", false},
                   {"main", "/src/app.cc", 40, "/bin/app", false}};
  ReportPhases& phases = m.phases.emplace();
  Number(&phases, 10);
  PhasePath step;
  step.path = "step";
  step.depth = 1;
  Number(&step, 100);
  step.copies["h2d"] = {4, 4096};
  step.copies["d2h"] = {1, 512};
  step.peak_site = ReportSiteRef{3, "app.cc:40"};
  step.peak_top_site = PhaseTopSite{{2, "pool.cc:12"}, 2048};
  step.processes = 2;
  step.peak_pid = 4242;
  step.peak_rank = "1";
  phases.paths.push_back(step);
  PhasePath forward;  // a process's own report: no merge fields, no peak site
  forward.path = "step/forward";
  forward.depth = 2;
  Number(&forward, 200);
  forward.peak_pid = 0;  // present, even as 0
  phases.paths.push_back(forward);

  ReportRegions& regions = m.regions.emplace();
  Number(&regions, 20);
  Number(&regions.counters, 30);
  RegionSite site;
  site.site = 5;
  site.location = "pool.cc:12";
  site.stack = {0, 1};
  Number(&site, 300);
  site.caller = "app.cc:40";
  site.phase = "step/forward";
  site.segment = ReportSiteRef{6, "app.cc:38"};
  regions.sites.push_back(site);
  RegionSite bare;  // no caller, phase or segment
  bare.site = 7;
  bare.location = "pool.cc:20";
  Number(&bare, 400);
  regions.sites.push_back(bare);
  // A segment and a heap: an allocation and a heap holding the regions.
  const auto holder = [](auto* e, uint64_t site, const char* location, uint64_t base) {
    e->site = site;
    e->location = location;
    e->stack = {static_cast<uint32_t>(site % 2)};
    Number(e, base);
    e->address = "0x7f00000" + std::to_string(base);
  };
  holder(&regions.segments.emplace_back(), 7, "app.cc:38", 500);
  regions.segments[0].kind = "device";
  holder(&regions.heaps.emplace_back(), 8, "pool.cc:5", 600);
  return m;
}

void ExpectSamePath(const PhasePath& a, const PhasePath& b) {
  SCOPED_TRACE(b.path);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.depth, b.depth);
  ExpectSameCounts(a, b, b.path);
  ASSERT_EQ(a.copies.size(), b.copies.size());
  for (const auto& [direction, row] : b.copies) {
    ASSERT_EQ(a.copies.count(direction), 1u) << direction;
    ExpectSameCounts(a.copies.at(direction), row, direction);
  }
  ASSERT_EQ(a.peak_site.has_value(), b.peak_site.has_value());
  if (b.peak_site.has_value()) {
    EXPECT_EQ(a.peak_site->site, b.peak_site->site);
    EXPECT_EQ(a.peak_site->location, b.peak_site->location);
  }
  ASSERT_EQ(a.peak_top_site.has_value(), b.peak_top_site.has_value());
  if (b.peak_top_site.has_value()) {
    EXPECT_EQ(a.peak_top_site->site, b.peak_top_site->site);
    EXPECT_EQ(a.peak_top_site->location, b.peak_top_site->location);
    EXPECT_EQ(a.peak_top_site->bytes, b.peak_top_site->bytes);
  }
  EXPECT_EQ(a.processes, b.processes);
  EXPECT_EQ(a.peak_pid, b.peak_pid);
  EXPECT_EQ(a.peak_rank, b.peak_rank);
}

TEST(PhasesModel, PhasesAndRegionsReadBackTheSame) {
  const ReportModel m = ModelWithPhasesAndRegions();
  json doc = json::object();
  m.ToJson(&doc);
  // As the library writes them: a path's copies always (maybe empty), its
  // merge fields only when set; a region site's optional fields only when set.
  const json& step = doc["phases"]["paths"][0];
  EXPECT_EQ(step["copies"]["h2d"], json::parse(R"({"count": 4, "bytes": 4096})"));
  EXPECT_EQ(step["peak_top_site"], json::parse(R"({"site": 2, "location": "pool.cc:12",
                                                    "bytes": 2048})"));
  EXPECT_EQ(step["peak_rank"], "1");
  const json& forward = doc["phases"]["paths"][1];
  EXPECT_EQ(forward["copies"], json::object());
  EXPECT_EQ(forward["peak_pid"], 0);
  for (const char* absent : {"peak_site", "peak_top_site", "processes", "peak_rank"}) {
    EXPECT_FALSE(forward.contains(absent)) << absent;
  }
  EXPECT_EQ(doc["phases"]["unbalanced_pops"], 13);
  EXPECT_EQ(doc["regions"]["sites"][0]["stack"], json::array({0, 1}));
  EXPECT_EQ(doc["regions"]["sites"][0]["segment"],
            json::parse(R"({"site": 6, "location": "app.cc:38"})"));
  for (const char* absent : {"caller", "phase", "segment"}) {
    EXPECT_FALSE(doc["regions"]["sites"][1].contains(absent)) << absent;
  }
  EXPECT_FALSE(doc["regions"]["heaps"][0].contains("kind"));
  EXPECT_EQ(doc["regions"]["counters"]["heaps_dropped"], 42);

  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &r, &error)) << error;
  ASSERT_TRUE(r.phases.has_value());
  ExpectSameCounts(*r.phases, *m.phases, "phases");
  ASSERT_EQ(r.phases->paths.size(), 2u);
  ExpectSamePath(r.phases->paths[0], m.phases->paths[0]);
  ExpectSamePath(r.phases->paths[1], m.phases->paths[1]);

  ASSERT_TRUE(r.regions.has_value());
  const ReportRegions& g = *r.regions;
  const ReportRegions& w = *m.regions;
  ExpectSameCounts(g, w, "regions");
  ExpectSameCounts(g.counters, w.counters, "regions.counters");
  ASSERT_EQ(g.sites.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectSameSite(g.sites[i], w.sites[i], "regions.sites");
    ExpectSameCounts(g.sites[i], w.sites[i], "regions.sites");
    EXPECT_EQ(g.sites[i].caller, w.sites[i].caller);
    EXPECT_EQ(g.sites[i].phase, w.sites[i].phase);
    ASSERT_EQ(g.sites[i].segment.has_value(), w.sites[i].segment.has_value());
  }
  EXPECT_EQ(g.sites[0].segment->site, 6u);
  EXPECT_EQ(g.sites[0].segment->location, "app.cc:38");
  ASSERT_EQ(g.segments.size(), 1u);
  ExpectSameSite(g.segments[0], w.segments[0], "regions.segments");
  ExpectSameCounts(g.segments[0], w.segments[0], "regions.segments");
  EXPECT_EQ(g.segments[0].address, "0x7f00000500");
  EXPECT_EQ(g.segments[0].kind, "device");
  ASSERT_EQ(g.heaps.size(), 1u);
  ExpectSameSite(g.heaps[0], w.heaps[0], "regions.heaps");
  ExpectSameCounts(g.heaps[0], w.heaps[0], "regions.heaps");
  EXPECT_EQ(g.heaps[0].address, "0x7f00000600");

  // Written again, the document is the same.
  json again = json::object();
  r.ToJson(&again);
  EXPECT_EQ(again, doc);

  // The regions' stacks are sites like the others': inlined from the frame
  // table with them.
  r.InlineFrameTable();
  ASSERT_EQ(r.regions->sites[0].frames.size(), 2u);
  EXPECT_EQ(r.regions->sites[0].frames[1].function, "main");
  ASSERT_EQ(r.regions->heaps[0].frames.size(), 1u);
  EXPECT_EQ(r.regions->heaps[0].frames[0].function, "pool_alloc()");
}

TEST(PhasesModel, FieldTablesStateTheMergeRules) {
  EXPECT_EQ(PhasePath::Counts().size(), 11u);
  for (const CountField<PhasePath>& f : PhasePath::Counts()) {
    EXPECT_EQ(f.merge, std::string(f.key) == "peak_bytes" ? MergeRule::kMax : MergeRule::kSum)
        << f.key;
  }
  EXPECT_EQ(ReportPhases::Counts().size(), 8u);
  EXPECT_EQ(ReportRegionCounters::Counts().size(), 13u);
  EXPECT_EQ(RegionSite::Counts()[2].key, std::string("oldest_ns"));
  EXPECT_EQ(RegionSite::Counts()[2].merge, MergeRule::kMin);
}

// A section leaving fields out reads them as 0 or absent.
TEST(PhasesModel, MissingFieldsReadAsZeroOrAbsent) {
  ReportModel r;
  std::string error;
  ASSERT_TRUE(ReadReportModel(
      json::parse(R"({"phases": {"paths": [{"path": "a"}]}, "regions": {"sites": [{}]}})"), &r,
      &error))
      << error;
  ASSERT_EQ(r.phases->paths.size(), 1u);
  EXPECT_EQ(r.phases->paths[0].peak_bytes, 0u);
  EXPECT_FALSE(r.phases->paths[0].peak_pid.has_value());
  EXPECT_FALSE(r.phases->paths[0].peak_site.has_value());
  EXPECT_EQ(r.regions->sites.size(), 1u);
  EXPECT_FALSE(r.regions->sites[0].segment.has_value());
  EXPECT_EQ(r.regions->counters.registered, 0u);
  ASSERT_TRUE(ReadReportModel(json::object(), &r, &error)) << error;
  EXPECT_FALSE(r.phases.has_value());
  EXPECT_FALSE(r.regions.has_value());
}

// Each field of the sections mistyped in turn: the first problem is named by
// its path.
TEST(PhasesModel, AMistypedFieldIsNamedByItsPath) {
  const ReportModel m = ModelWithPhasesAndRegions();
  json good = json::object();
  m.ToJson(&good);
  struct Case {
    const char* pointer;  // JSON pointer of the field
    json value;
    const char* error;
  };
  const Case cases[] = {
      {"/phases/paths/1/peak_bytes", -5,
       "phases.paths[1].peak_bytes is -5, expected a count (not negative)"},
      {"/phases/paths/0/path", "", "phases.paths[0].path is empty"},
      {"/phases/paths/0/path", 7, "phases.paths[0].path is 7, expected a string"},
      {"/phases/paths/0/depth", 1.5, "phases.paths[0].depth is 1.5, expected a count (an integer)"},
      {"/phases/paths/0/peak_pid", "me",
       "phases.paths[0].peak_pid is \"me\", expected a count "
       "(an integer)"},
      {"/phases/paths/0/peak_rank", 1, "phases.paths[0].peak_rank is 1, expected a string"},
      {"/phases/paths/0/copies/h2d", 4, "phases.paths[0].copies.h2d is 4, expected an object"},
      {"/phases/paths/0/copies/h2d/bytes", -1,
       "phases.paths[0].copies.h2d.bytes is -1, expected a count (not negative)"},
      {"/phases/paths/0/peak_site", "x", "phases.paths[0].peak_site is \"x\", expected an object"},
      {"/phases/paths/0/peak_top_site/bytes", "x",
       "phases.paths[0].peak_top_site.bytes is \"x\", expected a count (an integer)"},
      {"/phases/paths/1", 3, "phases.paths[1] is 3, expected an object"},
      {"/phases/paths", json::object(), "phases.paths is an object, expected an array"},
      {"/phases/unbalanced_pops", "two",
       "phases.unbalanced_pops is \"two\", expected a count (an integer)"},
      {"/phases", json::array(), "phases is an array, expected an object"},
      {"/regions/live_bytes", -2, "regions.live_bytes is -2, expected a count (not negative)"},
      {"/regions/sites/0/oldest_ns", "old",
       "regions.sites[0].oldest_ns is \"old\", expected a count (an integer)"},
      {"/regions/sites/0/caller", 5, "regions.sites[0].caller is 5, expected a string"},
      {"/regions/sites/0/segment/location", 5,
       "regions.sites[0].segment.location is 5, expected a string"},
      {"/regions/sites/0/stack/1", 9,
       "regions.sites[0].stack[1] is 9, past the end of frame_table (2 frames)"},
      {"/regions/sites/1", "x", "regions.sites[1] is \"x\", expected an object"},
      {"/regions/segments/0/region_bytes", "many",
       "regions.segments[0].region_bytes is \"many\", expected a count (an integer)"},
      {"/regions/segments/0/kind", false, "regions.segments[0].kind is false, expected a string"},
      {"/regions/heaps/0/address", 1, "regions.heaps[0].address is 1, expected a string"},
      {"/regions/counters/heaps_reset", -1,
       "regions.counters.heaps_reset is -1, expected a count (not negative)"},
      {"/regions/counters", 0, "regions.counters is 0, expected an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    json doc = good;
    doc[json::json_pointer(c.pointer)] = c.value;
    ReportModel r;
    std::string error;
    EXPECT_FALSE(ReadReportModel(doc, &r, &error));
    EXPECT_EQ(error, c.error);
  }
}

}  // namespace
}  // namespace gpuwatch
