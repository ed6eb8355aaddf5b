// The one fork protocol (libgpuwatch/base/fork_locks.h): whichever
// registered lock another thread holds at a fork, the child finds every lock
// free; the agent's part runs between the tiers and restarts in the child.
#include "libgpuwatch/base/fork_locks.h"

#include <gtest/gtest.h>

#include <mutex>

#include "libgpuwatch/base/memory_reserve.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/stacks/unwind.h"
#include "tests/unit/fork_check.h"

namespace gpuwatch::testing {
namespace {

Mutex g_outer_a;
Mutex g_outer_b;  // taken after a, as its group requires
Mutex g_leaf;
std::mutex g_std_leaf;

TEST(ForkLocks, AChildFindsEveryLockFreeWhicheverWasHeldAtTheFork) {
  fork_locks::Entry group;
  group.lock = [](void*) {
    g_outer_a.lock();
    g_outer_b.lock();
  };
  group.unlock = [](void*) {
    g_outer_b.unlock();
    g_outer_a.unlock();
  };
  group.child = group.unlock;
  group.tier = fork_locks::Tier::kOuter;
  group.name = "a test group";
  fork_locks::Add(group);
  fork_locks::AddLeaf(&g_leaf, "a test leaf");
  fork_locks::AddLeaf(&g_std_leaf, "a std::mutex leaf");
  // gpuwatch's own locks in the core: the unwinder's and the reserve's.
  InitUnwinder();
  { const MemoryReserve reserve(1, 4096); }
  EXPECT_TRUE(Registered("the unwinder's refresh"));
  EXPECT_TRUE(Registered("the memory reserve"));
  ASSERT_GE(fork_locks::Count(), 5u);
  ForkWhileEachIsHeld();
}

}  // namespace
}  // namespace gpuwatch::testing
