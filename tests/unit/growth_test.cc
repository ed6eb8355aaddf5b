#include "libgpuwatch/analysis/growth.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpuwatch {
namespace {

// Samples at marks 1..n where site `id` holds series[i] bytes.
std::vector<GrowthSample> Marks(
    const std::vector<std::pair<uint32_t, std::vector<uint64_t>>>& sites) {
  const size_t n = sites.front().second.size();
  std::vector<GrowthSample> samples(n);
  for (size_t i = 0; i < n; ++i) {
    samples[i].mark = i + 1;
    samples[i].time_ns = (i + 1) * 500000000ULL;  // every half second
    for (const auto& [id, series] : sites) {
      if (series[i] != 0) samples[i].sites.emplace_back(id, series[i]);
      samples[i].device_bytes += series[i];
    }
  }
  return samples;
}

TEST(Growth, LinearLeakPerMarkWithItsRate) {
  const auto suspects = FindGrowthSuspects(
      Marks({{7, {100, 200, 300, 400, 500, 600}}, {8, {50, 50, 50, 50, 50, 50}}}),
      GrowthUnit::kMark);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].site, 7u);
  EXPECT_EQ(suspects[0].rate, 100.0);
  EXPECT_EQ(suspects[0].first_bytes, 100u);
  EXPECT_EQ(suspects[0].last_bytes, 600u);
  EXPECT_EQ(suspects[0].from, 1.0);
  EXPECT_EQ(suspects[0].to, 6.0);
  EXPECT_EQ(suspects[0].samples, 6u);
  EXPECT_EQ(suspects[0].series, (std::vector<uint64_t>{100, 200, 300, 400, 500, 600}));
}

TEST(Growth, RatePerSecondFromPeriodicSamples) {
  auto samples = Marks({{3, {0, 1000, 2000, 3000, 4000}}});
  for (auto& s : samples) s.mark = 0;
  const auto suspects = FindGrowthSuspects(samples, GrowthUnit::kSecond);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].unit, GrowthUnit::kSecond);
  EXPECT_DOUBLE_EQ(suspects[0].rate, 2000.0);  // 1000 bytes per half second
  EXPECT_DOUBLE_EQ(suspects[0].from, 0.5);
  EXPECT_DOUBLE_EQ(suspects[0].to, 2.5);
}

TEST(Growth, FreedAtTheEndIsStillGrowth) {
  const auto suspects =
      FindGrowthSuspects(Marks({{1, {10, 20, 30, 40, 50, 0}}}), GrowthUnit::kMark);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].last_bytes, 50u);
  EXPECT_EQ(suspects[0].to, 5.0);
  EXPECT_EQ(suspects[0].rate, 10.0);
}

TEST(Growth, GrowthAfterAResetIsMeasuredFromTheReset) {
  const auto suspects = FindGrowthSuspects(
      Marks({{1, {500, 600, 700, 0, 100, 200, 300, 400, 800}}}), GrowthUnit::kMark);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].first_bytes, 0u);
  EXPECT_EQ(suspects[0].from, 4.0);
  EXPECT_EQ(suspects[0].rate, 160.0);  // 800 bytes over marks 4-9
}

TEST(Growth, WarmUpThenPlateauIsNotASuspect) {
  EXPECT_TRUE(FindGrowthSuspects(Marks({{1, {0, 100, 200, 300, 300, 300, 300, 300, 300, 300}}}),
                                 GrowthUnit::kMark)
                  .empty());
}

TEST(Growth, OscillationIsNotASuspect) {
  EXPECT_TRUE(
      FindGrowthSuspects(Marks({{1, {100, 200, 100, 200, 100, 200, 300}}}), GrowthUnit::kMark)
          .empty());
}

TEST(Growth, TooFewRisesAreNotASuspect) {
  EXPECT_TRUE(FindGrowthSuspects(Marks({{1, {100, 200, 300}}}), GrowthUnit::kMark).empty());
  EXPECT_EQ(FindGrowthSuspects(Marks({{1, {100, 200, 300, 400}}}), GrowthUnit::kMark).size(), 1u);
}

TEST(Growth, StepsEveryOtherMarkAreASuspect) {
  const auto suspects =
      FindGrowthSuspects(Marks({{1, {1, 1, 2, 2, 3, 3, 4, 4}}}), GrowthUnit::kMark);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].to, 8.0);
}

TEST(Growth, SitesThatReadTheSameAreMergedBeforeJudging) {
  // Two stack ids of one site take turns: each alone oscillates, together
  // they grow by 10 per mark.
  const auto samples = Marks({{4, {10, 10, 30, 30, 50, 50}}, {5, {0, 10, 0, 10, 0, 10}}});
  EXPECT_TRUE(FindGrowthSuspects(samples, GrowthUnit::kMark).empty());
  const auto merged =
      FindGrowthSuspects(samples, GrowthUnit::kMark, [](uint32_t id) { return id == 5 ? 4 : id; });
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].site, 4u);
  EXPECT_EQ(merged[0].series, (std::vector<uint64_t>{10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(merged[0].rate, 10.0);
}

TEST(Growth, LargestGrowthFirst) {
  const auto suspects = FindGrowthSuspects(
      Marks({{1, {1, 2, 3, 4, 5}}, {2, {100, 200, 300, 400, 500}}}), GrowthUnit::kMark);
  ASSERT_EQ(suspects.size(), 2u);
  EXPECT_EQ(suspects[0].site, 2u);
  EXPECT_EQ(suspects[1].site, 1u);
}

TEST(SampleSeries, KeepsEvenlyThinnedSamplesAndTheNewest) {
  SampleSeries series(8);
  for (uint64_t i = 1; i <= 100; ++i) {
    GrowthSample s;
    s.mark = i;
    series.Add(std::move(s));
    const auto kept = series.Samples();
    ASSERT_LE(kept.size(), 9u);
    EXPECT_EQ(kept.front().mark, 1u);
    EXPECT_EQ(kept.back().mark, i);
  }
  EXPECT_EQ(series.total(), 100u);
  const auto kept = series.Samples();
  // Kept marks are evenly spaced (every 16th: 1, 17, 33, ...), then the newest.
  for (size_t i = 1; i + 1 < kept.size(); ++i) {
    EXPECT_EQ(kept[i].mark - kept[i - 1].mark, kept[1].mark - kept[0].mark);
  }
  EXPECT_EQ(kept.back().mark, 100u);
}

TEST(Timeline, NumbersMarksAndKeepsTheLargestSites) {
  Timeline timeline(/*interval_ms=*/250, /*capacity=*/16, /*max_sites=*/2);
  std::vector<std::pair<uint32_t, uint64_t>> scan = {{1, 100}, {2, 300}, {3, 200}};
  EXPECT_EQ(timeline.AddMark(10, "a", 600, &scan), 1u);
  scan.clear();
  EXPECT_EQ(timeline.AddMark(20, "b", 0, &scan), 2u);
  scan = {{3, 200}};
  timeline.AddPeriodic(15, 600, &scan);
  const TimelineSnapshot snap = timeline.Snapshot();
  ASSERT_EQ(snap.marks.size(), 2u);
  EXPECT_EQ(snap.marks_total, 2u);
  EXPECT_EQ(snap.periodic_total, 1u);
  EXPECT_EQ(snap.interval_ms, 250u);
  EXPECT_EQ(snap.capacity, 16u);
  EXPECT_EQ(snap.marks[0].label, "a");
  EXPECT_EQ(snap.marks[0].mark, 1u);
  // The two largest sites, sorted by id.
  EXPECT_EQ(snap.marks[0].sites, (std::vector<std::pair<uint32_t, uint64_t>>{{2, 300}, {3, 200}}));
  EXPECT_EQ(snap.periodic[0].mark, 0u);
}

// A scan of many sites, as Tracker::LiveDeviceBytesBySite gives it (id
// order): site i holds i bytes.
std::vector<std::pair<uint32_t, uint64_t>> Scan(uint32_t sites) {
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (uint32_t id = 1; id <= sites; ++id) scan.emplace_back(id, id);
  return scan;
}

TEST(Timeline, HoldsOnlyTheSitesItKeepsWhateverTheScan) {
  constexpr size_t kMaxSites = 4;
  Timeline timeline(/*interval_ms=*/1000, /*capacity=*/8, kMaxSites);
  // gpuwatch's thread reuses one scan of 10,000 sites every second; marks
  // come with a fresh one each.
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (int t = 0; t < 40; ++t) {
    scan = Scan(10000);
    timeline.AddPeriodic(t, 0, &scan);
    if (t % 10 == 0) {
      std::vector<std::pair<uint32_t, uint64_t>> fresh = Scan(10000);
      timeline.AddMark(t, "m", 0, &fresh);
    }
  }
  EXPECT_GE(scan.capacity(), 10000u);  // the caller's buffer is left to it
  const TimelineSnapshot snap = timeline.Snapshot();
  const std::vector<std::pair<uint32_t, uint64_t>> largest = {
      {9997, 9997}, {9998, 9998}, {9999, 9999}, {10000, 10000}};
  for (const GrowthSample& s : snap.periodic) EXPECT_EQ(s.sites, largest);
  for (const GrowthSample& s : snap.marks) EXPECT_EQ(s.sites, largest);
  // Each kept sample holds its 4 sites, not the scan's 10,000: the bound in
  // growth.h (2 x capacity x max_sites entries) holds.
  // Periodic: 0, 8, 16, 24, 32 kept (thinned at 8, 16 and 32) and the
  // newest, 39; marks: all 4.
  ASSERT_EQ(snap.periodic.size(), 6u);
  ASSERT_EQ(snap.marks.size(), 4u);
  const size_t samples = snap.periodic.size() + snap.marks.size();
  EXPECT_EQ(timeline.SiteBytesHeld(), samples * kMaxSites * sizeof(largest[0]));
}

TEST(LargestSites, KeepsTheLargestInIdOrderOrAllWhenFewer) {
  std::vector<std::pair<uint32_t, uint64_t>> scan = {{1, 50}, {2, 10}, {3, 70}, {4, 60}, {5, 5}};
  EXPECT_EQ(LargestSites(&scan, 3),
            (std::vector<std::pair<uint32_t, uint64_t>>{{1, 50}, {3, 70}, {4, 60}}));
  scan = {{4, 1}, {2, 2}};
  const auto all = LargestSites(&scan, 3);
  EXPECT_EQ(all, (std::vector<std::pair<uint32_t, uint64_t>>{{2, 2}, {4, 1}}));
  EXPECT_EQ(all.capacity(), 2u);
  scan.clear();
  EXPECT_TRUE(LargestSites(&scan, 3).empty());
}

}  // namespace
}  // namespace gpuwatch
