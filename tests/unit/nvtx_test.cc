// The NVTX layer's push and pop (interpose/nvtx/nvtx.cc) on the process's
// phase table: names found by pointer in the thread's cache (name_cache.h)
// and their text compared, paths kept per name, counts exact.
#include "interpose/nvtx/nvtx.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "interpose/nvtx/name_cache.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {
namespace {

// The leaf name of the range open on this thread.
std::string Leaf() { return std::string(ProcessPhases().LeafName(CurrentPhase())); }
std::string Path() { return ProcessPhases().PathText(CurrentPhase()); }

// The process's table, counted as a session counts it.
class NvtxPushTest : public ::testing::Test {
 protected:
  NvtxPushTest() : stats_(&ProcessPhases(), &tracker_) { ProcessPhases().SetStats(&stats_); }
  ~NvtxPushTest() override { ProcessPhases().SetStats(nullptr); }

  uint64_t Opens(const std::string& path) {
    const PhasesSnapshot s = SnapshotPhases(ProcessPhases(), stats_);
    for (size_t i = 0; i < s.rows.size(); ++i) {
      if (s.paths[i] == path) return s.rows[i].opens;
    }
    return 0;
  }

  Tracker tracker_;
  PhaseStats stats_;
};

TEST_F(NvtxPushTest, AReusedBufferIsNamedByItsTextNow) {
  char buffer[32];
  // Each text in turn from the same pointer: the cache must not answer an
  // old name (nor one the new text starts with, nor one that starts with it).
  for (const char* text : {"nvtx-alpha", "nvtx-beta", "nvtx-bet", "nvtx-beta2"}) {
    std::strcpy(buffer, text);
    PushPhase(buffer);
    EXPECT_EQ(Leaf(), text);
    ASSERT_TRUE(PopPhase());
  }
  EXPECT_EQ(CurrentPhase(), 0u);
  EXPECT_EQ(Opens("nvtx-alpha"), 1u);
  EXPECT_EQ(Opens("nvtx-beta"), 1u);
  EXPECT_EQ(Opens("nvtx-bet"), 1u);
  EXPECT_EQ(Opens("nvtx-beta2"), 1u);
}

TEST_F(NvtxPushTest, OnePointerInManyPlacesOpensEachPath) {
  static const char kInner[] = "nvtx-inner";
  for (int i = 0; i < 3; ++i) {
    PushPhase(kInner);  // top level
    EXPECT_EQ(Path(), "nvtx-inner");
    ASSERT_TRUE(PopPhase());
    PushPhase("nvtx-outer");
    PushPhase(kInner);  // the same name, its path kept per parent
    EXPECT_EQ(Path(), "nvtx-outer/nvtx-inner");
    PushPhase(kInner);
    EXPECT_EQ(Path(), "nvtx-outer/nvtx-inner/nvtx-inner");
    ASSERT_TRUE(PopPhase());
    ASSERT_TRUE(PopPhase());
    ASSERT_TRUE(PopPhase());
  }
  EXPECT_EQ(Opens("nvtx-inner"), 3u);
  EXPECT_EQ(Opens("nvtx-outer/nvtx-inner"), 3u);
  EXPECT_EQ(Opens("nvtx-outer/nvtx-inner/nvtx-inner"), 3u);
}

TEST_F(NvtxPushTest, ManyNamesFromOneThreadStayExact) {
  // More names than the cache holds, in turn: evicted ones are interned again.
  std::string names[40];
  for (int i = 0; i < 40; ++i) names[i] = "nvtx-many-" + std::to_string(i);
  for (int round = 0; round < 5; ++round) {
    for (const std::string& name : names) {
      PushPhase(name.c_str());
      EXPECT_EQ(Leaf(), name);
      ASSERT_TRUE(PopPhase());
    }
  }
  for (const std::string& name : names) EXPECT_EQ(Opens(name), 5u) << name;
}

TEST_F(NvtxPushTest, ANameCutToTheLimitIsEveryTextThatStartsWithIt) {
  std::string text(kMaxPhaseNameBytes, 'n');
  text += "-tail-one";
  PushPhase(text.c_str());
  const uint32_t first = CurrentPhase();
  EXPECT_EQ(Leaf(), std::string(kMaxPhaseNameBytes, 'n'));
  ASSERT_TRUE(PopPhase());
  text.replace(kMaxPhaseNameBytes, std::string::npos, "-tail-two");  // past the cut
  PushPhase(text.c_str());
  EXPECT_EQ(CurrentPhase(), first);
  ASSERT_TRUE(PopPhase());
  text[3] = 'm';  // before the cut: another name
  PushPhase(text.c_str());
  EXPECT_NE(CurrentPhase(), first);
  ASSERT_TRUE(PopPhase());
}

TEST_F(NvtxPushTest, EachThreadHasItsOwnCache) {
  char shared[32];
  std::strcpy(shared, "nvtx-thread-a");
  PushPhase(shared);
  EXPECT_EQ(Leaf(), "nvtx-thread-a");
  std::thread other([&] {
    PushPhase("nvtx-thread-b");
    EXPECT_EQ(Path(), "nvtx-thread-b");  // this thread's stack alone
    ASSERT_TRUE(PopPhase());
  });
  other.join();
  EXPECT_EQ(Path(), "nvtx-thread-a");
  ASSERT_TRUE(PopPhase());
  EXPECT_EQ(Opens("nvtx-thread-b"), 1u);
}

TEST(NameCache, FindsAPointerOnlyWithItsTextAndDomain) {
  PhaseTable table;
  NameCache cache;
  char text[16];
  std::strcpy(text, "step");
  EXPECT_EQ(cache.Find(table, text, 0), nullptr);
  const uint32_t step = table.InternName("step");
  cache.Put(text, 0, step, 0);
  ASSERT_NE(cache.Find(table, text, 0), nullptr);
  EXPECT_EQ(cache.Find(table, text, 0)->name, step);
  EXPECT_EQ(cache.Find(table, text, 1), nullptr);  // another domain
  // A domain's name holds its prefix: the text is compared past it.
  const uint32_t in_domain = table.InternName("dom:step");
  cache.Put(text, 1, in_domain, 4);
  ASSERT_NE(cache.Find(table, text, 1), nullptr);
  EXPECT_EQ(cache.Find(table, text, 1)->name, in_domain);
  std::strcpy(text, "stop");
  EXPECT_EQ(cache.Find(table, text, 0), nullptr);
  EXPECT_EQ(cache.Find(table, text, 1), nullptr);
}

}  // namespace
}  // namespace gpuwatch
