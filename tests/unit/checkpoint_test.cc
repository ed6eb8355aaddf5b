#include "libgpuwatch/report/checkpoint.h"

#include <gtest/gtest.h>

namespace gpuwatch {
namespace {

constexpr uint64_t kSecond = 1000000000ULL;
constexpr uint64_t kInterval = 5 * kSecond;

TEST(Checkpoint, FirstOneWaitsForAnEventThenComesAtOnce) {
  const CheckpointState never;
  EXPECT_FALSE(CheckpointDue(never, 3 * kSecond, /*events=*/0, /*peak=*/0, kInterval));
  EXPECT_TRUE(CheckpointDue(never, 3 * kSecond, 1, 0, kInterval));
}

TEST(Checkpoint, IntervalPassedAndSomethingChanged) {
  CheckpointState last;
  last.last_ns = 10 * kSecond;
  last.last_cost_ns = kSecond / 1000;  // 1 ms: the budget allows one every 20 ms
  last.events = 100;
  last.peak = 4096;
  EXPECT_FALSE(CheckpointDue(last, 14 * kSecond, 200, 4096, kInterval));  // too soon
  EXPECT_TRUE(CheckpointDue(last, 15 * kSecond, 200, 4096, kInterval));
  EXPECT_FALSE(CheckpointDue(last, 60 * kSecond, 100, 4096, kInterval));  // nothing new
}

TEST(Checkpoint, NewPeakComesBeforeTheInterval) {
  CheckpointState last;
  last.last_ns = 10 * kSecond;
  last.last_cost_ns = kSecond / 1000;
  last.events = 100;
  last.peak = 4096;
  EXPECT_TRUE(CheckpointDue(last, 11 * kSecond, 101, 8192, kInterval));
  EXPECT_FALSE(CheckpointDue(last, 11 * kSecond, 101, 4096, kInterval));
}

// A checkpoint that took 1.5 s of CPU (a million live allocations) is not
// followed by another, peak or not, for 30 s: at most 5% of a core.
TEST(Checkpoint, ExpensiveCheckpointsAreSpacedByTheirCost) {
  CheckpointState last;
  last.last_ns = 10 * kSecond;
  last.last_cost_ns = 3 * kSecond / 2;
  last.events = 100;
  last.peak = 4096;
  const uint64_t budget = kCheckpointCostFactor * last.last_cost_ns;
  EXPECT_EQ(budget, 30 * kSecond);
  EXPECT_FALSE(CheckpointDue(last, 15 * kSecond, 200, 8192, kInterval));
  EXPECT_FALSE(CheckpointDue(last, 10 * kSecond + budget - 1, 200, 8192, kInterval));
  EXPECT_TRUE(CheckpointDue(last, 10 * kSecond + budget, 200, 8192, kInterval));
  EXPECT_TRUE(CheckpointDue(last, 10 * kSecond + budget, 200, 4096, kInterval));
}

// A failed write is tried again 1 s later, then 2, 4, ... s, at most a
// minute apart, whether or not anything changed; a write that works ends it.
TEST(Checkpoint, FailedWritesAreTriedAgainLessAndLessOften) {
  CheckpointState s;
  s.last_ns = 1 * kSecond;
  s.events = 10;
  uint64_t now = 100 * kSecond;
  const uint64_t waits[] = {1, 2, 4, 8, 16, 32, 60, 60};
  for (const uint64_t wait : waits) {
    CheckpointFailed(&s, now);
    EXPECT_FALSE(CheckpointDue(s, now + wait * kSecond - 1, 10, 0, kInterval)) << wait;
    EXPECT_TRUE(CheckpointDue(s, now + wait * kSecond, 10, 0, kInterval)) << wait;
    now += wait * kSecond;
  }
  EXPECT_EQ(s.failures, 8u);
}

}  // namespace
}  // namespace gpuwatch
