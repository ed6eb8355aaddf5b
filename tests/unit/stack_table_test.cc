#include "libgpuwatch/stacks/stack_table.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/malloc_counter.h"

namespace gpuwatch {
namespace {

using Stack = std::vector<uintptr_t>;

// Realistic-looking stacks: return addresses sharing their high bits.
Stack MakeStack(uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  Stack s(static_cast<size_t>(depth));
  for (auto& pc : s) pc = 0x7f0000000000ULL + (rng() & 0xFFFFFFF);
  return s;
}

uint32_t Intern(StackTable& table, const Stack& s) {
  return table.Intern(s.data(), static_cast<int>(s.size()));
}

Stack AsVector(std::span<const uintptr_t> span) { return Stack(span.begin(), span.end()); }

TEST(StackTableTest, InternsAndGets) {
  StackTable table(1000, 1 << 20);
  const Stack a = MakeStack(1, 32);
  const Stack b = MakeStack(2, 32);
  const uint32_t ida = Intern(table, a);
  const uint32_t idb = Intern(table, b);
  EXPECT_NE(ida, 0u);
  EXPECT_NE(idb, 0u);
  EXPECT_NE(ida, idb);
  EXPECT_EQ(Intern(table, a), ida);
  EXPECT_EQ(Intern(table, b), idb);
  EXPECT_EQ(AsVector(table.Get(ida)), a);
  EXPECT_EQ(AsVector(table.Get(idb)), b);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.bytes_used(), 2 * (8 + 32 * sizeof(uintptr_t)));
  EXPECT_EQ(table.dropped(), 0u);
}

// A thread's cache of the stacks it interned last gives an id only for a
// stack equal in every pc, interned in the same table (not one destroyed at
// the same address).
TEST(StackTableTest, AThreadsRecentStacksAreFoundOnlyWhenEqualAndInTheSameTable) {
  StackTable table(1000, 1 << 20);
  std::vector<Stack> stacks;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 8; ++i) {
    stacks.push_back(MakeStack(100 + static_cast<uint64_t>(i), 32));
    ids.push_back(Intern(table, stacks.back()));
  }
  const uint64_t hits = StackTable::RecentHitsOnThisThread();
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(Intern(table, stacks[static_cast<size_t>(i)]), ids[static_cast<size_t>(i)]) << i;
  EXPECT_GT(StackTable::RecentHitsOnThisThread(), hits);
  // One pc differs, none of those that pick the set (0, 8, 16, 24, 31): the
  // same set, not the same stack.
  Stack near = stacks[0];
  near[5] += 1;
  const uint32_t near_id = Intern(table, near);
  EXPECT_NE(near_id, 0u);
  EXPECT_NE(near_id, ids[0]);
  EXPECT_EQ(AsVector(table.Get(near_id)), near);
  EXPECT_EQ(Intern(table, stacks[0]), ids[0]);
  EXPECT_EQ(Intern(table, near), near_id);
  // Another table names the same stack by its own id.
  StackTable other(1000, 1 << 20);
  EXPECT_EQ(Intern(other, stacks[1]), 1u);
  EXPECT_EQ(Intern(table, stacks[1]), ids[1]);
  EXPECT_EQ(Intern(other, stacks[1]), 1u);
  EXPECT_EQ(Intern(other, stacks[2]), 2u);
  // A table made where a destroyed one was starts from nothing: the stack
  // it interns first is its 1 (a stale entry would say 2 in round 1).
  for (int round = 0; round < 3; ++round) {
    const Stack& first = round % 2 == 0 ? stacks[3] : stacks[7];
    const Stack& second = round % 2 == 0 ? stacks[7] : stacks[3];
    auto* fresh = new StackTable(1000, 1 << 20);
    EXPECT_EQ(Intern(*fresh, first), 1u) << round;
    EXPECT_EQ(Intern(*fresh, second), 2u) << round;
    EXPECT_EQ(Intern(*fresh, first), 1u) << round;
    EXPECT_EQ(fresh->size(), 2u);
    delete fresh;
  }
  EXPECT_EQ(table.size(), 9u);
  EXPECT_EQ(Intern(table, stacks[7]), ids[7]);
}

TEST(StackTableTest, EmptyAndUnknownIds) {
  StackTable table(10, 1 << 16);
  uintptr_t pc = 1;
  EXPECT_EQ(table.Intern(&pc, 0), 0u);
  EXPECT_EQ(table.Intern(nullptr, 3), 0u);
  EXPECT_TRUE(table.Get(0).empty());
  EXPECT_TRUE(table.Get(1).empty());
  EXPECT_TRUE(table.Get(11).empty());
  EXPECT_TRUE(table.Get(UINT32_MAX).empty());
  EXPECT_EQ(table.dropped(), 0u);
}

TEST(StackTableTest, PrefixesAndNearMissesAreDistinct) {
  StackTable table(100, 1 << 16);
  const Stack full = MakeStack(7, 16);
  Stack prefix(full.begin(), full.begin() + 15);
  Stack changed = full;
  changed[15] ^= 1;
  Stack swapped = full;
  std::swap(swapped[0], swapped[1]);
  const std::set<uint32_t> ids = {Intern(table, full), Intern(table, prefix),
                                  Intern(table, changed), Intern(table, swapped)};
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(StackTableTest, LongStacksAreTruncated) {
  StackTable table(10, 1 << 16);
  const Stack s = MakeStack(3, StackTable::kMaxFrames + 10);
  const uint32_t id = Intern(table, s);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(table.Get(id).size(), static_cast<size_t>(StackTable::kMaxFrames));
}

TEST(StackTableTest, StackCapDropsNewStacksButFindsOldOnes) {
  StackTable table(10, 1 << 20);
  std::vector<uint32_t> ids;
  ids.reserve(15);
  for (int i = 0; i < 15; ++i) ids.push_back(Intern(table, MakeStack(i, 8)));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(ids[i], static_cast<uint32_t>(i + 1));
  for (int i = 10; i < 15; ++i) EXPECT_EQ(ids[i], 0u);
  EXPECT_EQ(table.size(), 10u);
  EXPECT_EQ(table.dropped(), 5u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Intern(table, MakeStack(i, 8)), ids[i]);
  EXPECT_EQ(table.dropped(), 5u);
}

TEST(StackTableTest, ByteCapDropsNewStacks) {
  // One 4 KiB chunk holds 15 records of 8 + 32 * 8 = 264 bytes.
  StackTable table(1000, 4096);
  int stored = 0;
  for (int i = 0; i < 100; ++i) stored += Intern(table, MakeStack(i, 32)) != 0;
  EXPECT_EQ(stored, 15);
  EXPECT_EQ(table.size(), 15u);
  EXPECT_EQ(table.dropped(), 85u);
  EXPECT_LE(table.bytes_used(), table.max_bytes());
}

TEST(StackTableTest, ZeroCapsStoreNothing) {
  StackTable table(0, 0);
  EXPECT_EQ(Intern(table, MakeStack(1, 4)), 0u);
  EXPECT_EQ(table.dropped(), 1u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(StackTableTest, SpansStayValidAcrossChunks) {
  // Enough stacks to need several 1 MiB chunks.
  StackTable table(20000, 16 << 20);
  const uint32_t first = Intern(table, MakeStack(0, 32));
  const std::span<const uintptr_t> span = table.Get(first);
  const Stack copy = AsVector(span);
  for (int i = 1; i < 10000; ++i) ASSERT_NE(Intern(table, MakeStack(i, 32)), 0u);
  EXPECT_GT(table.bytes_used(), 2u * StackTable::kChunkBytes);
  EXPECT_EQ(span.data(), table.Get(first).data());
  EXPECT_EQ(AsVector(span), copy);
}

// The hash index starts at 4,096 slots (32 KiB) whatever the cap, and
// doubles as the stacks pass half of it: 10,000 stacks under a cap of a
// million take 32,768 slots (256 KiB), not the 2 Mi slots (16 MiB) the cap
// would. Every stack keeps its id across the doublings.
TEST(StackTableTest, IndexGrowsWithTheStacks) {
  StackTable table(1u << 20, 64 << 20);
  EXPECT_EQ(table.index_bytes(), 4096u * 8);
  std::vector<uint32_t> ids;
  ids.reserve(10000);
  for (int i = 0; i < 2048; ++i) ids.push_back(Intern(table, MakeStack(i, 8 + i % 24)));
  EXPECT_EQ(table.index_bytes(), 4096u * 8);  // 2,048 stacks: half of 4,096, not past it
  ids.push_back(Intern(table, MakeStack(2048, 8 + 2048 % 24)));
  EXPECT_EQ(table.index_bytes(), 8192u * 8);
  for (int i = 2049; i < 10000; ++i) ids.push_back(Intern(table, MakeStack(i, 8 + i % 24)));
  EXPECT_EQ(table.index_bytes(), 32768u * 8);
  EXPECT_EQ(table.size(), 10000u);
  // Found again, in another thread (so not from this thread's recent stacks).
  std::thread([&] {
    for (int i = 0; i < 10000; ++i) {
      ASSERT_EQ(Intern(table, MakeStack(i, 8 + i % 24)), ids[static_cast<size_t>(i)]) << i;
    }
  }).join();
  EXPECT_EQ(table.size(), 10000u);
  EXPECT_EQ(table.dropped(), 0u);
}

// The index stops at the cap's size (load 1/2 with every id handed out).
TEST(StackTableTest, IndexStopsAtTheCapsSize) {
  StackTable table(3000, 16 << 20);  // 6,000 slots at load 1/2: 8,192
  for (int i = 0; i < 3000; ++i) ASSERT_NE(Intern(table, MakeStack(i, 4)), 0u);
  EXPECT_EQ(table.index_bytes(), 8192u * 8);
  EXPECT_EQ(Intern(table, MakeStack(3000, 4)), 0u);  // the id cap
  EXPECT_EQ(table.dropped(), 1u);
  EXPECT_EQ(table.index_bytes(), 8192u * 8);
  EXPECT_NE(Intern(table, MakeStack(2999, 4)), 0u);
}

// Lookups of stored stacks from several threads while another thread's new
// stacks double the index again and again: a lookup that reads an index
// being replaced (its pages given back: empty slots) must still find its
// stack's id, never store it a second time.
TEST(StackTableTest, LookupsDuringIndexDoublingsFindTheirIds) {
  constexpr int kOld = 1500;
  constexpr int kNew = 60000;
  StackTable table(1u << 20, 64 << 20);
  std::vector<uint32_t> ids;
  ids.reserve(kOld);
  for (int i = 0; i < kOld; ++i) ids.push_back(Intern(table, MakeStack(i, 6 + i % 20)));
  std::atomic<bool> done{false};
  std::atomic<long> lookups{0};
  std::vector<std::thread> readers;
  readers.reserve(3);
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      // More stacks in turn than a thread's recent stacks hold: shared lookups.
      for (int round = 0; !done.load(); ++round) {
        for (int i = t; i < kOld; i += 3) {
          const uint32_t id = Intern(table, MakeStack(i, 6 + i % 20));
          if (id != ids[static_cast<size_t>(i)]) {
            ADD_FAILURE() << "stack " << i << ": id " << id << ", not " << ids[i];
            return;
          }
          lookups.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (int i = 0; i < kNew; ++i) ASSERT_NE(Intern(table, MakeStack(100000 + i, 5)), 0u);
  done.store(true);
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(table.size(), static_cast<uint32_t>(kOld + kNew));
  EXPECT_EQ(table.index_bytes(), 131072u * 8);  // 61,500 stacks: past 65,536 slots' half
  EXPECT_EQ(table.dropped(), 0u);
  EXPECT_GT(lookups.load(), 0);
}

#ifdef GPUWATCH_COUNT_MALLOC
TEST(StackTableTest, InternDoesNotMalloc) {
  std::vector<Stack> stacks;
  stacks.reserve(5000);
  for (int i = 0; i < 5000; ++i) stacks.push_back(MakeStack(i, 32));
  StackTable table(10000, 16 << 20);
  g_mallocs = 0;
  g_count_mallocs = true;
  for (const Stack& s : stacks) Intern(table, s);  // new stacks: mmap'ed chunks only
  const long new_mallocs = g_mallocs;
  for (int round = 0; round < 3; ++round) {
    for (const Stack& s : stacks) Intern(table, s);
  }
  g_count_mallocs = false;
  EXPECT_EQ(new_mallocs, 0);
  EXPECT_EQ(g_mallocs, 0);
  EXPECT_EQ(table.size(), 5000u);
}
#endif

TEST(StackTableTest, ForEachVisitsEveryStackOnce) {
  StackTable table(100, 1 << 16);
  std::map<uint32_t, Stack> expected;
  for (int i = 0; i < 50; ++i) {
    const Stack s = MakeStack(i, 1 + i % 20);
    expected[Intern(table, s)] = s;
  }
  std::map<uint32_t, Stack> seen;
  table.ForEach([&seen](uint32_t id, std::span<const uintptr_t> pcs) {
    EXPECT_TRUE(seen.emplace(id, AsVector(pcs)).second);
  });
  EXPECT_EQ(seen, expected);
}

// A child forked while another thread inserts can still insert.
TEST(StackTableTest, ForkHooksLeaveUsableLocks) {
  StackTable table(100000, 64 << 20);
  std::atomic<bool> stop{false};
  std::thread inserter([&] {
    for (int i = 0; !stop.load(); ++i) Intern(table, MakeStack(i, 16));
  });
  for (int round = 0; round < 10; ++round) {
    table.LockForFork();
    const pid_t pid = fork();
    table.UnlockAfterFork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: only this thread exists. Every stripe must be free.
      bool ok = true;
      for (int i = 0; i < 1000; ++i) ok = ok && Intern(table, MakeStack(1000000 + i, 8)) != 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  stop.store(true);
  inserter.join();
}

// 8 threads intern overlapping sets of stacks in different orders, while a
// reader walks the table. Every thread must get the same id for the same
// stack, and each distinct stack must be stored exactly once.
TEST(StackTableTest, ConcurrentInternIsConsistent) {
  constexpr int kThreads = 8;
  constexpr int kDistinct = 4000;
  constexpr int kPerThread = 2000;  // overlapping windows of the distinct set
  std::vector<Stack> stacks;
  stacks.reserve(kDistinct);
  for (int i = 0; i < kDistinct; ++i) stacks.push_back(MakeStack(1000 + i, 4 + i % 29));

  StackTable table(100000, 64 << 20);
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kDistinct, 0));
  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order;
      order.reserve(kPerThread);
      for (int k = 0; k < kPerThread; ++k) order.push_back((t * kDistinct / 16 + k) % kDistinct);
      std::shuffle(order.begin(), order.end(), std::mt19937(t));
      while (!go.load()) {
      }
      for (int round = 0; round < 3; ++round) {
        for (const int i : order) {
          const uint32_t id = Intern(table, stacks[i]);
          if (ids[t][i] != 0 && ids[t][i] != id) ADD_FAILURE() << "id changed for stack " << i;
          ids[t][i] = id;
        }
      }
    });
  }
  std::thread reader([&] {
    while (!done.load()) {
      table.ForEach([&](uint32_t id, std::span<const uintptr_t> pcs) {
        if (pcs.empty() || pcs.size() > 32) ADD_FAILURE() << "bad span for id " << id;
      });
    }
  });
  go.store(true);
  for (auto& thread : threads) thread.join();
  done.store(true);
  reader.join();

  std::set<int> touched;
  std::map<uint32_t, int> stack_of_id;
  for (int i = 0; i < kDistinct; ++i) {
    uint32_t id = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (ids[t][i] == 0) continue;
      if (id == 0) id = ids[t][i];
      EXPECT_EQ(ids[t][i], id) << "stack " << i << " thread " << t;
    }
    if (id == 0) continue;
    touched.insert(i);
    EXPECT_TRUE(stack_of_id.emplace(id, i).second) << "id " << id << " given to two stacks";
    EXPECT_EQ(AsVector(table.Get(id)), stacks[i]);
  }
  EXPECT_EQ(table.size(), touched.size());
  EXPECT_EQ(table.dropped(), 0u);
  size_t bytes = 0;
  for (const int i : touched) bytes += 8 + stacks[i].size() * sizeof(uintptr_t);
  EXPECT_EQ(table.bytes_used(), bytes);
}

TEST(StackTable, OwnsAPythonFrameTableOnceEnabledAndLocksItAroundFork) {
  StackTable table(16, StackTable::kChunkBytes);
  EXPECT_EQ(table.python_frames(), nullptr) << "no CPython: no frame table";
  table.EnablePythonFrames();
  PyFrameTable* frames = table.python_frames();
  ASSERT_NE(frames, nullptr);
  table.EnablePythonFrames();
  EXPECT_EQ(table.python_frames(), frames) << "made once";
  const uint32_t id = frames->Insert(PyFrameKey{0x1000, 4, 7}, "train.py", "step", 12);
  ASSERT_NE(id, 0u);
  // The fork protocol takes the frame table's locks with the stack table's;
  // an insert from another thread completes once they are released.
  table.LockForFork();
  std::atomic<uint32_t> inserted{0};
  std::thread other([&] {
    inserted.store(frames->Insert(PyFrameKey{0x2000, 8, 9}, "model.py", "forward", 40));
  });
  table.UnlockAfterFork();
  other.join();
  EXPECT_NE(inserted.load(), 0u);
  PyFrameInfo info;
  ASSERT_TRUE(frames->Get(id, &info));
  EXPECT_EQ(info.file, "train.py");
  EXPECT_EQ(info.line, 12);
}

}  // namespace
}  // namespace gpuwatch
