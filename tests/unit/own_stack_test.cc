// RunWithStack's test of the calling thread's stack (base/own_stack.h).
#include "libgpuwatch/base/own_stack.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <cstdio>

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

// glibc's bounds of the calling thread's stack, [lo, hi).
void GlibcBounds(uintptr_t* lo, uintptr_t* hi) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
  void* low = nullptr;
  size_t size = 0;
  ASSERT_EQ(pthread_attr_getstack(&attr, &low, &size), 0);
  pthread_attr_destroy(&attr);
  *lo = reinterpret_cast<uintptr_t>(low);
  *hi = *lo + size;
}

// Whether this kernel has PROCMAP_QUERY (Linux 6.11), so MainThreadStack must answer.
bool KernelHasProcmapQuery() {
  utsname name{};
  int major = 0;
  int minor = 0;
  return uname(&name) == 0 && sscanf(name.release, "%d.%d", &major, &minor) == 2 &&
         (major > 6 || (major == 6 && minor >= 11));
}

// The main thread's bounds from PROCMAP_QUERY are glibc's from
// /proc/self/maps, byte for byte: under the stack limit the test starts with,
// a lower one, and a higher one cut at a mapping placed just below the stack.
TEST(OwnStack, TheMainThreadsBoundsAreGlibcs) {
  const char here = 0;
  const auto sp = reinterpret_cast<uintptr_t>(&here);
  StackBounds main;
  if (!MainThreadStack(sp, &main)) {
    ASSERT_FALSE(KernelHasProcmapQuery()) << "Linux 6.11 or later, and no answer";
    GTEST_SKIP() << "no PROCMAP_QUERY in this kernel (before Linux 6.11): glibc answers";
  }
  uintptr_t glibc_lo = 0;
  uintptr_t glibc_hi = 0;
  GlibcBounds(&glibc_lo, &glibc_hi);
  EXPECT_EQ(main.lo, glibc_lo);
  EXPECT_EQ(main.hi, glibc_hi);

  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_STACK, &old), 0);
  rlimit lower = old;
  lower.rlim_cur = size_t{1} << 20;
  ASSERT_EQ(setrlimit(RLIMIT_STACK, &lower), 0);
  const bool lower_known = MainThreadStack(sp, &main);
  GlibcBounds(&glibc_lo, &glibc_hi);
  EXPECT_TRUE(lower_known);
  EXPECT_EQ(main.lo, glibc_lo);
  EXPECT_EQ(main.hi - main.lo, glibc_hi - glibc_lo);

  // A page mapped 16 MiB below the top, under a 64 MiB limit: both cut there.
  rlimit higher = old;
  higher.rlim_cur = size_t{64} << 20;
  const bool raised = (old.rlim_max == RLIM_INFINITY || old.rlim_max >= higher.rlim_cur) &&
                      setrlimit(RLIMIT_STACK, &higher) == 0;
  const uintptr_t wall = glibc_hi - (size_t{16} << 20);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a fixed address below the stack
  void* page = raised ? mmap(reinterpret_cast<void*>(wall), 4096, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
                      : MAP_FAILED;
  const bool cut_known = page != MAP_FAILED && MainThreadStack(sp, &main);
  GlibcBounds(&glibc_lo, &glibc_hi);
  if (page != MAP_FAILED) munmap(page, 4096);
  ASSERT_EQ(setrlimit(RLIMIT_STACK, &old), 0);
  if (raised) {
    ASSERT_EQ(page, reinterpret_cast<void*>(wall));  // NOLINT(performance-no-int-to-ptr)
    EXPECT_TRUE(cut_known);
    EXPECT_EQ(glibc_lo, wall + 4096);
    EXPECT_EQ(main.lo, glibc_lo);
    EXPECT_EQ(main.hi, glibc_hi);
  }
}

// Another thread is not on the main thread's stack: MainThreadStack leaves
// it to glibc.
TEST(OwnStack, MainThreadStackAnswersOnlyOnTheMainThreadsStack) {
  bool known = true;
  std::thread([&] {
    const char here = 0;
    StackBounds bounds;
    known = MainThreadStack(reinterpret_cast<uintptr_t>(&here), &bounds);
  }).join();
  EXPECT_FALSE(known);
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
