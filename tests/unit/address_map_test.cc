#include "libgpuwatch/base/address_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpuwatch {
namespace {

TEST(AddressMap, InsertFindEraseReplace) {
  AddressMap<uint64_t> map;
  uint64_t old = 0;
  bool dropped = false;
  EXPECT_FALSE(map.Upsert(0x1000, 1, &old, &dropped));
  EXPECT_FALSE(map.Upsert(0x2000, 2, &old, &dropped));
  EXPECT_TRUE(map.Upsert(0x1000, 3, &old, &dropped));
  EXPECT_EQ(old, 1u);
  ASSERT_NE(map.Find(0x1000), nullptr);
  EXPECT_EQ(*map.Find(0x1000), 3u);
  EXPECT_EQ(map.size(), 2u);
  uint64_t out = 0;
  EXPECT_TRUE(map.Erase(0x2000, &out));
  EXPECT_EQ(out, 2u);
  EXPECT_FALSE(map.Erase(0x2000, &out));
  EXPECT_EQ(map.Find(0x2000), nullptr);
  EXPECT_EQ(map.size(), 1u);
}

TEST(AddressMap, ClearEmptiesAndKeepsCapacity) {
  AddressMap<uint64_t> map;
  uint64_t old = 0;
  bool dropped = false;
  for (uint64_t k = 1; k <= 100; ++k) map.Upsert(k, k * 10, &old, &dropped);
  ASSERT_NE(map.Find(7), nullptr);
  *map.Find(7) = 71;  // the mutable lookup writes in place
  EXPECT_EQ(*std::as_const(map).Find(7), 71u);
  const size_t capacity = map.capacity();
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.capacity(), capacity);
  EXPECT_EQ(map.Find(7), nullptr);
  size_t visited = 0;
  map.ForEach([&](uint64_t, uint64_t) { ++visited; });
  EXPECT_EQ(visited, 0u);
  EXPECT_FALSE(map.Upsert(7, 1, &old, &dropped));  // usable again
  EXPECT_EQ(*map.Find(7), 1u);
}

// The table grows by a quarter at 7/8 load: from 16 slots, 16 -> 20 -> 25 ->
// 31 -> ..., so that it is never less than 7/10 full past its first growths (memory per
// live allocation: docs/BENCHMARKS.md). Every key stays reachable across
// each growth, with capacities that are no power of two.
TEST(AddressMap, GrowsByAQuarterAndStaysMoreThanSevenTenthsFull) {
  AddressMap<uint64_t> map;
  uint64_t old = 0;
  bool dropped = false;
  size_t capacity = 0;
  std::vector<size_t> capacities;
  for (uint64_t k = 1; k <= 100000; ++k) {
    ASSERT_FALSE(map.Upsert(k * 512, k, &old, &dropped));
    ASSERT_FALSE(dropped);
    if (map.capacity() != capacity) {
      capacity = map.capacity();
      capacities.push_back(capacity);
    }
    // Never fuller than 7/8; from 1,000 entries on, never emptier than 7/10.
    ASSERT_LE(map.size() * 8, map.capacity() * 7) << k;
    if (k >= 1000) {
      ASSERT_GE(map.size() * 10, map.capacity() * 7) << k;
    }
  }
  ASSERT_GE(capacities.size(), 4u);
  EXPECT_EQ(capacities[0], 16u);
  EXPECT_EQ(capacities[1], 20u);
  EXPECT_EQ(capacities[2], 25u);
  EXPECT_EQ(capacities[3], 31u);
  for (uint64_t k = 1; k <= 100000; ++k) {
    ASSERT_NE(map.Find(k * 512), nullptr) << k;
    EXPECT_EQ(*map.Find(k * 512), k);
  }
  EXPECT_EQ(map.Find(uint64_t{100001} * 512), nullptr);
}

// Random inserts and erases against std::unordered_map as the reference:
// backward-shift deletion must keep every remaining key reachable.
TEST(AddressMap, MatchesReferenceUnderChurn) {
  AddressMap<uint64_t> map;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t key = ((rng() % 5000) + 1) * 256;  // aligned, like allocations
    if (rng() % 3 == 0) {
      uint64_t out = 0;
      EXPECT_EQ(map.Erase(key, &out), ref.erase(key) == 1);
    } else {
      uint64_t old = 0;
      bool dropped = false;
      const bool existed = map.Upsert(key, i, &old, &dropped);
      EXPECT_EQ(existed, ref.count(key) == 1);
      ref[key] = i;
    }
  }
  ASSERT_EQ(map.size(), ref.size());
  for (const auto& [k, v] : ref) {
    const uint64_t* found = map.Find(k);
    ASSERT_NE(found, nullptr) << k;
    EXPECT_EQ(*found, v);
  }
  size_t visited = 0;
  map.ForEach([&](uint64_t k, uint64_t v) {
    ++visited;
    EXPECT_EQ(ref.at(k), v);
  });
  EXPECT_EQ(visited, ref.size());
}

}  // namespace
}  // namespace gpuwatch
