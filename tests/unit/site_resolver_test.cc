// A SiteResolver kept from report to report (the reports' one,
// interpose/agent/reports.cc): which ids read the same survives
// ReleaseFrames(), the frames do not, and a smaller id resolved after a
// larger one that reads the same becomes the answer of both.
#include "libgpuwatch/analysis/site_resolver.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/stacks/unwind.h"

namespace site_resolver_test_sites {

__attribute__((noinline)) int Capture(uintptr_t* pcs, int max) {
  const int n = gpuwatch::CaptureStack(pcs, max, 0);
  asm volatile("" ::: "memory");  // keep the call from becoming a tail call
  return n;
}

}  // namespace site_resolver_test_sites

namespace gpuwatch {

// Two functions of namespace gpuwatch: frames the resolver trims from the top
// of a stack, as it trims the callback's own frames.
__attribute__((noinline)) int SiteResolverTestTrimmedA(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}
__attribute__((noinline)) int SiteResolverTestTrimmedB(int x) {
  asm volatile("" ::: "memory");
  return x + 2;
}

namespace {

// A pc inside one of them (a return address: the symbolizer looks up pc - 1).
uintptr_t GpuwatchPc(int which) {
  const auto fn = which == 0 ? reinterpret_cast<uintptr_t>(&SiteResolverTestTrimmedA)
                             : reinterpret_cast<uintptr_t>(&SiteResolverTestTrimmedB);
  return fn + 1;
}

// One stack three ways: as captured, and under one more gpuwatch frame (two
// different ones). All three read the same once trimmed.
struct ThreeIds {
  StackTable table{1000, 1 << 20};
  uint32_t plain = 0;
  uint32_t under_a = 0;
  uint32_t under_b = 0;
  ThreeIds() {
    std::vector<uintptr_t> pcs(33);
    const int n = site_resolver_test_sites::Capture(pcs.data() + 1, 32);
    if (n <= 0) return;
    plain = table.Intern(pcs.data() + 1, n);
    pcs[0] = GpuwatchPc(0);
    under_a = table.Intern(pcs.data(), n + 1);
    pcs[0] = GpuwatchPc(1);
    under_b = table.Intern(pcs.data(), n + 1);
  }
};

TEST(SiteResolver, KeptAcrossReportsKeepsCanonicalIdsNotFrames) {
  const ThreeIds ids;
  ASSERT_NE(ids.plain, 0u);
  ASSERT_LT(ids.plain, ids.under_a);
  ASSERT_LT(ids.under_a, ids.under_b);
  Symbolizer symbolizer;
  SiteResolver sites(&ids.table, &symbolizer);
  // A first report lists the larger id alone: it is its own site.
  sites.Prepare({ids.under_a});
  EXPECT_EQ(sites.Canonical(ids.under_a), ids.under_a);
  const std::string location = sites.LocationOf(ids.under_a);
  EXPECT_NE(location.find("site_resolver_test.cc:"), std::string::npos) << location;
  EXPECT_GT(sites.frames_cached(), 0u);
  sites.ReleaseFrames();
  EXPECT_EQ(sites.frames_cached(), 0u);
  // The next report: the smaller id that reads the same is resolved after
  // it, and becomes the answer of both.
  sites.Prepare({ids.plain, ids.under_a});
  EXPECT_EQ(sites.Canonical(ids.plain), ids.plain);
  EXPECT_EQ(sites.Canonical(ids.under_a), ids.plain);
  sites.ReleaseFrames();
  // A report of ids already resolved symbolizes nothing for them.
  sites.Prepare({ids.plain, ids.under_a});
  EXPECT_EQ(sites.Canonical(ids.under_a), ids.plain);
  EXPECT_EQ(sites.frames_cached(), 0u);
  // A new id that reads as an old one merges with it, though that one's
  // frames were released; the frames come back when a report lists them.
  sites.Prepare({ids.plain, ids.under_a, ids.under_b});
  EXPECT_EQ(sites.Canonical(ids.under_b), ids.plain);
  EXPECT_EQ(sites.LocationOf(ids.plain), location);
}

// A site's location is kept across reports: a checkpoint's trace names every
// site by location, and the next one must not symbolize 10,000 stacks again
// for it. Its frames, when a report lists them, come back as before.
TEST(SiteResolver, KeptAcrossReportsKeepsLocationsWithoutSymbolizingAgain) {
  const ThreeIds ids;
  ASSERT_NE(ids.plain, 0u);
  Symbolizer symbolizer;
  SiteResolver sites(&ids.table, &symbolizer);
  sites.Prepare({ids.plain, ids.under_a});
  const std::string location = sites.LocationOf(ids.under_a);
  EXPECT_NE(location.find("site_resolver_test.cc:"), std::string::npos) << location;
  EXPECT_GT(sites.frames_cached(), 0u);
  sites.ReleaseFrames();
  EXPECT_EQ(sites.LocationOf(ids.under_a), location);
  EXPECT_EQ(sites.frames_cached(), 0u);
  // An id not asked before is symbolized, and reads as the fresh resolver's.
  SiteResolver fresh(&ids.table, &symbolizer);
  EXPECT_EQ(sites.LocationOf(ids.under_b), fresh.LocationOf(ids.under_b));
  EXPECT_EQ(sites.frames_cached(), 1u);
  EXPECT_EQ(sites.FramesOf(ids.under_a).size(), fresh.FramesOf(ids.under_a).size());
}

// A fresh resolver given the ids in increasing order answers as the kept
// one does.
TEST(SiteResolver, FreshResolverAgreesWithTheKeptOne) {
  const ThreeIds ids;
  ASSERT_NE(ids.plain, 0u);
  SiteResolver sites(&ids.table);
  sites.Prepare({ids.under_b, ids.plain, ids.under_a});
  EXPECT_EQ(sites.Canonical(ids.plain), ids.plain);
  EXPECT_EQ(sites.Canonical(ids.under_a), ids.plain);
  EXPECT_EQ(sites.Canonical(ids.under_b), ids.plain);
}

// The resolver reads a site's frames where the symbolizer keeps them: no
// frame is copied for a report (copies, kilobytes a site amid what a kept
// resolver keeps, left a checkpoint's freed memory in pieces malloc could not
// return: docs/BENCHMARKS.md, issue 33, stop 50). Its frames, the copies
// FramesOf() makes for the report's other readers, and a kept frame table
// read the same, and the kept table still reads them after ReleaseFrames().
TEST(SiteResolver, FramesAreTheSymbolizersOwnNotCopies) {
  const ThreeIds ids;
  ASSERT_NE(ids.plain, 0u);
  Symbolizer symbolizer;
  SiteResolver sites(&ids.table, &symbolizer);
  const std::span<const uintptr_t> pcs = ids.table.Get(ids.under_a);
  std::vector<const Frame*> own;
  for (const uintptr_t pc : pcs) {
    for (const Frame& f : symbolizer.SymbolizeAll(pc)) own.push_back(&f);
  }
  const std::span<const Frame* const> refs = sites.FrameRefsOf(ids.under_a);
  const std::vector<const Frame*> frames(refs.begin(), refs.end());  // past ReleaseFrames()
  // The gpuwatch frame on top is trimmed: the rest are the symbolizer's.
  ASSERT_FALSE(frames.empty());
  ASSERT_LT(frames.size(), own.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i], own[own.size() - frames.size() + i]) << i;
  }
  EXPECT_EQ(sites.frames_cached(), 1u);
  const std::vector<Frame>& copies = sites.FramesOf(ids.under_a);
  ASSERT_EQ(copies.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(copies[i].function, frames[i]->function) << i;
    EXPECT_EQ(copies[i].line, frames[i]->line) << i;
  }
  sites.KeepFrameTable(true);
  const std::vector<uint32_t> indices = sites.StackOf(ids.under_a);
  sites.KeepFrameTable(false);
  sites.ReleaseFrames();
  EXPECT_EQ(sites.frames_cached(), 0u);
  sites.KeepFrameTable(true);
  ASSERT_EQ(indices.size(), frames.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    EXPECT_EQ(sites.frame_table()[indices[i]], frames[i]) << i;
  }
  sites.KeepFrameTable(false);
}

}  // namespace
}  // namespace gpuwatch
