#include "libgpuwatch/stacks/unwind.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "libgpuwatch/stacks/cfi_unwind.h"

#include "tests/unit/fixtures/fixture_lib.h"
#include "tests/unit/malloc_counter.h"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer builds unwind with libgcc only (see LoadUnwinder).
#define GPUWATCH_SKIP_WITHOUT_LIBUNWIND() \
  GTEST_SKIP() << "ThreadSanitizer builds do not use libunwind (see LoadUnwinder)"
#else
#define GPUWATCH_SKIP_WITHOUT_LIBUNWIND() static_cast<void>(0)
#endif

namespace gpuwatch {
namespace {

constexpr UnwindMethod kMethods[] = {UnwindMethod::kCfi, UnwindMethod::kLibunwind,
                                     UnwindMethod::kGccUnwind};

struct Captured {
  uintptr_t pcs[64];
  int n = 0;
  uintptr_t ra = 0;  // return address of the capturing function (in its caller)
  uintptr_t fn = 0;  // address of the capturing function
};

// Captures from a known function and records its own return address, which
// must be the second pc of the stack (the first is inside this function).
__attribute__((noinline)) void CaptureHere(UnwindMethod method, int skip, Captured* out) {
  out->ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  out->fn = reinterpret_cast<uintptr_t>(&CaptureHere);
  out->n = CaptureStackWith(method, out->pcs, 64, skip);
  asm volatile("" ::: "memory");  // no sibling call
}

__attribute__((noinline)) int Recurse(int depth, UnwindMethod method, uintptr_t* pcs, int max) {
  int n = 0;
  if (depth == 0) {
    n = CaptureStackWith(method, pcs, max, 0);
  } else {
    n = Recurse(depth - 1, method, pcs, max);
  }
  asm volatile("" ::: "memory");  // keeps every level a real frame
  return n;
}

std::string ModuleOf(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

// True when `soname` is mapped in this process.
bool IsLoaded(const char* soname) {
  struct Query {
    const char* soname;
    bool found;
  } query{soname, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* q = static_cast<Query*>(data);
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, q->soname) != nullptr) {
          q->found = true;
        }
        return 0;
      },
      &query);
  return query.found;
}

// Runs `check` once for every unwind method, under the method's name (a
// fatal failure ends that method's check only).
template <typename Check>
void ForEachMethod(Check check) {
  for (const UnwindMethod method : kMethods) {
    SCOPED_TRACE(UnwindMethodName(method));
    check(method);
  }
}

TEST(UnwindTest, UsesTheCfiWalkerBeforeLibunwind) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  EXPECT_TRUE(UnwinderAvailable());
  EXPECT_EQ(ActiveUnwindMethod(), UnwindMethod::kCfi);
  EXPECT_STREQ(UnwindMethodName(ActiveUnwindMethod()), "cfi");
  EXPECT_EQ(FallbackUnwindMethod(), UnwindMethod::kLibunwind);
  EXPECT_STREQ(UnwindMethodName(FallbackUnwindMethod()), "libunwind");
}

// Runs `check` on a capture by CaptureHere that skips `skip` frames, once for
// every unwind method (ForEachMethod).
template <typename Check>
void ForEachCapture(int skip, Check check) {
  ForEachMethod([&](UnwindMethod method) {
    Captured c;
    CaptureHere(method, skip, &c);
    check(method, c);
  });
}

TEST(UnwindTest, FirstFrameIsTheCaller) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  ForEachCapture(0, [](UnwindMethod, const Captured& c) {
    ASSERT_GE(c.n, 3);
    // pcs[0] is a return address inside CaptureHere, pcs[1] the one in its
    // caller.
    EXPECT_GT(c.pcs[0], c.fn);
    EXPECT_LT(c.pcs[0], c.fn + 512);
    EXPECT_EQ(c.pcs[1], c.ra);
  });
}

TEST(UnwindTest, SkipDropsFrames) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  ForEachCapture(1, [](UnwindMethod method, const Captured& c) {
    ASSERT_GE(c.n, 2);
    EXPECT_EQ(c.pcs[0], c.ra);
    Captured far;
    CaptureHere(method, 100000, &far);
    EXPECT_EQ(far.n, 0);
  });
}

TEST(UnwindTest, PublicEntryPointMatchesExplicitMethod) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  uintptr_t pcs[8];
  const uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const int n = CaptureStack(pcs, 8, 1);
  ASSERT_GE(n, 1);
  EXPECT_EQ(pcs[0], ra);
}

TEST(UnwindTest, DepthIsCapped) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  ForEachMethod([&](UnwindMethod method) {
    uintptr_t pcs[64];
    EXPECT_EQ(Recurse(40, method, pcs, 32), 32);
    // Every level of the recursion returns to the same place.
    for (int i = 2; i < 32; ++i) EXPECT_EQ(pcs[i], pcs[1]) << i;
    EXPECT_EQ(Recurse(3, method, pcs, 0), 0);
    EXPECT_EQ(Recurse(3, method, pcs, -1), 0);
  });
}

// Captures 5 frames twice from one place and returns how many frames the
// second walk took from the first's record: every frame it walked but its own.
// Then 8 frames, from another line, into `more`.
__attribute__((noinline)) uint64_t FramesWalkedForFive(uintptr_t* pcs, uintptr_t* more) {
  uint64_t reused = 0;
  for (int i = 0; i < 2; ++i) {
    reused = internal::CfiFramesReused();
    EXPECT_EQ(CaptureStack(pcs, 5, 0), 5);
  }
  reused = internal::CfiFramesReused() - reused;
  EXPECT_EQ(CaptureStack(more, 8, 0), 8);
  asm volatile("" ::: "memory");
  return reused;
}

// A capture asks the walk for the frames it keeps and those of its own above
// them (CaptureStack's and CaptureFrom's: 2 when the compiler does not inline
// the second), not for kMaxOwnFrames (4): few frames walked are thrown away,
// and none is missing.
TEST(UnwindTest, ACaptureWalksOnlyTheFramesItKeeps) {
  if (ActiveUnwindMethod() != UnwindMethod::kCfi) GTEST_SKIP() << "the CFI walker is off";
  uintptr_t pcs[8];
  uintptr_t more[8];
  EXPECT_LE(FramesWalkedForFive(pcs, more), 5U + 2U);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(more[i], pcs[i]) << i;  // [0]: two call sites
}

TEST(UnwindTest, MethodsAgree) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  uintptr_t a[64];
  uintptr_t b[64];
  const int na = Recurse(10, UnwindMethod::kLibunwind, a, 64);
  const int nb = Recurse(10, UnwindMethod::kGccUnwind, b, 64);
  ASSERT_GE(na, 12);
  ASSERT_GE(nb, 12);
  // Same frames inside the recursion: both unwinders must see the same pcs
  // (the frame after them differs: two call sites in this test).
  for (int i = 0; i < 11; ++i) EXPECT_EQ(a[i], b[i]) << i;  // 11 levels of Recurse
}

#ifdef GPUWATCH_COUNT_MALLOC
TEST(UnwindTest, NoHeapAllocationPerCapture) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  ForEachMethod([&](UnwindMethod method) {
    long steady = -1;
    std::thread([method, &steady] {
      uintptr_t pcs[32];
      // The first capture on a thread may allocate once: glibc's dynamic TLS
      // block for the dlopen'ed libunwind.
      Recurse(40, method, pcs, 32);
      g_mallocs = 0;
      g_count_mallocs = true;
      for (int i = 0; i < 1000; ++i) Recurse(40, method, pcs, 32);
      g_count_mallocs = false;
      steady = g_mallocs;
    }).join();
    EXPECT_EQ(steady, 0);
  });
}
#endif

// Tool frames are recognised by module: here libc plays the tool, and pcs
// inside two of its functions count as leading tool frames until the first pc
// outside it.
TEST(UnwindTest, LeadingToolFramesCountsFramesInTheNamedModules) {
  // libc's own definitions: under a sanitizer RTLD_DEFAULT finds its interceptors.
  void* const libc_handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc_handle, nullptr) << dlerror();
  const auto in = [libc_handle](const char* symbol) {
    void* address = dlsym(libc_handle, symbol);
    EXPECT_NE(address, nullptr) << symbol;
    EXPECT_NE(ModuleOf(address).find("libc.so"), std::string::npos) << ModuleOf(address);
    return reinterpret_cast<uintptr_t>(address) + 1;  // a return address just past a call
  };
  const uintptr_t ours = reinterpret_cast<uintptr_t>(&CaptureHere) + 1;
  const uintptr_t pcs[] = {in("qsort"), in("getenv"), ours, in("qsort")};
  const char* const libc[] = {"libc.so"};
  internal::RefreshToolModulesNamed(libc, 1);
  EXPECT_EQ(LeadingToolFrames(pcs, 4), 2);
  EXPECT_EQ(LeadingToolFrames(pcs, 1), 1);
  EXPECT_EQ(LeadingToolFrames(pcs + 2, 2), 0);
  EXPECT_EQ(LeadingToolFrames(pcs + 3, 1), 1);
  const char* const none[] = {"libno-such-module.so"};
  internal::RefreshToolModulesNamed(none, 1);
  EXPECT_EQ(LeadingToolFrames(pcs, 4), 0);
  RefreshToolModules();  // the defaults: none of them is loaded in this test
  EXPECT_EQ(LeadingToolFrames(pcs, 4), 0);
  dlclose(libc_handle);
}

// Without tool frames on top, CaptureUserStack is CaptureStack from its
// caller, cut to `depth`.
__attribute__((noinline)) int CaptureUserHere(uintptr_t* pcs, int depth, uintptr_t* ra) {
  *ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const int n = CaptureUserStack(pcs, depth);
  asm volatile("" ::: "memory");  // no sibling call
  return n;
}

TEST(UnwindTest, CaptureUserStackStartsAtItsCaller) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  RefreshToolModules();
  uintptr_t pcs[64];
  uintptr_t ra = 0;
  const int n = CaptureUserHere(pcs, 3, &ra);
  ASSERT_EQ(n, 3);
  const auto fn = reinterpret_cast<uintptr_t>(&CaptureUserHere);
  EXPECT_GT(pcs[0], fn);
  EXPECT_LT(pcs[0], fn + 512);
  EXPECT_EQ(pcs[1], ra);
  EXPECT_EQ(CaptureUserHere(pcs, 0, &ra), 0);
}

// Both captures from one function: their frames differ only in the first,
// the return into it (two call sites).
__attribute__((noinline)) void CaptureBothWays(int depth, uintptr_t* copied, int* copied_n,
                                               uintptr_t* in_place, int* in_place_n) {
  *copied_n = CaptureUserStack(copied, depth);
  uintptr_t buffer[kMaxCaptureDepth];
  const uintptr_t* first = nullptr;
  *in_place_n = CaptureUserStackInPlace(buffer, depth, &first);
  // The frames may lie in the walker's record: read before the next capture.
  if (*in_place_n > 0) {
    std::copy_n(first, *in_place_n, in_place);
  }
  asm volatile("" ::: "memory");  // no sibling call
}

// CaptureUserStackInPlace is CaptureUserStack without the copy: the same
// frames, where the walk left them. Captured twice from one place, so that
// the second walk takes its frames from the first's record.
TEST(UnwindTest, CaptureUserStackInPlaceGivesTheFramesWhereTheyLie) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  RefreshToolModules();
  for (const int depth : {1, 3, 20, 300, 20, 300}) {
    SCOPED_TRACE(depth);
    uintptr_t copied[kMaxCaptureDepth];
    uintptr_t in_place[kMaxCaptureDepth];
    int copied_n = 0;
    int n = 0;
    CaptureBothWays(depth, copied, &copied_n, in_place, &n);
    ASSERT_EQ(n, copied_n);
    ASSERT_GE(n, std::min(depth, 3));
    EXPECT_NE(in_place[0], copied[0]);
    const auto fn = reinterpret_cast<uintptr_t>(&CaptureBothWays);
    EXPECT_GT(in_place[0], fn);
    EXPECT_LT(in_place[0], fn + 512);
    for (int i = 1; i < n; ++i) EXPECT_EQ(in_place[i], copied[i]) << "frame " << i;
  }
  const uintptr_t* first = nullptr;
  uintptr_t buffer[kMaxCaptureDepth];
  EXPECT_EQ(CaptureUserStackInPlace(buffer, 0, &first), 0);
  EXPECT_EQ(first, buffer);
}

// Captures as gpuwatch's callback does, as the caller of the capture: plain
// (every frame) or without the leading tool frames.
__attribute__((noinline)) int PlainCapture(uintptr_t* pcs, int depth) {
  const int n = CaptureStack(pcs, depth, /*skip=*/1);
  asm volatile("" ::: "memory");  // no sibling call
  return n;
}

// The same call site for both captures, so that the user's frames match.
__attribute__((noinline)) int CaptureUnderFixture(gpuwatch_fixture::UserCaptureFn capture,
                                                  uintptr_t* pcs, int depth, int frames = 30) {
  const int n = gpuwatch_fixture::CaptureBelowFrames(frames, capture, pcs, depth);
  asm volatile("" ::: "memory");
  return n;
}

// More tool frames than the user asked frames for, and none counted yet:
// CaptureUserStack must capture deeper until it has passed them all, and then
// return exactly the user's frames.
TEST(UnwindTest, CaptureUserStackGoesPastManyToolFramesForAShallowDepth) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  const char* const fixture[] = {"libgpuwatch_test_fixture.so"};
  internal::RefreshToolModulesNamed(fixture, 1);
  struct Run {
    gpuwatch_fixture::UserCaptureFn capture;
    int depth;
    uintptr_t pcs[128];
    int n;
  };
  Run runs[] = {
      {&PlainCapture, 128, {}, 0}, {&CaptureUserStack, 1, {}, 0}, {&CaptureUserStack, 3, {}, 0}};
  // One call site for all three, so that the user's frames are the same pcs.
  for (Run& run : runs) run.n = CaptureUnderFixture(run.capture, run.pcs, run.depth);
  const Run& all = runs[0];
  const int lead = LeadingToolFrames(all.pcs, all.n);
  ASSERT_GE(lead, 30);  // the fixture's frames
  ASSERT_GE(all.n, lead + 3);
  for (const Run& run : {runs[1], runs[2]}) {
    ASSERT_EQ(run.n, run.depth);
    for (int i = 0; i < run.depth; ++i) EXPECT_EQ(run.pcs[i], all.pcs[lead + i]) << "frame " << i;
  }
  EXPECT_GE(ToolFramesSeen(), lead);
  RefreshToolModules();
}

// A thread remembers its last count of tool frames with the frames it was
// found from (unwind.cc, LeadMemo): a capture with more of the same frames on
// top, with fewer, or after the set of tool modules changed must still drop
// exactly its own leading tool frames.
TEST(UnwindTest, CaptureUserStackCountsToolFramesAnewWhenTheyChange) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  const char* const fixture[] = {"libgpuwatch_test_fixture.so"};
  const char* const none[] = {"libno-such-module.so"};
  struct Step {
    int frames;
    bool fixture_is_tool;
  };
  const Step steps[] = {{30, true}, {30, true},  {31, true}, {12, true},
                        {40, true}, {40, false}, {30, true}, {29, true}};
  for (const Step& step : steps) {
    internal::RefreshToolModulesNamed(step.fixture_is_tool ? fixture : none, 1);
    uintptr_t all[128];
    uintptr_t user[3];
    const int n = CaptureUnderFixture(&PlainCapture, all, 128, step.frames);
    const int got = CaptureUnderFixture(&CaptureUserStack, user, 3, step.frames);
    const int lead = LeadingToolFrames(all, n);
    EXPECT_EQ(lead >= step.frames, step.fixture_is_tool) << step.frames << " frames";
    if (!step.fixture_is_tool) {
      EXPECT_EQ(lead, 0);
    }
    ASSERT_GE(n, lead + 3);
    ASSERT_EQ(got, 3);
    // The first frame below the tool frames: the return into CaptureUnderFixture
    // (the frames after it differ, being the returns to two lines of this test).
    EXPECT_EQ(user[0], all[lead]) << step.frames << " frames";
  }
  RefreshToolModules();
}

TEST(UnwindTest, ConcurrentCaptures) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&failures, t] {
      uintptr_t pcs[32];
      for (int i = 0; i < 2000; ++i) {
        if (Recurse(5 + (t + i) % 20, UnwindMethod::kLibunwind, pcs, 32) < 6) failures++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

// The symbol-hygiene guarantee: after libunwind is in the process, C++
// exceptions still go through libgcc_s and libunwind's symbols are not in
// the global scope.
TEST(UnwindTest, ExceptionsStillUseLibgcc) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  uintptr_t pcs[16];
  ASSERT_GT(CaptureStack(pcs, 16, 0), 0);
  ASSERT_TRUE(IsLoaded("libunwind.so.8"));

  EXPECT_EQ(dlsym(RTLD_DEFAULT, "unw_backtrace"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "__libunwind_Unwind_Backtrace"), nullptr);
  // The process-wide definitions must not come from libunwind. They come
  // from libgcc_s and libc, or from a sanitizer runtime that interposes them.
  const auto expect_from = [](const char* symbol, const char* library) {
    const void* address = dlsym(RTLD_DEFAULT, symbol);
    ASSERT_NE(address, nullptr) << symbol;
    const std::string module = ModuleOf(address);
    EXPECT_EQ(module.find("libunwind"), std::string::npos) << symbol << " from " << module;
    EXPECT_TRUE(module.find(library) != std::string::npos ||
                module.find("san.so") != std::string::npos)
        << symbol << " from " << module;
  };
  expect_from("_Unwind_RaiseException", "libgcc_s.so");
  expect_from("_Unwind_Resume", "libgcc_s.so");
  expect_from("_Unwind_Backtrace", "libgcc_s.so");
  expect_from("backtrace", "libc.so");

  int caught = 0;
  for (int i = 0; i < 3; ++i) {
    try {
      CaptureStack(pcs, 16, 0);
      throw std::runtime_error("boom");
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()) == "boom") ++caught;
    }
  }
  EXPECT_EQ(caught, 3);
}

TEST(UnwindTest, FallbackWhenLibunwindIsMissing) {
  GPUWATCH_SKIP_WITHOUT_LIBUNWIND();
  testing::internal::CaptureStderr();
  const internal::UnwinderFns fns = internal::LoadUnwinder("libgpuwatch-no-such-unwind.so.8");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(fns.method, UnwindMethod::kGccUnwind);
  EXPECT_EQ(fns.unw_backtrace, nullptr);
  // Exactly one line, with the prefix.
  EXPECT_EQ(err.rfind("gpuwatch: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("_Unwind_Backtrace"), std::string::npos) << err;

  // The fallback captures correct stacks on its own.
  Captured c;
  CaptureHere(fns.method, 0, &c);
  ASSERT_GE(c.n, 3);
  EXPECT_EQ(c.pcs[1], c.ra);
}

}  // namespace
}  // namespace gpuwatch
