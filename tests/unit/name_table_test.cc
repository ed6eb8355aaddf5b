// The arena and the name table that the interned tables share
// (libgpuwatch/base/arena.h, name_table.h).
#include "libgpuwatch/base/name_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/base/arena.h"

namespace gpuwatch {
namespace {

TEST(RecordArena, HandsOutIdsInOrderAndShowsARecordOnlyOncePublished) {
  RecordArena arena(10, 1 << 16, 1 << 16, "test records");
  uint32_t a = 0;
  uint32_t b = 0;
  auto* first = static_cast<char*>(arena.Allocate(5, &a));
  auto* second = static_cast<char*>(arena.Allocate(16, &b));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % 8, 0u) << "records stay 8-byte aligned";
  EXPECT_EQ(second - first, 8) << "5 bytes take 8";
  EXPECT_EQ(arena.Get(a), nullptr) << "not published yet";
  arena.Publish(a, first);
  EXPECT_EQ(arena.Get(a), first);
  EXPECT_EQ(arena.Get(0), nullptr);
  EXPECT_EQ(arena.Get(11), nullptr);
  EXPECT_EQ(arena.size(), 2u);
  EXPECT_EQ(arena.bytes_used(), 24u);
}

TEST(RecordArena, StopsAtItsCapsAndRefusesARecordLargerThanAChunk) {
  RecordArena few(2, 1 << 16, 1 << 16, "test records");
  uint32_t id = 0;
  EXPECT_NE(few.Allocate(8, &id), nullptr);
  EXPECT_NE(few.Allocate(8, &id), nullptr);
  EXPECT_EQ(few.Allocate(8, &id), nullptr);
  EXPECT_TRUE(few.full());

  RecordArena small(100, 8192, 4096, "test records");  // two chunks of a page
  EXPECT_EQ(small.Allocate(5000, &id), nullptr) << "larger than a chunk";
  EXPECT_FALSE(small.full()) << "a record too large is refused alone";
  EXPECT_NE(small.Allocate(4096, &id), nullptr);
  EXPECT_NE(small.Allocate(4096, &id), nullptr);
  EXPECT_EQ(small.Allocate(8, &id), nullptr) << "both chunks used";
  EXPECT_TRUE(small.full());
}

TEST(RecordArena, GrowsItsChunksFrom64KiBAndHoldsAsMuchAsWholeChunksDid) {
  constexpr size_t kMiB = size_t{1} << 20;
  RecordArena arena(100000, 4 * kMiB, kMiB, "test records");
  uint32_t id = 0;
  ASSERT_NE(arena.Allocate(8, &id), nullptr);
  EXPECT_EQ(arena.bytes_mapped(), RecordArena::kFirstChunkBytes) << "a short process maps 64 KiB";
  // Pages: every chunk is a whole number of them, so none is wasted at a tail.
  size_t records = 1;
  while (arena.Allocate(4096, &id) != nullptr) ++records;
  EXPECT_TRUE(arena.full());
  EXPECT_EQ(arena.bytes_mapped(), 4 * kMiB) << "64 KiB, 128, 256, 512, 1 MiB x 3, then 64 KiB";
  // The first chunk's 8 bytes leave a page short of its 16 pages.
  EXPECT_EQ(records, 1 + 4 * kMiB / 4096 - 1);
}

TEST(RecordArena, PrepareMapsTheNextChunkAheadOnceTheLastIsHalfUsed) {
  constexpr size_t kFirst = RecordArena::kFirstChunkBytes;
  RecordArena arena(100000, size_t{4} << 20, size_t{1} << 20, "test records");
  arena.Prepare();
  EXPECT_EQ(arena.bytes_mapped(), kFirst) << "the first chunk, before any record";
  uint32_t id = 0;
  for (size_t i = 0; i < kFirst / 2 / 4096 - 1; ++i) ASSERT_NE(arena.Allocate(4096, &id), nullptr);
  arena.Prepare();
  EXPECT_EQ(arena.bytes_mapped(), kFirst) << "less than half used: nothing mapped ahead";
  ASSERT_NE(arena.Allocate(4096, &id), nullptr);
  arena.Prepare();
  arena.Prepare();
  EXPECT_EQ(arena.bytes_mapped(), 3 * kFirst) << "half used: the next chunk (twice as large), once";
  for (size_t i = 0; i < kFirst / 2 / 4096; ++i) ASSERT_NE(arena.Allocate(4096, &id), nullptr);
  EXPECT_EQ(arena.bytes_used(), kFirst) << "the first chunk is full";
  char* next = static_cast<char*>(arena.Allocate(4096, &id));
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(arena.bytes_mapped(), 3 * kFirst) << "the allocation took the chunk mapped ahead";
  arena.Publish(id, next);
  EXPECT_EQ(arena.Get(id), next);
}

TEST(NameTable, InternsByPointerAndKeepsACopyOfTheText) {
  NameTable names(16);
  char a[] = "kernel_a";
  char same_text[] = "kernel_a";
  const uint32_t id = names.Intern(a);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(names.Intern(a), id);
  EXPECT_NE(names.Intern(same_text), id) << "keyed by pointer; merged by text at report time";
  std::strcpy(a, "changed!");  // the driver's storage may go with its module
  EXPECT_STREQ(names.Name(id), "kernel_a");
  EXPECT_EQ(names.Intern(nullptr), 0u);
  EXPECT_EQ(names.Name(0), nullptr);
}

TEST(NameTable, AFullTableInternsNothingMoreAndAVeryLongNameIsTruncated) {
  NameTable names(2);
  static const char kA[] = "a";
  static const char kB[] = "b";
  static const char kC[] = "c";
  EXPECT_NE(names.Intern(kA), 0u);
  EXPECT_NE(names.Intern(kB), 0u);
  EXPECT_EQ(names.Intern(kC), 0u);
  EXPECT_NE(names.Intern(kA), 0u) << "names stored before are still found";

  NameTable roomy(4);
  const std::string huge(NameTable::kMaxNameBytes + 100, 'x');
  const uint32_t id = roomy.Intern(huge.c_str());
  ASSERT_NE(id, 0u);
  EXPECT_EQ(std::strlen(roomy.Name(id)), NameTable::kMaxNameBytes);
}

TEST(NameTable, ThreadsInterningTheSameNamesGetOneIdEach) {
  NameTable names(1000);
  std::vector<std::string> texts;
  texts.reserve(200);
  for (int i = 0; i < 200; ++i) texts.push_back("kernel_" + std::to_string(i));
  std::vector<std::vector<uint32_t>> seen(4, std::vector<uint32_t>(texts.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < texts.size(); ++i) seen[t][i] = names.Intern(texts[i].c_str());
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<uint32_t> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t][i], seen[0][i]);
    ASSERT_NE(seen[0][i], 0u);
    EXPECT_STREQ(names.Name(seen[0][i]), texts[i].c_str());
    ids.insert(seen[0][i]);
  }
  EXPECT_EQ(ids.size(), texts.size());
  EXPECT_EQ(names.size(), texts.size());
}

}  // namespace
}  // namespace gpuwatch
