// End-to-end tests of pool regions: tests/e2e/programs/nvtx_pool.cu declares
// its blocks with NVTX's memory extension (the toolkit's nvtx3 headers), and
// the report shows the blocks still registered inside the allocation that
// holds them, named by the stack that registered them, with exact bytes,
// under `gpuwatch run`, LD_PRELOAD and the driver's injection, and chained
// to another tool that takes the extension too.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string At(const std::string& name) { return ProgramLine("nvtx_pool.cu", "// AT:" + name); }

std::string FrameLocation(const json& frame) {
  const std::string file = frame.value("file", "");
  return file.substr(file.rfind('/') + 1) + ":" + std::to_string(frame.value("line", 0));
}

// What the program leaves registered (its comments say why), largest first.
struct ExpectedSite {
  uint64_t bytes;
  const char* caller;   // AT: marker of the line that asked the pool
  const char* phase;    // "": none
  const char* segment;  // AT: marker of the allocation holding it; "": none
};

void ExpectRegions(const json& report) {
  ASSERT_TRUE(report.contains("regions")) << report.dump().substr(0, 400);
  const json& r = report["regions"];
  EXPECT_EQ(r["live_count"], 3);
  EXPECT_EQ(r["live_bytes"], 512 * kKiB + 128 * kKiB + 64 * kKiB);
  EXPECT_EQ(r["outside_count"], 1);
  EXPECT_EQ(r["outside_bytes"], 64 * kKiB);
  const std::vector<ExpectedSite> expected = {
      {512 * kKiB, "leaked", "step", "segment"},
      {128 * kKiB, "shrunk", "", "segment"},  // registered at 256 KiB, resized
      {64 * kKiB, "torn_down", "", ""},       // its pool freed its segment
  };
  ASSERT_EQ(r["sites"].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].caller);
    const json& s = r["sites"][i];
    EXPECT_EQ(s["bytes"], expected[i].bytes);
    EXPECT_EQ(s["count"], 1);
    // The pool's registering line; the user's line that asked for the
    // block, past the pool's two frames (Register, Allocate).
    EXPECT_EQ(s["location"], At("register"));
    EXPECT_EQ(s["caller"], At(expected[i].caller));
    ASSERT_GE(s["frames"].size(), 3u);
    EXPECT_EQ(FrameLocation(s["frames"][2]), At(expected[i].caller));
    EXPECT_EQ(s.value("phase", ""), expected[i].phase);
    const bool inside = *expected[i].segment != '\0';
    EXPECT_EQ(s.contains("segment"), inside);
    if (inside) {
      EXPECT_EQ(s["segment"]["location"], At(expected[i].segment));
    }
    EXPECT_EQ(s["outside_count"], inside ? 0 : 1);
    EXPECT_EQ(s["outside_bytes"], inside ? 0 : 64 * kKiB);
  }
  // The 8 MiB segment of the pool kept to the end holds two of them.
  ASSERT_EQ(r["segments"].size(), 1u);
  const json& segment = r["segments"][0];
  EXPECT_EQ(segment["location"], At("segment"));
  EXPECT_EQ(segment["size"], 8 * kMiB);
  EXPECT_EQ(segment["kind"], "device");
  EXPECT_EQ(segment["region_count"], 2);
  EXPECT_EQ(segment["region_bytes"], 640 * kKiB);
  // Its heap is the one still registered; the other two were unregistered.
  ASSERT_EQ(r["heaps"].size(), 1u);
  const json& heap = r["heaps"][0];
  EXPECT_EQ(heap["location"], At("heap"));
  EXPECT_EQ(heap["address"], segment["address"]);
  EXPECT_EQ(heap["size"], 8 * kMiB);
  EXPECT_EQ(heap["region_count"], 2);
  EXPECT_EQ(heap["region_bytes"], 640 * kKiB);
  // 1 + 1 + 1 + 1 + 2 (a batch) in the main pool, 3 in the arena, 1 in the
  // short-lived pool; 4 given back (two by handle); 3 ended by the arena's
  // reset; one unregistration of a pointer that is no region.
  const json counters = {
      {"registered", 10},       {"unregistered", 4},       {"resized", 1},
      {"released_by_reset", 3}, {"replaced", 0},           {"unknown_unregisters", 1},
      {"unknown_resizes", 0},   {"unknown_heaps", 0},      {"dropped", 0},
      {"heaps_registered", 3},  {"heaps_unregistered", 2}, {"heaps_reset", 1},
      {"heaps_dropped", 0}};
  EXPECT_EQ(r["counters"], counters);
  // The leaked segment itself is the pool's, as before.
  const json leak = SiteAt(report["leaks"]["device"], At("segment"));
  ASSERT_TRUE(leak.is_object());
  EXPECT_EQ(leak["bytes"], 8 * kMiB);
}

const char kSummary[] = "gpuwatch: pool regions still registered: 704.0 KiB in 3 regions; ";

TEST(Regions, PoolRegionsUnderGpuwatchRun) {
  ProcessResult process;
  const json report = RunAttached("nvtx_pool", Attach::kRun, {}, &process);
  ExpectRegions(report);
  EXPECT_EQ(LinesStartingWith(process.err, kSummary),
            std::vector<std::string>{std::string(kSummary) + "largest 512.0 KiB registered at " +
                                     At("register") + " from " + At("leaked")});
}

TEST(Regions, PoolRegionsWithLdPreloadAlone) {
  ProcessResult process;
  ExpectRegions(RunAttached("nvtx_pool", Attach::kPreload, {}, &process));
}

TEST(Regions, PoolRegionsWithTheDriversInjectionAlone) {
  ProcessResult process;
  ExpectRegions(RunAttached("nvtx_pool", Attach::kInjection, {}, &process));
}

// The other tool takes the extension too, with heap and region handles of
// its own: both see every call, and gpuwatch follows the program's
// unregistrations by the other tool's handles.
TEST(Regions, ChainsTheMemoryExtensionToAnotherNvtxTool) {
  for (const bool under_run : {true, false}) {
    SCOPED_TRACE(under_run ? "gpuwatch run" : "LD_PRELOAD");
    ScopedTempDir dir;
    ProcessResult process;
    const json report = RunAttached("nvtx_pool", under_run ? Attach::kRun : Attach::kPreload,
                                    OtherNvtxToolEnv(dir), &process);
    ExpectRegions(report);
    // Its handles: the domain, three heaps, the batch's two regions.
    EXPECT_EQ(ReadFile(dir.path() + "/other.txt"),
              "pushes 1 pops 1 domain_pushes 0 domain_pops 0 handles 6 foreign 0\n"
              "heaps 3 heap_unregisters 2 heap_resets 1 regions 10 unregisters 5\n");
  }
}

TEST(Regions, ADisabledGpuwatchStillHandsTheExtensionToTheChainedTool) {
  EXPECT_EQ(ChainedToolAloneCounts("nvtx_pool"),
            "pushes 1 pops 1 domain_pushes 0 domain_pops 0 handles 6 foreign 0\n"
            "heaps 3 heap_unregisters 2 heap_resets 1 regions 10 unregisters 5\n");
}

TEST(Regions, TextReportShowsRegionsInsideTheirSegment) {
  ScopedTempDir dir;
  ProcessResult run;
  const std::string out = RunReportIn(dir, "nvtx_pool", &run);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const ProcessResult text = RunProcess({kCli, "report", out}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  // Under the leaked segment, what of it pool blocks still hold.
  EXPECT_NE(text.out.find("  8.0 MiB        1  " + At("segment")), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("holds 640.0 KiB in 2 pool regions still registered (Pool regions, "
                          "below)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("Pool regions left registered (NVTX memory extension): 704.0 KiB in "
                          "3 regions\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("512.0 KiB        1  [in step] " + At("register")), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("<- main (" + At("leaked") + ")"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("inside the allocation at " + At("segment")), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("1 region in no live allocation"), std::string::npos) << text.out;
  for (const char* note :
       {"  3 regions ended by a heap reset\n", "  1 unregistration of no registered region\n",
        "  10 regions registered in 3 heaps, 4 unregistered\n"}) {
    EXPECT_NE(text.out.find(note), std::string::npos) << note << text.out;
  }
}

TEST(Regions, AMalformedRegionsSectionIsRejectedByName) {
  ScopedTempDir dir;
  ProcessResult run;
  const std::string out = RunReportIn(dir, "nvtx_pool", &run);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(ReadFile(out));
  report["regions"]["segments"][0]["region_bytes"] = "many";
  ExpectMalformed(dir, report,
                  "regions.segments[0].region_bytes is \"many\", expected a count (an integer)");
}

}  // namespace
}  // namespace gpuwatch::testing
