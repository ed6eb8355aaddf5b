// RunWithStack's test of the calling thread's stack (base/own_stack.h).
#include "libgpuwatch/base/own_stack.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstddef>
#include <cstdint>
#include <thread>

namespace gpuwatch {
namespace {

// The main thread's answer (from PROCMAP_QUERY where the kernel has it)
// is glibc's: StackLeft's bounds from /proc/self/maps, around the boundary.
TEST(OwnStack, TheMainThreadsRoomIsWhatItsBoundsSay) {
  const size_t left = StackLeft();
  ASSERT_NE(left, SIZE_MAX);
  ASSERT_GT(left, size_t{1} << 20);
  for (const size_t needed : {size_t{0}, size_t{4096}, left / 2, left - (size_t{256} << 10),
                              left + (size_t{256} << 10), 2 * left}) {
    EXPECT_EQ(StackHasRoom(needed), StackLeft() >= needed) << needed << " of " << left;
  }
}

// Under a lower RLIMIT_STACK the main thread has less room, as glibc says.
TEST(OwnStack, TheMainThreadsRoomFollowsItsStackLimit) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_STACK, &old), 0);
  rlimit lower = old;
  lower.rlim_cur = size_t{1} << 20;
  ASSERT_EQ(setrlimit(RLIMIT_STACK, &lower), 0);
  const size_t left = StackLeft();
  const bool small = StackHasRoom(size_t{512} << 10);
  const bool large = StackHasRoom(size_t{2} << 20);
  ASSERT_EQ(setrlimit(RLIMIT_STACK, &old), 0);
  EXPECT_LT(left, size_t{1} << 20);
  EXPECT_EQ(small, left >= (size_t{512} << 10)) << left;
  EXPECT_FALSE(large) << left;
}

// On a signal's alternate stack (here inside a larger mapping that has room
// below it) the main thread's answer is still glibc's, whose bounds are
// the main stack's.
bool g_room_on_altstack = true;
bool g_left_on_altstack = true;
void OnAltStack(int) {
  g_room_on_altstack = StackHasRoom(size_t{512} << 10);
  g_left_on_altstack = StackLeft() >= (size_t{512} << 10);
}

TEST(OwnStack, OnAnAlternateSignalStackTheRoomIsStillGlibcs) {
  constexpr size_t kBytes = size_t{4} << 20;
  void* block = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  stack_t alt{};
  alt.ss_sp = static_cast<char*>(block) + kBytes - (size_t{64} << 10);
  alt.ss_size = size_t{64} << 10;
  stack_t old_alt{};
  ASSERT_EQ(sigaltstack(&alt, &old_alt), 0);
  struct sigaction action {};
  action.sa_handler = OnAltStack;
  action.sa_flags = SA_ONSTACK;
  struct sigaction old_action {};
  ASSERT_EQ(sigaction(SIGUSR1, &action, &old_action), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old_action, nullptr);
  sigaltstack(&old_alt, nullptr);
  munmap(block, kBytes);
  EXPECT_EQ(g_room_on_altstack, g_left_on_altstack);
}

// Another thread's stack is its own, from its descriptor.
TEST(OwnStack, AnotherThreadsRoomIsItsStacks) {
  bool room = true;
  bool no_room = true;
  std::thread([&] {
    room = StackHasRoom(4096);
    no_room = StackHasRoom(size_t{1} << 40);
  }).join();
  EXPECT_TRUE(room);
  EXPECT_FALSE(no_room);
}

// RunWithStack runs the work here when there is room, on a thread of its own
// when there is not, and either way it has run when it returns.
TEST(OwnStack, RunWithStackRunsTheWorkEitherWay) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  ASSERT_TRUE(RunWithStack([&] { ran_on = std::this_thread::get_id(); }, 4096));
  EXPECT_EQ(ran_on, caller);
  ASSERT_TRUE(RunWithStack([&] { ran_on = std::this_thread::get_id(); }, size_t{1} << 40));
  EXPECT_NE(ran_on, caller);
}

}  // namespace
}  // namespace gpuwatch
