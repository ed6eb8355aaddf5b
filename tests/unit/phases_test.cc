#include "libgpuwatch/record/phases.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {
namespace {

class PhasesTest : public ::testing::Test {
 protected:
  PhasesTest() : stats_(&table_, &tracker_) {
    table_.SetStats(&stats_);
    tracker_.SetPhases(&stats_);
  }
  ~PhasesTest() override { table_.SetStats(nullptr); }

  void Push(PhaseStack* s, const std::string& name, uint32_t domain = 0) {
    table_.Push(s, table_.InternName(name), domain);
  }
  void Alloc(uint64_t address, uint64_t size, uint32_t phase, uint32_t stack_id = 1) {
    tracker_.OnAlloc({.address = address, .size = size, .stack_id = stack_id, .phase = phase});
  }
  // A copy: the next call takes a new snapshot.
  std::optional<PhaseStats::Row> RowOf(const std::string& path) {
    snapshot_ = SnapshotPhases(table_, stats_);
    for (size_t i = 0; i < snapshot_.rows.size(); ++i) {
      if (snapshot_.paths[i] == path) return snapshot_.rows[i];
    }
    return std::nullopt;
  }

  PhaseTable table_;
  Tracker tracker_;
  PhaseStats stats_;
  PhasesSnapshot snapshot_;
};

TEST_F(PhasesTest, NamesAreInternedByText) {
  const std::string a = "forward";
  const std::string b = "forward";  // another pointer, the same text
  EXPECT_EQ(table_.InternName(a), table_.InternName(b));
  EXPECT_NE(table_.InternName("forward"), table_.InternName("backward"));
  // Cut to kMaxPhaseNameBytes: two names that differ only past it are one.
  const std::string long_a = std::string(kMaxPhaseNameBytes, 'x') + "a";
  const std::string long_b = std::string(kMaxPhaseNameBytes, 'x') + "b";
  EXPECT_EQ(table_.InternName(long_a), table_.InternName(long_b));
}

TEST_F(PhasesTest, NestedPathsAndTheirText) {
  PhaseStack s;
  Push(&s, "step");
  Push(&s, "forward");
  EXPECT_EQ(table_.PathText(s.current()), "step/forward");
  EXPECT_EQ(table_.LeafName(s.current()), "forward");
  const uint32_t forward = s.current();
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(table_.PathText(s.current()), "step");
  Push(&s, "forward");
  EXPECT_EQ(s.current(), forward);  // the same path: interned once
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(s.current(), 0u);
  EXPECT_EQ(table_.PathText(0), "");
}

TEST_F(PhasesTest, UnbalancedPopsAreCountedAndChangeNothing) {
  PhaseStack s;
  EXPECT_FALSE(table_.Pop(&s, 0));
  Push(&s, "a");
  EXPECT_FALSE(table_.Pop(&s, 7));  // no range of domain 7 is open
  EXPECT_EQ(table_.PathText(s.current()), "a");
  EXPECT_EQ(table_.counters().unbalanced_pops, 2u);
}

TEST_F(PhasesTest, ADomainsPopClosesItsOwnRangeBelowOthers) {
  PhaseStack s;
  Push(&s, "outer", 0);
  Push(&s, "dom:inner", 3);
  Push(&s, "leaf", 0);
  EXPECT_EQ(table_.PathText(s.current()), "outer/dom:inner/leaf");
  // Domain 3's pop closes "dom:inner": "leaf" stays open, now under "outer".
  EXPECT_TRUE(table_.Pop(&s, 3));
  EXPECT_EQ(table_.PathText(s.current()), "outer/leaf");
  // The default domain's pop closes "leaf", the innermost of its ranges.
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(table_.PathText(s.current()), "outer");
}

TEST_F(PhasesTest, TooDeepRangesKeepThePathAndPopInOrder) {
  PhaseStack s;
  for (int i = 0; i < kMaxPhaseDepth; ++i) Push(&s, "d" + std::to_string(i));
  const uint32_t deepest = s.current();
  Push(&s, "too deep");
  Push(&s, "deeper still");
  EXPECT_EQ(s.current(), deepest);
  EXPECT_EQ(table_.counters().too_deep, 2u);
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(s.current(), deepest);
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(s.depth, kMaxPhaseDepth - 1);
}

TEST_F(PhasesTest, ManyNamesEndInOtherWithACount) {
  PhaseStack s;
  // One name is "(other)" itself: kMaxPhaseNames - 1 more fit.
  for (uint32_t i = 0; i < kMaxPhaseNames + 10; ++i) {
    table_.InternName("n" + std::to_string(i));
  }
  EXPECT_EQ(table_.counters().names_dropped, 11u);
  EXPECT_EQ(table_.InternName("one more"), table_.InternName(kOtherPhase));
  // A name seen before the limit still has its own id.
  Push(&s, "n5");
  EXPECT_EQ(table_.PathText(s.current()), "n5");
}

TEST_F(PhasesTest, ManyPathsEndInOtherWithACount) {
  PhaseStack s;
  // 70 parents of 60 children each: 4,270 paths, of which 4,094 fit (the
  // last id is "(other)"'s). Parent 67 gets 6 children; the 54 others, and
  // parents 68 and 69 with their 120, are pushes of "(other)".
  for (int p = 0; p < 70; ++p) {
    Push(&s, "p" + std::to_string(p));
    for (int c = 0; c < 60; ++c) {
      Push(&s, "c" + std::to_string(c));
      ASSERT_TRUE(table_.Pop(&s, 0));
    }
    ASSERT_TRUE(table_.Pop(&s, 0));
  }
  EXPECT_EQ(table_.counters().paths_dropped, 176u);
  Push(&s, "yet another");
  EXPECT_EQ(table_.PathText(s.current()), kOtherPhase);
  EXPECT_EQ(s.current(), kMaxPhasePaths);
  // Rows read the paths handed out, "(other)"'s last id among them.
  EXPECT_EQ(table_.MaxPathId(), kMaxPhasePaths);
  tracker_.OnLaunch(s.current());
  const std::optional<PhaseStats::Row> other = RowOf(kOtherPhase);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->launches, 1u);
  ASSERT_TRUE(table_.Pop(&s, 0));
  // Paths seen before the limit are still themselves.
  Push(&s, "p67");
  Push(&s, "c5");
  EXPECT_EQ(table_.PathText(s.current()), "p67/c5");
}

// A report of a process with few ranges reads their counters alone, not the
// 4,095 paths' (whose untouched pages a read would fault in).
TEST_F(PhasesTest, RowsReadOnlyThePathsHandedOut) {
  EXPECT_EQ(table_.MaxPathId(), 0u);
  EXPECT_TRUE(stats_.Rows().empty());
  PhaseStack s;
  Push(&s, "a");
  Push(&s, "b");
  EXPECT_EQ(table_.MaxPathId(), 2u);
  const std::vector<PhaseStats::Row> rows = stats_.Rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].path, 2u);
  EXPECT_EQ(rows[1].opens, 1u);
}

TEST_F(PhasesTest, AllocationsPeaksAndCopiesPerPath) {
  PhaseStack s;
  Alloc(0x1000, 100, 0);  // before any range: counted nowhere
  Push(&s, "step");
  const uint32_t step = s.current();
  Push(&s, "forward");
  const uint32_t forward = s.current();
  Alloc(0x2000, 400, forward, 7);
  tracker_.OnFree(0x2000);
  EXPECT_TRUE(table_.Pop(&s, 0));
  Push(&s, "backward");
  Alloc(0x3000, 200, s.current(), 9);
  tracker_.OnCopy(CopyEvent{64, CopyKind::kDeviceToHost, false, s.current()});
  tracker_.OnLaunch(s.current());
  EXPECT_TRUE(table_.Pop(&s, 0));
  EXPECT_EQ(s.current(), step);

  const std::optional<PhaseStats::Row> f = RowOf("step/forward");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->allocs, 1u);
  EXPECT_EQ(f->alloc_bytes, 400u);
  EXPECT_EQ(f->peak_bytes, 500u);  // with the 100 bytes allocated before
  EXPECT_EQ(f->peak_site, 7u);
  EXPECT_EQ(f->opens, 1u);
  const std::optional<PhaseStats::Row> b = RowOf("step/backward");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->peak_bytes, 300u);
  EXPECT_EQ(b->peak_site, 9u);
  EXPECT_EQ(b->copy_count[static_cast<int>(CopyKind::kDeviceToHost)], 1u);
  EXPECT_EQ(b->copy_bytes[static_cast<int>(CopyKind::kDeviceToHost)], 64u);
  EXPECT_EQ(b->launches, 1u);
  // The enclosing path's peak covers its children's; its own counts do not.
  const std::optional<PhaseStats::Row> st = RowOf("step");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->peak_bytes, 500u);
  EXPECT_EQ(st->peak_site, 7u);
  EXPECT_EQ(st->allocs, 0u);

  // The live table keeps each allocation's phase.
  const TrackerSnapshot snap = tracker_.Snapshot();
  std::vector<std::pair<uint64_t, uint16_t>> live;
  live.reserve(snap.live.size());
  for (const LiveAlloc& a : snap.live) live.emplace_back(a.address, a.phase);
  std::sort(live.begin(), live.end());
  EXPECT_EQ(live, (std::vector<std::pair<uint64_t, uint16_t>>{{0x1000, 0}, {0x3000, b->path}}));
}

// The site that held the most at a path's peak, of what was allocated in it
// or nested in it, is not always the one whose allocation reached the peak;
// what was freed before the peak does not count.
TEST_F(PhasesTest, TheSiteThatHeldTheMostAtThePeak) {
  PhaseStack s;
  Alloc(0x1000, 5000, 0, 1);  // before the step: not the step's
  Push(&s, "step");
  Push(&s, "forward");
  Alloc(0x2000, 3000, s.current(), 7);
  Alloc(0x3000, 500, s.current(), 8);
  tracker_.OnFree(0x3000);  // site 8 holds nothing at the step's peak
  EXPECT_TRUE(table_.Pop(&s, 0));
  Push(&s, "backward");
  Alloc(0x4000, 1000, s.current(), 9);
  Alloc(0x5000, 1000, s.current(), 9);  // the peak: 5000 + 3000 + 2000
  EXPECT_TRUE(table_.Pop(&s, 0));

  const std::optional<PhaseStats::Row> st = RowOf("step");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->peak_bytes, 10000u);
  EXPECT_EQ(st->peak_site, 9u);  // reached it
  EXPECT_EQ(st->top_site, 7u);   // held the most of the step's own
  EXPECT_EQ(st->top_bytes, 3000u);
  const std::optional<PhaseStats::Row> b = RowOf("step/backward");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->top_site, 9u);  // 2000 bytes after its second allocation
  EXPECT_EQ(b->top_bytes, 2000u);
  const std::optional<PhaseStats::Row> f = RowOf("step/forward");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->peak_bytes, 8500u);  // 5000 + 3000 + 500, before the free
  EXPECT_EQ(f->top_site, 7u);
  EXPECT_EQ(f->top_bytes, 3000u);
  EXPECT_EQ(snapshot_.cells_dropped, 0u);
}

// Past PhaseStats::kCells (path, site) pairs, the rest are counted, not followed.
TEST_F(PhasesTest, SitesPastTheCellTableAreCounted) {
  PhaseStack s;
  Push(&s, "many");
  for (uint32_t i = 0; i < PhaseStats::kCells + 5; ++i) {
    Alloc(0x100000 + uint64_t{i} * 16, 1, s.current(), i + 1);
  }
  ASSERT_TRUE(RowOf("many").has_value());
  EXPECT_EQ(snapshot_.cells_dropped, 5u);
}

TEST_F(PhasesTest, StartEndRangesSeeEveryThreadsAllocations) {
  const uint64_t epoch = table_.Start(table_.InternName("epoch"));
  ASSERT_NE(epoch, 0u);
  Alloc(0x1000, 100, 0, 3);  // outside every push range, on this thread
  std::thread other([this] { Alloc(0x2000, 50, 0, 4); });
  other.join();
  std::thread ender([this, epoch] { EXPECT_TRUE(table_.End(epoch)); });
  ender.join();
  Alloc(0x3000, 1000, 0, 5);  // after the end: not in it
  EXPECT_FALSE(table_.End(epoch));
  const std::optional<PhaseStats::Row> row = RowOf("epoch");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->opens, 1u);
  EXPECT_EQ(row->peak_bytes, 150u);
  EXPECT_EQ(row->peak_site, 4u);
  EXPECT_EQ(row->allocs, 0u);
  EXPECT_EQ(table_.counters().unmatched_ends, 1u);
  // At most kMaxOpenRanges at once; the rest are counted, and end quietly.
  std::vector<uint64_t> ids;
  ids.reserve(kMaxOpenRanges + 2);
  for (int i = 0; i < kMaxOpenRanges + 2; ++i) ids.push_back(table_.Start(table_.InternName("r")));
  EXPECT_EQ(ids[kMaxOpenRanges], 0u);
  EXPECT_EQ(table_.counters().ranges_not_tracked, 2u);
  for (const uint64_t id : ids) table_.End(id);
  EXPECT_EQ(table_.counters().unmatched_ends, 1u);
}

TEST_F(PhasesTest, PhaseIdsSurviveTheLiveRecordsPacking) {
  // Path ids use 12 bits split across two fields of the live record; the
  // largest id and one with every bit set come back as they went in.
  for (const uint32_t phase : {1u, 0x1ffu, 0x200u, 0xe00u, kMaxPhasePaths}) {
    Alloc(0x10000 + phase, 1 + phase, phase, 0x1fffff);
  }
  const TrackerSnapshot snap = tracker_.Snapshot();
  ASSERT_EQ(snap.live.size(), 5u);
  for (const LiveAlloc& a : snap.live) {
    EXPECT_EQ(a.phase, a.address - 0x10000);
    EXPECT_EQ(a.size, 1 + a.phase);
    EXPECT_EQ(a.stack_id, 0x1fffffu);
  }
}

TEST_F(PhasesTest, ThreadsPushConcurrently) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      PhaseStack s;
      for (int i = 0; i < kRounds; ++i) {
        Push(&s, "loop");
        Push(&s, "t" + std::to_string(t) + "." + std::to_string(i % 50));
        EXPECT_TRUE(table_.Pop(&s, 0));
        EXPECT_TRUE(table_.Pop(&s, 0));
      }
      Push(&s, "left open");
      table_.ThreadExit(s);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::optional<PhaseStats::Row> loop = RowOf("loop");
  ASSERT_TRUE(loop.has_value());
  EXPECT_EQ(loop->opens, uint64_t{kThreads} * kRounds);
  // 1 + 4 x 50 nested + "left open": every path once.
  EXPECT_EQ(snapshot_.rows.size(), 1u + kThreads * 50 + 1);
  EXPECT_EQ(table_.counters().open_at_thread_exit, uint64_t{kThreads});
}

// VmSize in KiB, read without allocating (the address space is what the
// test measures).
long VmSizeKib() {
  char buf[8192];
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "VmSize:");
  return at == nullptr ? -1 : std::strtol(at + 7, nullptr, 10);
}

// A table built where memory runs out part way (the second of its 128 KiB
// index mappings) throws bad_alloc, as `new` does, and gives back the
// mapping it had taken: a caller that catches it and tries again (the
// process's table is a function-local static, whose initialisation runs
// again on the next call after a throw) loses no address space each time.
TEST(PhaseTableMemory, AConstructorThatRunsOutGivesBackWhatItTook) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer reserves the address space that RLIMIT_AS would limit";
#else
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The exception's own allocation made once, so that only the table's
    // mappings move the address space.
    try {
      throw std::bad_alloc();
    } catch (const std::bad_alloc&) {
    }
    const long before = VmSizeKib();
    rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = static_cast<rlim_t>(before + 192) * 1024;  // one index, not two
    if (before < 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    bool threw = false;
    try {
      const PhaseTable table;
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const long after = VmSizeKib();
    _exit(!threw ? 2 : after == before ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: address space kept after the throw; 2: no bad_alloc; 3: no limit set";
#endif
}

}  // namespace
}  // namespace gpuwatch
