#include "libgpuwatch/report/report.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/report/checkpoint_text.h"
#include "libgpuwatch/report/file.h"
#include "libgpuwatch/report/site_groups.h"
#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/stacks/unwind.h"
#include "libgpuwatch/symbolize/symbolizer.h"
#include "nlohmann/json.hpp"
#include "tools/reading/report_reader.h"

// The flushes the report writer asks for, counted: the test's own fsync and
// sync_file_range come before libc's (they make the system calls).
namespace {
std::atomic<int> g_fsyncs{0};
std::atomic<int> g_writebacks{0};
}  // namespace

extern "C" int fsync(int fd) {
  ++g_fsyncs;
  return static_cast<int>(syscall(SYS_fsync, fd));
}

extern "C" int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
  if (flags == SYNC_FILE_RANGE_WRITE) ++g_writebacks;
  return static_cast<int>(syscall(SYS_sync_file_range, fd, offset, nbytes, flags));
}

// Outside namespace gpuwatch on purpose: the report trims gpuwatch's own
// frames from the top of every stack.
namespace report_test_sites {

int g_line_a = 0;
int g_line_b = 0;

__attribute__((noinline)) uint32_t SiteA(gpuwatch::StackTable* table) {
  uintptr_t pcs[32];
  g_line_a = __LINE__ + 1;
  const int n = gpuwatch::CaptureStack(pcs, 32, 0);
  asm volatile("" ::: "memory");  // keep the call from becoming a tail call
  return table->Intern(pcs, n);
}

__attribute__((noinline)) uint32_t SiteB(gpuwatch::StackTable* table) {
  uintptr_t pcs[32];
  g_line_b = __LINE__ + 1;
  const int n = gpuwatch::CaptureStack(pcs, 32, 0);
  asm volatile("" ::: "memory");
  return table->Intern(pcs, n);
}

}  // namespace report_test_sites

namespace gpuwatch {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/gpuwatch-report-test-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A report as the tools read it: each site's frames in `frames`.
nlohmann::json ParseReport(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text);
  InlineFrameTable(&doc);
  return doc;
}

// How many entries `dir` holds (a write leaves no temporary file behind).
std::ptrdiff_t EntriesIn(const std::string& dir) {
  return std::distance(std::filesystem::directory_iterator(dir),
                       std::filesystem::directory_iterator{});
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Site A's and site B's stacks, interned.
struct TwoSites {
  StackTable table{1000, 1 << 20};
  uint32_t a = report_test_sites::SiteA(&table);
  uint32_t b = report_test_sites::SiteB(&table);
  bool Interned() const { return a != 0 && b != 0; }
};

TEST(Report, JsonHasSchemaAndTotals) {
  Tracker t;
  AllocEvent e;
  e.address = 0x1000;
  e.size = 4096;
  t.OnAlloc(e);
  CopyEvent c;
  c.bytes = 10;
  c.kind = CopyKind::kHostToDevice;
  t.OnCopy(c);
  ReportContext ctx;
  ctx.trigger = "exit";
  ctx.pid = 77;
  ctx.python_frames_dropped = 3;
  SiteResolver sites(nullptr);
  const auto j = ParseReport(BuildReportJson(t.Snapshot(), ctx, &sites));
  EXPECT_EQ(j["schema"], "gpuwatch-report");
  EXPECT_EQ(j["version"], kReportSchemaVersion);
  EXPECT_EQ(j["trigger"], "exit");
  EXPECT_EQ(j["process"]["pid"], 77);
  EXPECT_EQ(j["totals"]["device_current_bytes"], 4096);
  EXPECT_EQ(j["totals"]["kinds"]["device"]["allocs"], 1);
  EXPECT_EQ(j["totals"]["copies"]["h2d"]["bytes"], 10);
  EXPECT_EQ(j["totals"]["python_frames_dropped"], 3);
}

TEST(Report, LeaksAreGroupedBySiteLargestFirstWithFileAndLine) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  const uint32_t a = ab.a;
  const uint32_t b = ab.b;
  Tracker t;
  auto alloc = [&](uint64_t address, uint64_t size, MemKind kind, uint32_t stack) {
    t.OnAlloc({.address = address, .size = size, .kind = kind, .stack_id = stack});
  };
  alloc(0x1000, 100, MemKind::kDevice, a);
  alloc(0x2000, 100, MemKind::kDevice, a);
  alloc(0x3000, 100, MemKind::kPool, a);
  alloc(0x4000, 1000, MemKind::kDevice, b);
  alloc(0x5000, 5000, MemKind::kDevice, b);
  alloc(0x6000, 64, MemKind::kPinnedHost, a);
  ASSERT_TRUE(t.OnFree(0x5000));  // balanced: must not count as leaked
  ReportContext ctx;
  ctx.trigger = "exit";
  SiteResolver sites(&ab.table);
  const auto j = ParseReport(BuildReportJson(t.Snapshot(), ctx, &sites));
  const auto& device = j["leaks"]["device"];
  EXPECT_EQ(device["bytes"], 1300);
  EXPECT_EQ(device["count"], 4);
  ASSERT_EQ(device["sites"].size(), 2u);
  EXPECT_EQ(device["sites"][0]["bytes"], 1000);
  EXPECT_EQ(device["sites"][0]["count"], 1);
  EXPECT_EQ(device["sites"][0]["location"],
            "report_test.cc:" + std::to_string(report_test_sites::g_line_b));
  EXPECT_EQ(device["sites"][1]["bytes"], 300);
  EXPECT_EQ(device["sites"][1]["count"], 3);
  EXPECT_EQ(device["sites"][1]["kinds"]["device"], 200);
  EXPECT_EQ(device["sites"][1]["kinds"]["pool"], 100);
  EXPECT_EQ(device["sites"][1]["location"],
            "report_test.cc:" + std::to_string(report_test_sites::g_line_a));
  const auto& frame0 = device["sites"][1]["frames"][0];
  EXPECT_NE(frame0["function"].get<std::string>().find("SiteA"), std::string::npos) << frame0;
  // Pinned host memory is reported apart from device memory.
  ASSERT_EQ(j["leaks"]["host"]["sites"].size(), 1u);
  EXPECT_EQ(j["leaks"]["host"]["bytes"], 64);
  // The peak held both of site B's allocations.
  EXPECT_EQ(j["peak"]["device_bytes"], 6300);
  EXPECT_EQ(j["peak"]["sites_at_device_bytes"], 6300);
  EXPECT_EQ(j["peak"]["sites"][0]["bytes"], 6000);
  EXPECT_EQ(j["peak"]["sites"][0]["site"], b);
}

// Each distinct frame is written once, in `frame_table`; sites refer to it
// by index (`stack`), and the frames two stacks share are one entry.
TEST(Report, FrameTableListsEachFrameOnceAndSitesIndexIt) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  Tracker t;
  AllocEvent e;
  e.address = 0x1000;
  e.size = 100;
  e.stack_id = ab.a;
  t.OnAlloc(e);
  e.address = 0x2000;
  e.stack_id = ab.b;
  t.OnAlloc(e);
  ReportContext ctx;
  SiteResolver sites(&ab.table);
  const std::string text = BuildReportJson(t.Snapshot(), ctx, &sites);
  const auto raw = nlohmann::json::parse(text);
  EXPECT_EQ(raw["version"], 2);
  const auto& table = raw["frame_table"];
  ASSERT_TRUE(table.is_array());
  std::set<std::string> distinct;
  for (const auto& f : table) distinct.insert(f.dump());
  EXPECT_EQ(distinct.size(), table.size()) << "a frame is listed twice";
  const auto& listed = raw["leaks"]["device"]["sites"];
  ASSERT_EQ(listed.size(), 2u);
  const auto& stack_a = listed[0]["stack"];
  const auto& stack_b = listed[1]["stack"];
  ASSERT_GT(stack_a.size(), 2u);
  ASSERT_GT(stack_b.size(), 2u);
  EXPECT_FALSE(listed[0].contains("frames"));
  // Site A and site B differ in their innermost frame and share their callers.
  EXPECT_NE(stack_a[0], stack_b[0]);
  EXPECT_EQ(stack_a.back(), stack_b.back());
  std::set<size_t> used;
  for (const auto& stack : {stack_a, stack_b}) {
    for (const auto& index : stack) used.insert(index.get<size_t>());
  }
  EXPECT_EQ(used.size(), table.size()) << "the table holds exactly the frames the sites use";
  EXPECT_LT(table.size(), stack_a.size() + stack_b.size()) << "shared frames listed once";
  // In the text, a stack is one line and the table one frame per line.
  std::string stack_line = "\"stack\": [";
  for (size_t i = 0; i < stack_a.size(); ++i) stack_line += (i ? ", " : "") + stack_a[i].dump();
  EXPECT_NE(text.find(stack_line + "]"), std::string::npos) << text;
  for (const auto& f : table) EXPECT_NE(text.find("\n    " + f.dump()), std::string::npos) << f;
  // As the tools read it: the frames are back, in order.
  const auto read = ParseReport(text);
  EXPECT_FALSE(read.contains("frame_table"));
  const auto& frames = read["leaks"]["device"]["sites"][0]["frames"];
  ASSERT_EQ(frames.size(), stack_a.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i], table[stack_a[i].get<size_t>()]) << i;
  }
}

// A million live allocations from two sites, a tenth of them freed: the
// report's totals, per-site counts and bytes are exact.
TEST(Report, MillionLiveAllocationsAreTrackedAndReportedExactly) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  constexpr uint64_t kAllocs = 1100000;
  Tracker t;
  uint64_t bytes[2] = {0, 0};
  uint64_t count[2] = {0, 0};
  for (uint64_t i = 0; i < kAllocs; ++i) {
    AllocEvent e;
    e.address = 0x7f0000000000 + i * 4096;
    e.size = 512 * (1 + i % 7);
    e.kind = MemKind::kDevice;
    e.stack_id = i % 3 == 0 ? ab.b : ab.a;
    t.OnAlloc(e);
    bytes[i % 3 == 0 ? 1 : 0] += e.size;
    ++count[i % 3 == 0 ? 1 : 0];
  }
  const uint64_t peak = bytes[0] + bytes[1];
  // Free every eleventh: 100,000 of them, leaving 1,000,000 live.
  for (uint64_t i = 0; i < kAllocs; i += 11) {
    ASSERT_TRUE(t.OnFree(0x7f0000000000 + i * 4096)) << i;
    bytes[i % 3 == 0 ? 1 : 0] -= 512 * (1 + i % 7);
    --count[i % 3 == 0 ? 1 : 0];
  }
  ASSERT_EQ(count[0] + count[1], 1000000u);
  ReportContext ctx;
  ctx.trigger = "exit";
  SiteResolver sites(&ab.table);
  const auto j = ParseReport(BuildReportJson(t.Snapshot(), ctx, &sites));
  EXPECT_EQ(j["totals"]["dropped_allocs"], 0);
  EXPECT_EQ(j["totals"]["device_current_bytes"], bytes[0] + bytes[1]);
  EXPECT_EQ(j["totals"]["device_live_count"], 1000000);
  EXPECT_EQ(j["totals"]["kinds"]["device"]["allocs"], kAllocs);
  EXPECT_EQ(j["peak"]["device_bytes"], peak);
  const auto& device = j["leaks"]["device"];
  EXPECT_EQ(device["count"], 1000000);
  EXPECT_EQ(device["bytes"], bytes[0] + bytes[1]);
  ASSERT_EQ(device["sites"].size(), 2u);
  const int first_a = bytes[0] > bytes[1] ? 0 : 1;  // sites come largest first
  EXPECT_EQ(device["sites"][first_a]["bytes"], bytes[0]);
  EXPECT_EQ(device["sites"][first_a]["count"], count[0]);
  EXPECT_EQ(device["sites"][first_a]["location"],
            "report_test.cc:" + std::to_string(report_test_sites::g_line_a));
  EXPECT_EQ(device["sites"][1 - first_a]["bytes"], bytes[1]);
  EXPECT_EQ(device["sites"][1 - first_a]["count"], count[1]);
}

// A section lists the 1,000 largest sites; the rest are summed, not lost.
TEST(Report, SitesBeyondASectionsCapAreSummedAsOmitted) {
  constexpr uint32_t kSites = 1005;
  Tracker t;
  uint64_t total = 0;
  for (uint32_t site = 1; site <= kSites; ++site) {
    AllocEvent e;
    e.address = uint64_t{site} << 20;
    e.size = uint64_t{64} * site;  // site 1 the smallest
    e.stack_id = site;
    t.OnAlloc(e);
    total += e.size;
  }
  ReportContext ctx;
  SiteResolver sites(nullptr);  // no frames: every stack id is a site of its own
  const auto j = ParseReport(BuildReportJson(t.Snapshot(), ctx, &sites));
  const auto& device = j["leaks"]["device"];
  EXPECT_EQ(device["bytes"], total);
  EXPECT_EQ(device["count"], kSites);
  ASSERT_EQ(device["sites"].size(), 1000u);
  EXPECT_EQ(device["sites"][0]["site"], kSites);
  EXPECT_EQ(device["omitted_sites"], 5);
  EXPECT_EQ(device["omitted_bytes"], 64 * (1 + 2 + 3 + 4 + 5));
}

// A Symbolizer handed to SiteResolver is the one it resolves with, and it
// serves the next report too: the second resolver names the same site
// without a pc to resolve anew.
TEST(Report, SharedSymbolizerResolvesEachPcOncePerProcess) {
  StackTable table(1000, 1 << 20);
  const uint32_t a = report_test_sites::SiteA(&table);
  ASSERT_NE(a, 0u);
  Symbolizer shared;
  std::string first;
  {
    SiteResolver sites(&table, &shared);
    first = sites.LocationOf(a);
  }
  EXPECT_EQ(first, "report_test.cc:" + std::to_string(report_test_sites::g_line_a));
  const size_t resolved = shared.cache_size();
  EXPECT_GT(resolved, 0u);
  {
    SiteResolver sites(&table, &shared);
    EXPECT_EQ(sites.LocationOf(a), first);
  }
  EXPECT_EQ(shared.cache_size(), resolved);
}

// The reports' resolver is kept from checkpoint to checkpoint, with what it
// learnt of each site (which ids read the same, their locations) and without
// their frames (ReleaseFrames). A report it writes after the process changed
// is byte for byte the report a fresh resolver writes of the same moment:
// the leaks, the sites, the frame table and the trace's sites by location.
TEST(Report, AReportByTheKeptResolverEqualsOneFromScratch) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  Trace trace(64);
  Tracker t;
  t.SetTrace(&trace);
  AllocEvent e;
  e.size = 100;
  e.stack_id = ab.b;
  for (uint64_t i = 0; i < 3; ++i) {
    e.address = 0x1000 * (i + 1);
    t.OnAlloc(e);
  }
  Symbolizer shared;
  SiteResolver kept(&ab.table, &shared);
  const auto report = [&](SiteResolver* sites) {
    const TraceSnapshot events = trace.Snapshot();
    ReportContext ctx;
    ctx.trigger = "checkpoint";
    ctx.trace = &events;
    return BuildReportJson(t.Snapshot(), ctx, sites);
  };
  const std::string first = report(&kept);
  kept.ReleaseFrames();
  // What changed since: a site more, a free at the old one.
  e.address = 0x9000;
  e.stack_id = ab.a;
  t.OnAlloc(e);
  ASSERT_TRUE(t.OnFree(0x1000));
  const TrackerSnapshot now = t.Snapshot();
  const TraceSnapshot events = trace.Snapshot();
  ReportContext ctx;
  ctx.trigger = "checkpoint";
  ctx.trace = &events;
  const std::string incremental = BuildReportJson(now, ctx, &kept);
  kept.ReleaseFrames();
  SiteResolver fresh(&ab.table, &shared);
  const std::string scratch = BuildReportJson(now, ctx, &fresh);
  EXPECT_NE(incremental, first);
  EXPECT_EQ(incremental, scratch);
  const auto doc = nlohmann::json::parse(incremental);
  ASSERT_EQ(doc["trace"]["sites"].size(), 2u) << doc["trace"].dump();
  EXPECT_EQ(doc["trace"]["sites"][0]["location"],
            "report_test.cc:" + std::to_string(report_test_sites::g_line_a));
}

// A checkpoint keeps its frame table from one checkpoint to the next (a
// frame keeps its index: docs/report-format.md, frame_table) and the text of
// what did not change (checkpoint_text.h). After several changes, its bytes
// equal a checkpoint of the same snapshot made from scratch with the same
// frame numbering; its sections, frames inlined, equal those of a report
// made from scratch by a fresh resolver (one report model).
TEST(Report, ACheckpointMadeIncrementallyEqualsOneMadeFromScratch) {
  // Sites A and B, allocating 100 bytes each time, into a tracker with a trace.
  struct Process {
    TwoSites ab;
    Trace trace{64};
    Tracker t;
    Process() { t.SetTrace(&trace); }
  } p;
  const TwoSites& ab = p.ab;
  ASSERT_TRUE(ab.Interned());
  Tracker& t = p.t;
  Trace& trace = p.trace;
  const auto alloc = [&t](uint64_t address, uint32_t site) {
    AllocEvent e;
    e.address = address;
    e.size = 100;
    e.stack_id = site;
    t.OnAlloc(e);
  };
  for (uint64_t i = 0; i < 3; ++i) alloc(0x1000 * (i + 1), ab.b);
  Symbolizer shared;
  SiteResolver sites(&ab.table, &shared);
  CheckpointText kept;
  const auto report = [&](const TrackerSnapshot& snap, const TraceSnapshot& events,
                          CheckpointText* text, SiteResolver* resolver) {
    ReportContext ctx;
    ctx.trigger = "checkpoint";
    ctx.trace = &events;
    ctx.kept = text;
    std::string out = BuildReportJson(snap, ctx, resolver);
    resolver->ReleaseFrames();
    // What MaybeCheckpoint does once the report is written: the rows made
    // or kept are packed for the next checkpoint.
    text->ReleaseRows();
    return out;
  };
  const std::string first = report(t.Snapshot(), trace.Snapshot(), &kept, &sites);
  // A new site, a free at the old one; then one more allocation at the new.
  alloc(0x9000, ab.a);
  ASSERT_TRUE(t.OnFree(0x1000));
  const std::string second = report(t.Snapshot(), trace.Snapshot(), &kept, &sites);
  alloc(0xa000, ab.a);
  const TrackerSnapshot now = t.Snapshot();
  const TraceSnapshot events = trace.Snapshot();
  const std::string third = report(now, events, &kept, &sites);
  CheckpointText none;  // the same frame numbering (the resolver's), no text kept
  EXPECT_EQ(third, report(now, events, &none, &sites));
  EXPECT_NE(third, second);
  EXPECT_GT(kept.bytes(), 0u);

  // Each frame keeps its index: the first checkpoint's table begins the
  // later ones', and a site's stack reads the same indices in both.
  const auto a = nlohmann::json::parse(first);
  const auto b = nlohmann::json::parse(third);
  ASSERT_FALSE(a["frame_table"].empty());
  ASSERT_GE(b["frame_table"].size(), a["frame_table"].size());
  for (size_t i = 0; i < a["frame_table"].size(); ++i) {
    EXPECT_EQ(a["frame_table"][i], b["frame_table"][i]) << i;
  }
  const auto stack_of = [](const nlohmann::json& doc, uint32_t site) {
    for (const auto& s : doc["sites"]) {
      if (s["site"] == site) return s["stack"];
    }
    return nlohmann::json();
  };
  ASSERT_FALSE(stack_of(a, ab.b).is_null());
  EXPECT_EQ(stack_of(a, ab.b), stack_of(b, ab.b));

  // One report model: the same sections as a report from scratch.
  SiteResolver fresh(&ab.table, &shared);
  ReportContext ctx;
  ctx.trigger = "checkpoint";
  ctx.trace = &events;
  EXPECT_EQ(ParseReport(third), ParseReport(BuildReportJson(now, ctx, &fresh)));

  // A site gone from the leaks (A's memory freed) and the trace's ring
  // wrapped (64 events kept, 70 more made): the kept rows of A are dropped,
  // B's changed rows re-made, and the bytes still equal a checkpoint from
  // scratch with the same numbering.
  ASSERT_TRUE(t.OnFree(0x9000));
  ASSERT_TRUE(t.OnFree(0xa000));
  for (uint64_t i = 0; i < 35; ++i) {
    alloc(0x20000 + i, ab.b);
    ASSERT_TRUE(t.OnFree(0x20000 + i));
  }
  const TrackerSnapshot later = t.Snapshot();
  const TraceSnapshot wrapped = trace.Snapshot();
  ASSERT_GT(wrapped.recorded, wrapped.events.size());
  const std::string fourth = report(later, wrapped, &kept, &sites);
  CheckpointText none_later;
  EXPECT_EQ(fourth, report(later, wrapped, &none_later, &sites));
  const auto d = nlohmann::json::parse(fourth);
  ASSERT_EQ(d["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(d["leaks"]["device"]["sites"][0]["site"], ab.b);
  SiteResolver fresh_later(&ab.table, &shared);
  ctx.trace = &wrapped;
  EXPECT_EQ(ParseReport(fourth), ParseReport(BuildReportJson(later, ctx, &fresh_later)));

  // A new device peak at a site the last checkpoint's peak listed: B's
  // `peak` row (300 bytes then) is made again with its new bytes, not kept
  // (its key holds every field the row prints but the site's location and
  // stack), and the bytes still equal a checkpoint from scratch.
  const auto peak_bytes = [](const std::string& text, uint32_t site) {
    const auto doc = nlohmann::json::parse(text);
    for (const auto& s : doc["peak"]["sites"]) {
      if (s["site"] == site) return s["bytes"].get<uint64_t>();
    }
    return uint64_t{0};
  };
  ASSERT_EQ(peak_bytes(fourth, ab.b), 300u);
  for (uint64_t i = 0; i < 3; ++i) alloc(0x30000 + i, ab.b);
  const TrackerSnapshot peaked = t.Snapshot();
  const TraceSnapshot peaked_events = trace.Snapshot();
  const std::string fifth = report(peaked, peaked_events, &kept, &sites);
  CheckpointText none_peaked;
  EXPECT_EQ(fifth, report(peaked, peaked_events, &none_peaked, &sites));
  EXPECT_EQ(peak_bytes(fifth, ab.b), 500u);
}

// A checkpoint copies the lines of the trace's events its last checkpoint
// wrote whole (blocks of CheckpointTrace::kBlockEvents) from that file, read
// back through the descriptor it kept (checkpoint_trace.h); the others'
// lines are made. Its bytes equal a checkpoint of the same snapshot made
// from scratch with the same numbering: after more events, a new site, the
// ring wrapped, and a file truncated, written to, replaced or removed by
// someone else (then nothing is copied).
TEST(Report, ACheckpointReusesItsLastFilesTraceLinesAndEqualsOneFromScratch) {
  struct Process {
    TwoSites ab;
    Trace trace{4 * CheckpointTrace::kBlockEvents};
    Tracker t;
    Process() { t.SetTrace(&trace); }
  } p;
  ASSERT_TRUE(p.ab.Interned());
  uint64_t next_address = 0x100000;
  // `n` events at `site`: an allocation and its free each two.
  const auto churn = [&p, &next_address](uint32_t site, int n) {
    for (int i = 0; i < n / 2; ++i) {
      AllocEvent e;
      e.address = next_address++;
      e.size = 100;
      e.stack_id = site;
      p.t.OnAlloc(e);
      ASSERT_TRUE(p.t.OnFree(e.address));
    }
  };
  Symbolizer shared;
  SiteResolver sites(&p.ab.table, &shared);
  CheckpointText kept;
  TempDir dir;
  const std::string path = dir.path() + "/report.json";
  // A checkpoint as MaybeCheckpoint writes it: streamed to its file in
  // small chunks (offsets across them), the file's identity noted.
  const auto checkpoint = [&](const TrackerSnapshot& snap, const TraceSnapshot& events) {
    ReportContext ctx;
    ctx.trigger = "checkpoint";
    ctx.trace = &events;
    ctx.kept = &kept;
    AtomicFile file;
    file.KeepReader();
    std::string error;
    EXPECT_TRUE(file.Open(path, &error)) << error;
    const TextFlush flush{4096, [&file](std::string* text) { file.Write(*text); }};
    file.Write(BuildReportJson(snap, ctx, &sites, AnalyzeReport(snap, ctx, &sites), &flush));
    const bool ok = file.Commit(Durability::kWaitForDisk, &error);
    EXPECT_TRUE(ok) << error;
    const int reader = ok ? file.ReleaseReader() : -1;
    kept.trace_lines().Written(reader, path);
    // No descriptor of the host's held until the next checkpoint: it opens
    // the file again (and reads it only if it is still the file written).
    if (reader >= 0) {
      EXPECT_EQ(fcntl(reader, F_GETFD), -1) << "descriptor kept open";
    }
    sites.ReleaseFrames();
    kept.ReleaseRows();
    return Slurp(path);
  };
  const auto scratch = [&](const TrackerSnapshot& snap, const TraceSnapshot& events) {
    CheckpointText none;  // the same frame numbering (the resolver's), no text kept
    ReportContext ctx;
    ctx.trigger = "checkpoint";
    ctx.trace = &events;
    ctx.kept = &none;
    std::string out = BuildReportJson(snap, ctx, &sites);
    sites.ReleaseFrames();
    return out;
  };
  constexpr int kBlock = static_cast<int>(CheckpointTrace::kBlockEvents);

  // Two blocks and a part: nothing to reuse yet.
  churn(p.ab.b, 2 * kBlock + 500);
  TraceSnapshot events = p.trace.Snapshot();
  std::string first = checkpoint(p.t.Snapshot(), events);
  EXPECT_EQ(kept.trace_lines().reused(), 0u);
  ASSERT_LT(events.recorded, 3u * kBlock);

  // More events at a new site: blocks 0 and 1 copied, block 2 (whole now)
  // and the rest made.
  churn(p.ab.a, kBlock);
  TrackerSnapshot now = p.t.Snapshot();
  events = p.trace.Snapshot();
  std::string second = checkpoint(now, events);
  EXPECT_EQ(kept.trace_lines().reused(), 2u * kBlock);
  EXPECT_EQ(second, scratch(now, events));
  EXPECT_NE(second, first);

  // The ring wrapped (4 blocks' room: block 1 partly overwritten): blocks
  // 2, 3 and 4 whole; block 2 was whole in the last checkpoint: copied.
  churn(p.ab.b, 2 * kBlock);
  now = p.t.Snapshot();
  events = p.trace.Snapshot();
  ASSERT_GT(events.recorded, events.events.size());
  ASSERT_LT(events.recorded, 6u * kBlock);
  std::string third = checkpoint(now, events);
  EXPECT_EQ(kept.trace_lines().reused(), 1u * kBlock);
  EXPECT_EQ(third, scratch(now, events));

  // Nothing new: every whole block copied.
  p.t.OnLaunch();
  now = p.t.Snapshot();
  events = p.trace.Snapshot();
  EXPECT_EQ(checkpoint(now, events), scratch(now, events));
  EXPECT_EQ(kept.trace_lines().reused(), 3u * kBlock);

  // Someone else's doing between two checkpoints: nothing copied, the same
  // bytes as from scratch.
  const auto after = [&](const char* what, const std::function<void()>& doing) {
    doing();
    churn(p.ab.b, 2);
    now = p.t.Snapshot();
    events = p.trace.Snapshot();
    EXPECT_EQ(checkpoint(now, events), scratch(now, events)) << what;
    EXPECT_EQ(kept.trace_lines().reused(), 0u) << what;
    // And the next checkpoint copies again.
    p.t.OnLaunch();
    now = p.t.Snapshot();
    events = p.trace.Snapshot();
    EXPECT_EQ(checkpoint(now, events), scratch(now, events)) << what;
    EXPECT_GT(kept.trace_lines().reused(), 0u) << what;
  };
  after("truncated", [&] { ASSERT_EQ(truncate(path.c_str(), 1000), 0); });
  after("written to in place, its size unchanged", [&] {
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    // Garbage over the first event lines, and a later time (a write within
    // the clock's tick of the checkpoint's own would keep its time).
    const std::string text = Slurp(path);
    const size_t at = text.find("\"events\": [");
    ASSERT_NE(at, std::string::npos);
    const std::string garbage(4 * kBlock, 'x');
    ASSERT_EQ(pwrite(fd, garbage.data(), garbage.size(), static_cast<off_t>(at + 20)),
              static_cast<ssize_t>(garbage.size()));
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    const timespec times[2] = {st.st_atim, {st.st_mtim.tv_sec + 1, st.st_mtim.tv_nsec}};
    ASSERT_EQ(futimens(fd, times), 0);
    close(fd);
  });
  after("replaced", [&] {
    const std::string text = Slurp(path);
    std::ofstream(path + ".other") << text;
    ASSERT_EQ(rename((path + ".other").c_str(), path.c_str()), 0);
  });
  after("removed", [&] { ASSERT_EQ(unlink(path.c_str()), 0); });
}

// A checkpoint records the event count and device peak of the snapshot it
// was made from (the next look's "did anything change": CheckpointDue), not
// the tracker's as read before or after: an event counted while it was made
// is one it does not hold.
TEST(Report, ACheckpointRecordsTheEventCountOfItsSnapshot) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  Tracker t;
  const auto alloc_at_a = [&t, &ab](uint64_t address) {
    AllocEvent at_a;
    at_a.address = address;
    at_a.size = 100;
    at_a.stack_id = ab.a;
    t.OnAlloc(at_a);
  };
  alloc_at_a(0x1000);
  t.OnLaunch();
  const TrackerSnapshot snap = t.Snapshot();
  const uint64_t peak = t.DevicePeakBytes();
  alloc_at_a(0x2000);  // counted after the snapshot, before the report is made of it
  ASSERT_EQ(t.EventCount(), 3u);
  ASSERT_GT(t.DevicePeakBytes(), peak);
  CheckpointText kept;
  ReportContext ctx;
  ctx.kept = &kept;
  ctx.trigger = "checkpoint";
  SiteResolver sites(&ab.table);
  BuildReportJson(snap, ctx, &sites);
  EXPECT_EQ(EventCountOf(snap), 2u);
  EXPECT_EQ(kept.events(), 2u);
  EXPECT_EQ(kept.peak(), peak);
  EXPECT_EQ(EventCountOf(t.Snapshot()), t.EventCount());
}

// A checkpoint's frame table may list frames no section names (frames of
// sites an earlier checkpoint showed): the tools (report, diff, merge, check:
// ReadReport) index the table, and such frames show up nowhere.
TEST(Report, ToolsReadACheckpointWhoseFrameTableListsFramesNoSiteNames) {
  const TwoSites ab;
  ASSERT_TRUE(ab.Interned());
  Tracker t;
  for (const uint32_t id : {ab.a, ab.b}) {  // one allocation at each site
    AllocEvent at_site;
    at_site.address = uint64_t{0x1000} * id;
    at_site.size = 64;
    at_site.stack_id = id;
    t.OnAlloc(at_site);
  }
  Symbolizer shared;
  SiteResolver sites(&ab.table, &shared);
  CheckpointText kept;
  ReportContext ctx;
  ctx.trigger = "checkpoint";
  ctx.kept = &kept;
  const std::string text = BuildReportJson(t.Snapshot(), ctx, &sites);
  auto extra = nlohmann::json::parse(text);
  // An unnamed frame first: every index a site has moves by one.
  auto& table = extra["frame_table"];
  nlohmann::json gone = nlohmann::json::object();
  gone["function"] = "Gone()";
  gone["file"] = "/src/gone.cc";
  gone["line"] = 7;
  gone["module"] = "/lib/libgone.so";
  table.insert(table.begin(), gone);
  ForEachReportSite(&extra, [](nlohmann::json& site) {
    for (auto& i : site["stack"]) i = i.get<uint32_t>() + 1;
  });
  TempDir dir;
  const std::string plain = dir.path() + "/plain.json";
  const std::string more = dir.path() + "/more.json";
  std::ofstream(plain) << text;
  std::ofstream(more) << extra.dump(2);
  tools::Report r1;
  tools::Report r2;
  std::string error;
  ASSERT_TRUE(tools::ReadReport(plain, &r1, &error)) << error;
  ASSERT_TRUE(tools::ReadReport(more, &r2, &error)) << error;
  EXPECT_EQ(tools::ReportDocument(r1.model), tools::ReportDocument(r2.model));
  EXPECT_EQ(tools::ReportDocument(r2.model).dump().find("gone.cc"), std::string::npos);
  ASSERT_EQ(r2.model.sites.size(), 2u);
  EXPECT_FALSE(r2.model.sites[0].frames.empty());
}

TEST(Report, AtomicWriteCreatesPrivateFileAndReplaces) {
  TempDir dir;
  const std::string path = dir.path() + "/r.json";
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, "one", &error)) << error;
  ASSERT_TRUE(WriteFileAtomically(path, "two", &error)) << error;
  EXPECT_EQ(Slurp(path), "two");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary file is left behind.
  EXPECT_EQ(EntriesIn(dir.path()), 1);
}

TEST(Report, AtomicWriteReplacesASymlinkInsteadOfFollowingIt) {
  TempDir dir;
  const std::string victim = dir.path() + "/victim";
  { std::ofstream(victim) << "precious"; }
  const std::string path = dir.path() + "/r.json";
  ASSERT_EQ(symlink(victim.c_str(), path.c_str()), 0);
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, "report", &error)) << error;
  EXPECT_EQ(Slurp(victim), "precious");
  EXPECT_EQ(Slurp(path), "report");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
}

// A report written to a device or a pipe (/dev/null, /dev/stdout, a FIFO)
// goes into it: a rename over the path would replace the node (as root,
// /dev/null became a regular file).
TEST(Report, AtomicWriteToAFifoWritesIntoItAndLeavesItAFifo) {
  TempDir dir;
  const std::string path = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, "report\n", &error)) << error;
  char got[16] = {};
  EXPECT_EQ(read(reader, got, sizeof(got)), 7);
  EXPECT_EQ(std::string(got), "report\n");
  close(reader);
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(EntriesIn(dir.path()), 1);
}

// No reader: the write fails at once with the path named (it does not wait
// for one, which would hang an exiting process); a reader gone midway
// fails the write, and its SIGPIPE does not end the process.
TEST(Report, AtomicWriteToAFifoWithoutAReaderFailsAndDoesNotDie) {
  TempDir dir;
  const std::string path = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::string error;
  EXPECT_FALSE(WriteFileAtomically(path, "report", &error));
  EXPECT_NE(error.find("cannot open " + path), std::string::npos) << error;
  const int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  AtomicFile file;
  ASSERT_TRUE(file.Open(path, &error)) << error;
  EXPECT_TRUE(file.in_place());
  close(reader);
  file.Write("report");
  EXPECT_FALSE(file.Commit(Durability::kWaitForDisk, &error));
  EXPECT_NE(error.find("cannot write " + path), std::string::npos) << error;
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// A character device like /dev/null (made where the test may: as root).
TEST(Report, AtomicWriteToACharacterDeviceLeavesTheDevice) {
  TempDir dir;
  const std::string path = dir.path() + "/null";
  if (mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot make a device node here (not root): " << std::strerror(errno);
  }
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, "report", &error)) << error;
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
}

// The exit report's teardown is written after CUDA's teardown, into a slot
// the report kept for it: the file is the report the library wrote with
// lifecycle.teardown_ns set, every byte outside the slot as it was (the
// other lifecycle fields' nulls too), and nothing read back or rewritten.
TEST(Report, SetReportTeardownWritesTheTeardownIntoItsSlot) {
  TempDir dir;
  const std::string path = dir.path() + "/r.json";
  Tracker t;
  ReportContext ctx;
  ctx.trigger = "exit";
  ctx.lifecycle.first_call_ns = 10;
  SiteResolver sites(nullptr);
  const std::string written = BuildReportJson(t.Snapshot(), ctx, &sites);
  std::string text = written;
  const size_t slot = OpenTeardownSlot(&text);
  ASSERT_NE(slot, std::string::npos);
  // The slot is whitespace before the null: the same document.
  EXPECT_EQ(text.size(), written.size() + kTeardownSlotWidth - 4);
  EXPECT_EQ(text.substr(slot, kTeardownSlotWidth),
            std::string(kTeardownSlotWidth - 4, ' ') + "null");
  EXPECT_EQ(nlohmann::json::parse(text), nlohmann::json::parse(written));
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, text, &error)) << error;
  ASSERT_TRUE(SetReportTeardown(path, slot, 598674, &error)) << error;
  nlohmann::json expected = nlohmann::json::parse(written);
  ASSERT_TRUE(expected["lifecycle"]["teardown_ns"].is_null());
  ASSERT_TRUE(expected["lifecycle"]["exit_status"].is_null());
  expected["lifecycle"]["teardown_ns"] = 598674;
  const std::string done = Slurp(path);
  EXPECT_EQ(nlohmann::json::parse(done), expected);
  ASSERT_EQ(done.size(), text.size());
  EXPECT_EQ(done.substr(0, slot), text.substr(0, slot));
  EXPECT_EQ(done.substr(slot, kTeardownSlotWidth),
            std::string(kTeardownSlotWidth - 6, ' ') + "598674");
  EXPECT_EQ(done.substr(slot + kTeardownSlotWidth), text.substr(slot + kTeardownSlotWidth));
  // The largest teardown fills the slot.
  ASSERT_TRUE(WriteFileAtomically(path, text, &error)) << error;
  ASSERT_TRUE(SetReportTeardown(path, slot, UINT64_MAX, &error)) << error;
  EXPECT_EQ(nlohmann::json::parse(Slurp(path))["lifecycle"]["teardown_ns"], UINT64_MAX);
  // A slot written already, or a file replaced since, is left alone, with a
  // reason; so is a file that is gone.
  const std::string filled = Slurp(path);
  EXPECT_FALSE(SetReportTeardown(path, slot, 1, &error));
  EXPECT_EQ(error, path + " is no longer the exit report gpuwatch wrote");
  EXPECT_EQ(Slurp(path), filled);
  ASSERT_TRUE(WriteFileAtomically(path, R"({"lifecycle": {"exit_status": "0"}})", &error));
  EXPECT_FALSE(SetReportTeardown(path, slot, 1, &error));
  EXPECT_EQ(error, path + " is no longer the exit report gpuwatch wrote");
  EXPECT_EQ(Slurp(path), R"({"lifecycle": {"exit_status": "0"}})");
  EXPECT_FALSE(SetReportTeardown(dir.path() + "/gone.json", slot, 1, &error));
  EXPECT_EQ(error.rfind("cannot open " + dir.path() + "/gone.json: ", 0), 0u) << error;
  // No slot in a report whose teardown_ns is set or missing: the text stays.
  std::string set = filled;
  EXPECT_EQ(OpenTeardownSlot(&set), std::string::npos);
  EXPECT_EQ(set, filled);
  std::string none = DumpReport(nlohmann::json{{"lifecycle", {{"exit_status", 0}}}});
  const std::string none_was = none;
  EXPECT_EQ(OpenTeardownSlot(&none), std::string::npos);
  EXPECT_EQ(none, none_was);
}

// The frame table and the trace are printed by hand after the rest, one
// element per line, into the one buffer the head was printed to: the text,
// byte for byte, with a head and without one, with events from their lines.
TEST(Report, DumpReportPrintsTheTailAfterTheHeadByteForByte) {
  const nlohmann::json table = nlohmann::json::array({{{"function", "f"}}, {{"function", "g"}}});
  nlohmann::json trace = {{"capacity", 4}, {"events", nlohmann::json::array({{"mem", 1}})}};
  const nlohmann::json doc = {
      {"sites", {{{"stack", {0, 1}}}}}, {"frame_table", table}, {"trace", trace}};
  EXPECT_EQ(DumpReport(doc),
            "{\n  \"sites\": [\n    {\n      \"stack\": [0, 1]\n    }\n  ],"
            "\n  \"frame_table\": [\n    {\"function\":\"f\"},\n    {\"function\":\"g\"}\n  ],"
            "\n  \"trace\": {\n    \"capacity\": 4,\n    \"events\": [\n      [\"mem\",1]"
            "\n    ]\n  }\n}\n");
  TraceEventLines lines;
  lines.count = 2;
  lines.append = [](size_t i, std::string* out) { *out += "[\"e\"," + std::to_string(i) + "]"; };
  EXPECT_EQ(DumpReport({{"trace", trace}, {"frame_table", nlohmann::json::array()}}, &lines),
            "{\n  \"frame_table\": [],\n  \"trace\": {\n    \"capacity\": 4,"
            "\n    \"events\": [\n      [\"e\",0],\n      [\"e\",1]\n    ]\n  }\n}\n");
  EXPECT_EQ(DumpReport({{"trace", {{"capacity", 0}}}}),
            "{\n  \"trace\": {\n    \"capacity\": 0,\n    \"events\": []\n  }\n}\n");
  EXPECT_EQ(DumpReport(nlohmann::json::object()), "{}\n");
  EXPECT_EQ(DumpReport({{"a", 1}}), "{\n  \"a\": 1\n}\n");
}

// A report written while the process ends (exit, a signal) starts its
// writeback and does not wait for the disk; a checkpoint (the default)
// waits. The teardown time written into the exit report afterwards does not.
TEST(Report, AnEndingProcessReportDoesNotWaitForTheDisk) {
  TempDir dir;
  const std::string path = dir.path() + "/r.json";
  std::string error;
  const int fsyncs = g_fsyncs.load();
  const int writebacks = g_writebacks.load();
  std::string text = DumpReport({{"lifecycle", {{"teardown_ns", nullptr}}}});
  const size_t slot = OpenTeardownSlot(&text);
  ASSERT_NE(slot, std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(path, text, &error, Durability::kStartWriteback)) << error;
  EXPECT_EQ(Slurp(path), text);
  EXPECT_EQ(g_fsyncs.load(), fsyncs);
  EXPECT_EQ(g_writebacks.load(), writebacks + 1);
  ASSERT_TRUE(SetReportTeardown(path, slot, 7, &error)) << error;
  EXPECT_EQ(nlohmann::json::parse(Slurp(path))["lifecycle"]["teardown_ns"], 7);
  EXPECT_EQ(g_fsyncs.load(), fsyncs);
  EXPECT_EQ(g_writebacks.load(), writebacks + 2);
  ASSERT_TRUE(WriteFileAtomically(path, "checkpoint", &error)) << error;
  EXPECT_EQ(Slurp(path), "checkpoint");
  EXPECT_EQ(g_fsyncs.load(), fsyncs + 1);
  EXPECT_EQ(g_writebacks.load(), writebacks + 2);
}

// An AtomicFile written in pieces is their concatenation once committed; one
// not committed leaves the path as it was and no temporary file behind.
TEST(Report, AtomicFileIsWrittenInPiecesOrNotAtAll) {
  TempDir dir;
  const std::string path = dir.path() + "/r.json";
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, "old", &error)) << error;
  {
    AtomicFile file;
    ASSERT_TRUE(file.Open(path, &error)) << error;
    file.Write("{\"a\": ");
    file.Write("");
    file.Write("1}\n");
    EXPECT_EQ(Slurp(path), "old");  // not yet
  }
  EXPECT_EQ(Slurp(path), "old");
  EXPECT_EQ(EntriesIn(dir.path()), 1);
  AtomicFile file;
  ASSERT_TRUE(file.Open(path, &error)) << error;
  file.Write("{\"a\": ");
  file.Write("1}\n");
  ASSERT_TRUE(file.Commit(Durability::kStartWriteback, &error)) << error;
  EXPECT_EQ(Slurp(path), "{\"a\": 1}\n");
  EXPECT_EQ(EntriesIn(dir.path()), 1);
  AtomicFile nowhere;
  EXPECT_FALSE(nowhere.Open("/nonexistent-dir/r.json", &error));
  EXPECT_NE(error.find("/nonexistent-dir"), std::string::npos) << error;
  nowhere.Write("x");
  EXPECT_FALSE(nowhere.Commit(Durability::kWaitForDisk, &error));
}

// Streamed (TextFlush), the text is the same bytes, handed over at the end
// of a frame or an event once it passes the chunk: the head first, whole.
TEST(Report, DumpReportStreamedIsTheSameTextInPieces) {
  const nlohmann::json table = nlohmann::json::array({{{"function", "f"}}, {{"function", "g"}}});
  const nlohmann::json doc = {
      {"sites", {{{"stack", {0, 1}}}}}, {"frame_table", table}, {"trace", {{"capacity", 4}}}};
  TraceEventLines lines;
  lines.count = 3;
  lines.append = [](size_t i, std::string* out) { *out += "[\"e\"," + std::to_string(i) + "]"; };
  const std::string head = "{\n  \"sites\": [\n    {\n      \"stack\": [0, 1]\n    }\n  ]";
  for (const nlohmann::json& d :
       {doc, nlohmann::json{{"frame_table", table}, {"trace", nlohmann::json::object()}}}) {
    const std::string whole = DumpReport(d, &lines);
    for (const size_t chunk : {size_t{1}, size_t{40}, size_t{1} << 20}) {
      std::vector<std::string> pieces;
      const TextFlush flush{chunk, [&pieces](std::string* text) { pieces.push_back(*text); }};
      const std::string rest = DumpReport(d, &lines, &flush);
      std::string streamed;
      for (const std::string& p : pieces) streamed += p;
      EXPECT_EQ(streamed + rest, whole) << chunk;
      if (chunk == 1) {
        // One piece per frame and per event; the first holds the head.
        ASSERT_EQ(pieces.size(), 5u);
        EXPECT_EQ(pieces[1], ",\n    {\"function\":\"g\"}");
        EXPECT_EQ(pieces[4], ",\n      [\"e\",2]");
        EXPECT_EQ(rest, "\n    ]\n  }\n}\n");
        if (d.contains("sites")) {
          EXPECT_EQ(pieces[0].rfind(head, 0), 0u) << pieces[0];
        }
      }
      if (chunk == size_t{1} << 20) {
        EXPECT_TRUE(pieces.empty());
      }
    }
  }
}

TEST(Report, UnwritableDirectoryGivesAReasonNotACrash) {
  std::string error;
  EXPECT_FALSE(WriteFileAtomically("/nonexistent-dir/r.json", "x", &error));
  EXPECT_NE(error.find("/nonexistent-dir"), std::string::npos) << error;
}

TEST(Report, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(3ULL << 30), "3.0 GiB");
}

TEST(Report, FormatsGrowthRatesOneWayInSentencesAndOneWayInTables) {
  EXPECT_EQ(FormatRate(1 << 20, "mark", RateStyle::kProse), "1.0 MiB per mark");
  EXPECT_EQ(FormatRate(1536, "second", RateStyle::kProse), "1.5 KiB per second");
  EXPECT_EQ(FormatRate(1 << 20, "mark", RateStyle::kCompact), "1.0 MiB/mark");
  EXPECT_EQ(FormatRate(1536.4, "second", RateStyle::kCompact), "1.5 KiB/s");
  EXPECT_EQ(FormatRate(-4096, "second", RateStyle::kCompact), "0 B/s");  // shrinking: no growth
}

// Rows that read the same are one group, in the order of their first row;
// their call paths split at the first frame where the stacks differ.
TEST(SiteGroups, GroupByLocationAndFirstDifference) {
  const std::vector<std::string> keys = {"a.cc:3 (f)", "b.cc:9 (g)", "a.cc:3 (f)", "a.cc:3 (f)"};
  const std::vector<SiteGroup> groups = GroupByLocation(keys, {5, 9, 3, 2});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(groups[0].bytes, 10u);
  EXPECT_EQ(groups[1].members, (std::vector<size_t>{1}));
  // By bytes: one row of 9 before a group of 10 would not be.
  EXPECT_EQ(GroupByLocation(keys, {1, 9, 1, 1})[0].members, (std::vector<size_t>{1}));
  const std::vector<std::vector<std::string>> stacks = {
      {"f", "helper:4", "main:10"}, {}, {"f", "helper:4", "main:11"}, {"f", "helper:4"}};
  const auto frame = [&stacks](size_t row, size_t i) {
    return i < stacks[row].size() ? stacks[row][i] : std::string();
  };
  EXPECT_EQ(FirstDifference(groups[0].members, frame), 2u);
  EXPECT_EQ(FirstDifference({0, 3}, frame), 2u);  // one stack ends there
  EXPECT_EQ(FirstDifference({0}, frame), 0u);
  EXPECT_EQ(MoreCallPaths(0), "");
  EXPECT_EQ(MoreCallPaths(1), "... and 1 more call path");
  EXPECT_EQ(MoreCallPaths(997), "... and 997 more call paths");
}

}  // namespace
}  // namespace gpuwatch
