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

// A lock made on first use is registered by whichever thread first uses it,
// which may hold a lock that a fork in progress waits for (the background
// thread holds its own while it builds its first report's memory reserve).
// The registration must not wait for that fork: here the holder of a
// registered lock registers another while this thread's fork waits for the
// first. Before, registering waited for the fork, and the fork for the
// holder: an alarm ends the test.
TEST(ForkLocks, ALockRegisteredWhileAForkWaitsDoesNotHoldTheFork) {
  static Mutex held;
  static Mutex made_during_the_fork;
  fork_locks::AddLeaf(&held, "held at the fork");
  alarm(60);
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false;
  bool forked = false;
  std::thread holder([&] {
    held.lock();
    std::unique_lock<std::mutex> lock(mu);
    holding = true;
    cv.notify_all();
    // The fork waits in its prepare step for `held`; a second is ample for
    // it to get there (the test holds either way).
    cv.wait_for(lock, std::chrono::seconds(1), [&] { return forked; });
    lock.unlock();
    fork_locks::AddLeaf(&made_during_the_fork, "made during the fork");
    held.unlock();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return holding; });
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // Registering works in the child too.
    static Mutex made_in_the_child;
    fork_locks::AddLeaf(&made_in_the_child, "made in the child");
    _exit(0);
  }
  {
    const std::lock_guard<std::mutex> lock(mu);
    forked = true;
    cv.notify_all();
  }
  holder.join();
  alarm(0);
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(WIFSIGNALED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_TRUE(Registered("made during the fork"));
  ForkWhileEachIsHeld();  // the entry made during that fork is taken by the next
}

}  // namespace
}  // namespace gpuwatch::testing
