// The CFI walker (libgpuwatch/stacks/cfi_unwind.h) against libunwind: the same pcs
// on every stack it walks, and a clean refusal (then libunwind's stack) on
// the stacks it cannot.
#include "libgpuwatch/stacks/cfi_unwind.h"

#include <alloca.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "libgpuwatch/stacks/unwind.h"
#include "tests/unit/fixtures/fixture_lib.h"

namespace gpuwatch {
namespace {

constexpr int kMax = kMaxCaptureDepth;

struct Stacks {
  std::vector<uintptr_t> cfi;
  std::vector<uintptr_t> libunwind;
  int walker = 0;  // what CfiBacktrace itself returned
};

// Captures the current stack three ways from one frame. The first pc of each
// is a return address into this function (one per call site), so they are
// dropped; the rest must match.
__attribute__((noinline)) Stacks CaptureAll() {
  Stacks s;
  uintptr_t pcs[kMax];
  int n = CaptureStackWith(UnwindMethod::kCfi, pcs, kMax, 0);
  s.cfi.assign(pcs + std::min(n, 1), pcs + n);
  n = CaptureStackWith(UnwindMethod::kLibunwind, pcs, kMax, 0);
  s.libunwind.assign(pcs + std::min(n, 1), pcs + n);
  s.walker = CfiBacktrace(pcs, kMax);
  asm volatile("" ::: "memory");
  return s;
}

bool HaveLibunwind() { return FallbackUnwindMethod() == UnwindMethod::kLibunwind; }

#define SKIP_WITHOUT_LIBUNWIND()                                                    \
  do {                                                                              \
    if (!HaveLibunwind()) {                                                         \
      GTEST_SKIP() << "libunwind is not the fallback here (ThreadSanitizer builds " \
                      "use libgcc's)";                                              \
    }                                                                               \
  } while (false)

// Checks that the walker walked (no fallback) and agrees with libunwind.
void ExpectSameAsLibunwind(const Stacks& s) {
  EXPECT_GE(s.walker, 1);
  ASSERT_GE(s.cfi.size(), 3U);
  EXPECT_EQ(s.cfi, s.libunwind);
}

__attribute__((noinline)) Stacks Recurse(int depth) {
  Stacks s = depth == 0 ? CaptureAll() : Recurse(depth - 1);
  asm volatile("" ::: "memory");
  return s;
}

TEST(CfiUnwind, AgreesWithLibunwindOnADeepStack) {
  SKIP_WITHOUT_LIBUNWIND();
  const uint64_t fallbacks = CfiFallbacks();
  const Stacks s = Recurse(60);
  ExpectSameAsLibunwind(s);
  // The whole stack, down to the program's entry: 60 levels, the test
  // framework's frames, main, libc's start-up.
  EXPECT_GT(s.cfi.size(), 70U);
  EXPECT_EQ(CfiFallbacks(), fallbacks);
}

TEST(CfiUnwind, StopsAtTheRequestedDepth) {
  uintptr_t pcs[8];
  EXPECT_EQ(CfiBacktrace(pcs, 8), 8);
  EXPECT_EQ(CfiBacktrace(pcs, 0), 0);
  EXPECT_EQ(CfiBacktrace(pcs, -3), 0);
}

// Walks twice in place and once with a copy, from one frame: the pcs of each
// (the first, a return address into this function, dropped) and whether the
// second in-place walk left its pcs outside the buffer (in the record).
struct InPlaceWalks {
  std::vector<uintptr_t> first;
  std::vector<uintptr_t> second;
  std::vector<uintptr_t> copied;
  bool second_outside_buffer = false;
};

__attribute__((noinline)) InPlaceWalks WalkInPlace(int size) {
  InPlaceWalks w;
  uintptr_t buffer[kMax];
  const uintptr_t* pcs = nullptr;
  for (int i = 0; i < 2; ++i) {
    std::fill_n(buffer, kMax, 0);  // nothing the walk did not write is read
    const int n = CfiBacktraceInPlace(buffer, size, &pcs);
    (i == 0 ? w.first : w.second).assign(pcs + std::min(n, 1), pcs + std::max(n, 0));
    w.second_outside_buffer = pcs < buffer || pcs >= buffer + kMax;
  }
  const int n = CfiBacktrace(buffer, size);
  w.copied.assign(buffer + std::min(n, 1), buffer + std::max(n, 0));
  asm volatile("" ::: "memory");
  return w;
}

__attribute__((noinline)) InPlaceWalks WalkInPlaceAt(int depth, int size) {
  InPlaceWalks w = depth == 0 ? WalkInPlace(size) : WalkInPlaceAt(depth - 1, size);
  asm volatile("" ::: "memory");
  return w;
}

// A walk that takes its frames from the last one leaves them in the record
// (no copy) when the record holds them all; a deeper one gives them in the
// buffer. Either way they are CfiBacktrace's.
TEST(CfiUnwind, AWalkInPlaceGivesTheRecordsFramesOrTheBuffers) {
  for (const int size : {8, 40, 63, 64, 65, 72}) {
    SCOPED_TRACE(size);
    const InPlaceWalks w = WalkInPlaceAt(70, size);
    ASSERT_EQ(w.first.size(), static_cast<size_t>(size - 1));
    EXPECT_EQ(w.second, w.first);
    EXPECT_EQ(w.copied, w.first);
    // The record holds 64 frames: frame 0 (the walker's) and 63 pcs.
    EXPECT_EQ(w.second_outside_buffer, size <= 63);
  }
}

// A frame whose CFA is rbp-based: alloca of a size the compiler cannot know.
__attribute__((noinline)) Stacks WithDynamicFrame(int bytes) {
  auto* scratch = static_cast<volatile char*>(alloca(static_cast<size_t>(bytes)));
  scratch[0] = 1;
  Stacks s = Recurse(3);
  asm volatile("" ::: "memory");
  return s;
}

TEST(CfiUnwind, WalksAFrameAddressedFromRbp) {
  SKIP_WITHOUT_LIBUNWIND();
  const Stacks s = WithDynamicFrame(1000 + std::rand() % 7);  // NOLINT(cert-msc30-c,cert-msc50-cpp)
  ExpectSameAsLibunwind(s);
}

TEST(CfiUnwind, RuleOfAFunctionsFirstInstruction) {
  // At a function's first instruction the CFA is rsp + 8, the return address
  // is at CFA - 8 and rbp has not been touched.
  const auto entry = reinterpret_cast<uintptr_t>(&WithDynamicFrame);
  const internal::CfiRule rule = internal::ComputeCfiRule(entry);
  ASSERT_TRUE(rule.ok);
  EXPECT_FALSE(rule.outermost);
  EXPECT_FALSE(rule.cfa_from_rbp);
  EXPECT_EQ(rule.cfa_offset, 8);
  EXPECT_EQ(rule.ra_offset, -8);
  EXPECT_FALSE(rule.rbp_saved);
}

// Unwind tables written by hand: an .eh_frame_hdr with one entry, a CIE
// ("zR", pc-relative FDE pointers, CFA = rsp + 8, return address at CFA - 8)
// and the FDE of a function at `function` whose instructions follow.
struct Tables {
  std::vector<uint8_t> bytes;
  uintptr_t function = 0;
  static constexpr size_t kFrame = 64;  // where .eh_frame starts

  void U8(uint8_t v) { bytes.push_back(v); }
  void U32At(size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); }
  void U32(uint32_t v) {
    bytes.resize(bytes.size() + 4);
    U32At(bytes.size() - 4, v);
  }
  uintptr_t Address(size_t at) const { return reinterpret_cast<uintptr_t>(bytes.data()) + at; }

  // `fde_program`: the FDE's call frame instructions; `augmentation` the CIE's.
  Tables(const std::vector<uint8_t>& fde_program, const char* augmentation = "zR") {
    bytes.reserve(4096);  // addresses are taken below: no reallocation
    bytes.assign(kFrame, 0);
    // CIE
    const size_t cie = bytes.size();
    U32(0);  // length, set below
    U32(0);  // CIE id
    U8(1);   // version
    for (const char* c = augmentation; *c != '\0'; ++c) U8(static_cast<uint8_t>(*c));
    U8(0);
    U8(1);     // code alignment
    U8(0x78);  // data alignment -8
    U8(16);    // return address column
    U8(1);     // augmentation data length
    U8(0x1b);  // FDE pointers: pc-relative, signed 4 bytes
    for (uint8_t op : {0x0c, 0x07, 0x08, 0x90, 0x01}) U8(op);  // def_cfa rsp+8; ra at cfa-8
    while ((bytes.size() - cie) % 4 != 0) U8(0);
    U32At(cie, static_cast<uint32_t>(bytes.size() - cie - 4));
    // FDE
    const size_t fde = bytes.size();
    U32(0);
    U32(static_cast<uint32_t>(bytes.size() - cie));  // back to the CIE
    function = Address(0) + 0x10000;                 // code lies elsewhere
    U32(static_cast<uint32_t>(function - Address(bytes.size())));
    U32(0x100);  // function size
    U8(0);       // augmentation data length
    for (uint8_t op : fde_program) U8(op);
    while ((bytes.size() - fde) % 4 != 0) U8(0);
    U32At(fde, static_cast<uint32_t>(bytes.size() - fde - 4));
    U32(0);  // terminator
    // .eh_frame_hdr at 0: version, encodings, .eh_frame pointer, count, table.
    const uint8_t header[] = {1, 0x1b, 0x03, 0x3b};
    std::memcpy(bytes.data(), header, 4);
    U32At(4, static_cast<uint32_t>(kFrame - 4));
    U32At(8, 1);
    U32At(12, static_cast<uint32_t>(function - Address(0)));
    U32At(16, static_cast<uint32_t>(fde));
  }

  internal::CfiRule At(uintptr_t offset) const {
    return internal::CfiRuleFromTables(bytes.data(), bytes.size(), 0, function + offset);
  }
};

void ExpectRule(const internal::CfiRule& rule, bool from_rbp, int cfa, int rbp_saved_at) {
  ASSERT_TRUE(rule.ok);
  EXPECT_FALSE(rule.outermost);
  EXPECT_EQ(rule.cfa_from_rbp, from_rbp);
  EXPECT_EQ(rule.cfa_offset, cfa);
  EXPECT_EQ(rule.ra_offset, -8);
  EXPECT_EQ(rule.rbp_saved, rbp_saved_at != 0);
  if (rbp_saved_at != 0) {
    EXPECT_EQ(rule.rbp_offset, rbp_saved_at);
  }
}

TEST(CfiUnwind, RulesOfAHandWrittenFunction) {
  // push %rbp; mov %rsp,%rbp; ...; a block that remembers the row, sets the
  // CFA back to rsp + 8 (an early return) and restores it.
  const Tables t({
      0x41,              // advance 1
      0x0e, 0x10,        // def_cfa_offset 16
      0x86, 0x02,        // rbp saved at cfa - 16
      0x43,              // advance 3
      0x0d, 0x06,        // def_cfa_register rbp
      0x4a,              // advance 10
      0x0a,              // remember_state
      0x0c, 0x07, 0x08,  // def_cfa rsp + 8
      0xc6,              // restore rbp (the CIE's rule: unchanged)
      0x41,              // advance 1
      0x0b,              // restore_state
  });
  ExpectRule(t.At(0), false, 8, 0);
  ExpectRule(t.At(1), false, 16, -16);
  ExpectRule(t.At(3), false, 16, -16);
  ExpectRule(t.At(4), true, 16, -16);
  ExpectRule(t.At(13), true, 16, -16);
  ExpectRule(t.At(14), false, 8, 0);
  ExpectRule(t.At(15), true, 16, -16);
  ExpectRule(t.At(0xff), true, 16, -16);
  EXPECT_FALSE(t.At(0x100).ok);                       // past the function
  EXPECT_FALSE(t.At(static_cast<uintptr_t>(-1)).ok);  // before it
}

TEST(CfiUnwind, RulesItCannotExpressAreRefused) {
  // The CFA as a DWARF expression (as PLT stubs have).
  EXPECT_FALSE(Tables({0x0f, 0x01, 0x77}).At(0).ok);
  // rbp or the return address in another register, or as an expression.
  EXPECT_FALSE(Tables({0x09, 0x06, 0x03}).At(0).ok);
  EXPECT_FALSE(Tables({0x10, 0x10, 0x01, 0x77}).At(0).ok);
  // A signal frame.
  EXPECT_FALSE(Tables({}, "zRS").At(0).ok);
  // An augmentation it does not know, whose meaning for the FDE it cannot tell.
  EXPECT_FALSE(Tables({}, "zRX").At(0).ok);
  EXPECT_TRUE(Tables({}, "zRB").At(0).ok);  // AArch64's B key: nothing for x86-64
  // An opcode DWARF does not define.
  EXPECT_FALSE(Tables({0x3f}).At(0).ok);
  // A return address left undefined ends the stack.
  const internal::CfiRule end = Tables({0x07, 0x10}).At(0);
  EXPECT_TRUE(end.ok);
  EXPECT_TRUE(end.outermost);
}

TEST(CfiUnwind, TruncatedOrCorruptTablesGiveNoRuleAndReadNothingOutside) {
  const Tables good({0x41, 0x0e, 0x10});
  ExpectRule(good.At(1), false, 16, 0);
  // Every shorter copy: each read is checked against the copy's own bounds
  // (ASan would report one that is not), and none gives a rule it should not.
  for (size_t size = 0; size < good.bytes.size() - 4; ++size) {
    std::vector<uint8_t> cut(good.bytes.begin(), good.bytes.begin() + static_cast<ptrdiff_t>(size));
    const internal::CfiRule rule =
        internal::CfiRuleFromTables(cut.data(), cut.size(), 0, good.function + 1);
    EXPECT_FALSE(rule.ok && rule.cfa_offset != 16) << size;
  }
  // Every byte flipped in turn: any answer, but no read outside.
  for (size_t i = 0; i < good.bytes.size(); ++i) {
    std::vector<uint8_t> bad = good.bytes;
    bad[i] ^= 0xff;
    internal::CfiRuleFromTables(bad.data(), bad.size(), 0, good.function + 1);
  }
}

TEST(CfiUnwind, NoRuleOutsideLoadedCode) {
  std::vector<char> heap(64);
  EXPECT_FALSE(internal::ComputeCfiRule(reinterpret_cast<uintptr_t>(heap.data())).ok);
  EXPECT_FALSE(internal::ComputeCfiRule(0x10).ok);
}

Stacks g_from_qsort;
int CompareAndCapture(const void* a, const void* b) {
  if (g_from_qsort.cfi.empty()) g_from_qsort = CaptureAll();
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

TEST(CfiUnwind, WalksThroughLibc) {
  SKIP_WITHOUT_LIBUNWIND();
  int values[] = {3, 1, 2};
  g_from_qsort = {};
  std::qsort(values, 3, sizeof(int), &CompareAndCapture);
  ExpectSameAsLibunwind(g_from_qsort);
}

TEST(CfiUnwind, WalksAThreadToItsStart) {
  SKIP_WITHOUT_LIBUNWIND();
  Stacks s;
  std::thread([&s] { s = Recurse(5); }).join();
  ExpectSameAsLibunwind(s);
}

UnwindMethod g_fixture_method = UnwindMethod::kCfi;
int CaptureForFixture(uintptr_t* pcs, int max_depth, int skip) {
  return CaptureStackWith(g_fixture_method, pcs, max_depth, skip);
}

TEST(CfiUnwind, WalksThroughASharedLibraryBuiltWithoutOptimisation) {
  SKIP_WITHOUT_LIBUNWIND();
  uintptr_t pcs[2][kMax];
  int n[2] = {};
  int line = 0;
  const uint64_t fallbacks = CfiFallbacks();
  const UnwindMethod methods[] = {UnwindMethod::kCfi, UnwindMethod::kLibunwind};
  // One call site, so the two stacks are the same (the asm keeps the loop
  // from being unrolled into two).
  for (int i = 0; i < 2; ++i) {
    asm volatile("" : "+r"(i));
    g_fixture_method = methods[i];
    n[i] = gpuwatch_fixture::CaptureInLibrary(&CaptureForFixture, pcs[i], kMax, &line);
  }
  EXPECT_EQ(CfiFallbacks(), fallbacks);
  ASSERT_GE(n[0], 3);
  ASSERT_EQ(n[0], n[1]);
  EXPECT_TRUE(std::equal(pcs[0], pcs[0] + n[0], pcs[1]));
}

Stacks g_in_handler;
void CaptureInHandler(int /*signo*/) { g_in_handler = CaptureAll(); }

TEST(CfiUnwind, DeclinesASignalFrameAndLibunwindTakesOver) {
  SKIP_WITHOUT_LIBUNWIND();
  struct sigaction action {};
  struct sigaction old {};
  action.sa_handler = &CaptureInHandler;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &action, &old), 0);
  const uint64_t fallbacks = CfiFallbacks();
  g_in_handler = {};
  raise(SIGUSR2);
  sigaction(SIGUSR2, &old, nullptr);
  // The kernel's signal frame (__restore_rt) has a rule the walker does not
  // express: it declines, and kCfi falls back to libunwind, which walks
  // through the handler into this test.
  EXPECT_EQ(g_in_handler.walker, -1);
  EXPECT_EQ(CfiFallbacks(), fallbacks + 1);
  ASSERT_GT(g_in_handler.libunwind.size(), 5U);
  EXPECT_EQ(g_in_handler.cfi, g_in_handler.libunwind);
}

// A coroutine on a heap stack: outside the thread's stack, so the walker
// cannot bound its reads and declines.
ucontext_t g_main_context;
ucontext_t g_coroutine_context;
Stacks g_in_coroutine;
void Coroutine() { g_in_coroutine = CaptureAll(); }

TEST(CfiUnwind, DeclinesAStackOutsideTheThreadsStack) {
  SKIP_WITHOUT_LIBUNWIND();
  std::vector<char> stack(size_t{256} * 1024);
  ASSERT_EQ(getcontext(&g_coroutine_context), 0);
  g_coroutine_context.uc_stack.ss_sp = stack.data();
  g_coroutine_context.uc_stack.ss_size = stack.size();
  g_coroutine_context.uc_link = &g_main_context;
  makecontext(&g_coroutine_context, &Coroutine, 0);
  g_in_coroutine = {};
  ASSERT_EQ(swapcontext(&g_main_context, &g_coroutine_context), 0);
  EXPECT_EQ(g_in_coroutine.walker, -1);
  ASSERT_GE(g_in_coroutine.libunwind.size(), 1U);
  EXPECT_EQ(g_in_coroutine.cfi, g_in_coroutine.libunwind);
}

// Code without unwind tables, as a JIT makes: `sub $8,%rsp; call *%rdi;
// add $8,%rsp; ret`, which calls its argument.
TEST(CfiUnwind, DeclinesCodeWithoutUnwindTables) {
  void* page =
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) GTEST_SKIP() << "no executable anonymous memory here";
  const unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7, 0x48, 0x83, 0xc4, 0x08, 0xc3};
  std::memcpy(page, code, sizeof(code));
  static int walker;
  walker = 0;
  auto* trampoline = reinterpret_cast<void (*)(void (*)())>(page);
  trampoline([] {
    uintptr_t pcs[kMax];
    walker = CfiBacktrace(pcs, kMax);
  });
  munmap(page, 4096);
  EXPECT_EQ(walker, -1);
}

TEST(CfiUnwind, FlushedRulesAreComputedAgain) {
  SKIP_WITHOUT_LIBUNWIND();
  Stacks runs[2];
  // One call site, so the two stacks are the same (the asm keeps the loop
  // from being unrolled into two).
  for (int i = 0; i < 2; ++i) {
    asm volatile("" : "+r"(i));
    if (i == 1) {
      EXPECT_GT(internal::CfiRulesCached(), 0);
      FlushCfiRules();
      EXPECT_EQ(internal::CfiRulesCached(), 0);
    }
    runs[i] = Recurse(4);
  }
  ExpectSameAsLibunwind(runs[1]);
  EXPECT_EQ(runs[0].cfi, runs[1].cfi);
  EXPECT_GT(internal::CfiRulesCached(), 0);
}

// A module unloaded while another thread computes a rule from its tables:
// the flush that follows the unload may come after that computation and
// before its rule enters the table. The hook makes the flush come exactly
// there; the rule must not be kept (before, it was, and a later walk through
// whatever was loaded at that address used it).
uintptr_t g_flushed_pc = 0;

TEST(CfiUnwind, ARuleComputedAcrossAFlushIsNotKept) {
  FlushCfiRules();
  g_flushed_pc = 0;
  internal::SetRuleComputedHookForTest([](uintptr_t pc) {
    if (g_flushed_pc != 0) return;
    g_flushed_pc = pc;
    FlushCfiRules();
  });
  uintptr_t pcs[kMax];
  const int n = CfiBacktrace(pcs, kMax);
  internal::SetRuleComputedHookForTest(nullptr);
  ASSERT_GT(n, 2);
  ASSERT_NE(g_flushed_pc, 0u);
  EXPECT_FALSE(internal::CfiRuleIsCached(g_flushed_pc));
  // The rules computed after the flush are kept: the outermost frame's.
  EXPECT_TRUE(internal::CfiRuleIsCached(pcs[n - 1] - 1));
}

// A capture from Inner, by way of Middle, called from one of two call sites
// in Outer: the two stacks have the same frames at the same stack addresses
// but for one return address, Middle's into Outer. A walk that took the last
// walk's frames without checking them would report the other call site.
__attribute__((noinline)) Stacks Inner() {
  Stacks s = CaptureAll();
  asm volatile("" ::: "memory");
  return s;
}
__attribute__((noinline)) Stacks Middle() {
  Stacks s = Inner();
  asm volatile("" ::: "memory");
  return s;
}
__attribute__((noinline)) Stacks Outer(bool first_site) {
  Stacks s;
  // Different code after each call keeps the compiler from merging them.
  if (first_site) {
    s = Middle();
    asm volatile("nop" ::: "memory");
  } else {
    s = Middle();
    asm volatile("nop\n\tnop" ::: "memory");
  }
  return s;
}

TEST(CfiUnwind, TheLastWalksFramesAreCheckedAgainstTheStack) {
  SKIP_WITHOUT_LIBUNWIND();
  const uint64_t reused = internal::CfiFramesReused();
  std::vector<uintptr_t> first[2];
  for (int i = 0; i < 6; ++i) {
    const Stacks s = Outer(i % 2 == 0);
    ExpectSameAsLibunwind(s);
    if (first[i % 2].empty()) first[i % 2] = s.cfi;
    EXPECT_EQ(s.cfi, first[i % 2]) << i;
  }
  // [0] returns into Inner, [1] into Middle, [2] into Outer: at one of two
  // call sites.
  ASSERT_GE(first[0].size(), 4U);
  ASSERT_EQ(first[0].size(), first[1].size());
  for (size_t i = 0; i < first[0].size(); ++i) {
    EXPECT_EQ(first[0][i] == first[1][i], i != 2) << i;
  }
  // The walks joined the last one's frames (and checked them).
  EXPECT_GT(internal::CfiFramesReused(), reused + uint64_t{6} * 10);
}

// F's frame is addressed from rbp (alloca). W(64, 192) and W(192, 64) leave
// F's stack pointer at the same address but its rbp, and so its CFA and W's
// frame, 128 bytes apart; the stale return address of the other call may
// still sit where the last walk read it.
__attribute__((noinline)) Stacks F(int bytes) {
  auto* scratch = static_cast<volatile char*>(alloca(static_cast<size_t>(bytes)));
  scratch[0] = 1;
  Stacks s = Inner();
  asm volatile("" ::: "memory");
  return s;
}
__attribute__((noinline)) Stacks W(int bytes, int f_bytes) {
  auto* scratch = static_cast<volatile char*>(alloca(static_cast<size_t>(bytes)));
  scratch[0] = 1;
  Stacks s = F(f_bytes);
  asm volatile("" ::: "memory");
  return s;
}

TEST(CfiUnwind, AFrameAddressedFromRbpIsCheckedByRbp) {
  SKIP_WITHOUT_LIBUNWIND();
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    const bool first = i % 2 == 0;
    ExpectSameAsLibunwind(W(first ? 64 : 192, first ? 192 : 64));
  }
}

TEST(CfiUnwind, WalksDeeperThanTheRecordAndBackAgain) {
  SKIP_WITHOUT_LIBUNWIND();
  for (const int depth : {5, 100, 100, 3, 40, 100, 0}) {
    SCOPED_TRACE(depth);
    ExpectSameAsLibunwind(Recurse(depth));
  }
}

// gw_cfi_test_with_rbp(fn, arg, value) saves rbp, puts `value` in it, calls
// fn(arg) and restores rbp: the frames above it see an rbp that holds data,
// saved in its frame (its CFA is rsp plus an offset). Written by hand, since a
// compiler that keeps frame pointers (the sanitizer builds) cannot be asked
// for that.
extern "C" void gw_cfi_test_with_rbp(void (*fn)(void*), void* arg, uintptr_t value);
asm(R"(
  .text
  .p2align 4
  .globl gw_cfi_test_with_rbp
  .hidden gw_cfi_test_with_rbp
  .type gw_cfi_test_with_rbp, @function
gw_cfi_test_with_rbp:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rdx, %rbp
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  popq %rbp
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size gw_cfi_test_with_rbp, .-gw_cfi_test_with_rbp
)");

// A chain of frames of three kinds, innermost last: 0 an ordinary frame, 1
// one that saves rbp and puts data in it (gw_cfi_test_with_rbp), 2 one
// addressed from rbp (alloca of `bytes`).
struct Chain {
  static constexpr int kMaxLevels = 12;
  int n = 0;
  int kind[kMaxLevels] = {};
  int bytes[kMaxLevels] = {};
  uintptr_t value[kMaxLevels] = {};
  int at = 0;  // the level being entered
  Stacks out;
};

void Level(void* arg);

__attribute__((noinline)) void Ordinary(Chain* c) {
  Level(c);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void FromRbp(Chain* c, int bytes) {
  auto* scratch = static_cast<volatile char*>(alloca(static_cast<size_t>(bytes)));
  scratch[0] = 1;
  Level(c);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void Level(void* arg) {
  auto* c = static_cast<Chain*>(arg);
  if (c->at == c->n) {
    c->out = CaptureAll();
    return;
  }
  const int i = c->at++;
  if (c->kind[i] == 1) {
    gw_cfi_test_with_rbp(&Level, c, c->value[i]);
  } else if (c->kind[i] == 2) {
    FromRbp(c, c->bytes[i]);
  } else {
    Ordinary(c);
  }
  asm volatile("" ::: "memory");
}

// Successive walks that differ in one thing: a frame's kind, an alloca's size
// (a frame's rbp and the sps above it) or the data in rbp. A walk that takes
// the last walk's frames must find every such difference; where it finds
// none, the frames must be the same as libunwind's.
TEST(CfiUnwind, ChainsOfFramesThatSaveOrUseRbpAgreeWithLibunwind) {
  SKIP_WITHOUT_LIBUNWIND();
  std::mt19937 rng(20261206);
  const auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const uint64_t reused = internal::CfiFramesReused();
  Chain c;
  for (int round = 0; round < 600; ++round) {
    SCOPED_TRACE(round);
    if (round % 50 == 0) {
      c.n = 2 + pick(Chain::kMaxLevels - 1);
      for (int i = 0; i < c.n; ++i) {
        c.kind[i] = pick(3);
        c.bytes[i] = 16 * (1 + pick(12));
        c.value[i] = 0x1000 + 8 * static_cast<uintptr_t>(pick(4));
      }
    } else {
      const int i = pick(c.n);
      switch (pick(3)) {
        case 0:
          c.kind[i] = pick(3);
          break;
        case 1:
          c.bytes[i] = 16 * (1 + pick(12));
          break;
        default:
          c.value[i] = 0x1000 + 8 * static_cast<uintptr_t>(pick(4));
          break;
      }
    }
    c.at = 0;
    Level(&c);
    ASSERT_NO_FATAL_FAILURE(ExpectSameAsLibunwind(c.out));
    // Level's frames, and as many of the others: more than the chain.
    EXPECT_GE(c.out.cfi.size(), static_cast<size_t>(2 * c.n + 1));
  }
  // Most frames were taken from the last walk (and checked).
  EXPECT_GT(internal::CfiFramesReused(), reused + uint64_t{600} * 10);
}

// Walks cut short at `size` pcs, from one of two call sites `depth` frames
// down, each beside libunwind's whole stack from the same frame.
struct Cut {
  int size = 0;
  bool first_site = true;
  std::vector<uintptr_t> cfi;
  std::vector<uintptr_t> libunwind;
  uint64_t reused = 0;  // frames the walk took from the last one
};
__attribute__((noinline)) void CutWalk(Cut* c) {
  uintptr_t pcs[kMax];
  const uint64_t reused = internal::CfiFramesReused();
  const int n = CfiBacktrace(pcs, c->size);
  c->reused = internal::CfiFramesReused() - reused;
  // pcs[0] of each is the return into this function: one per call.
  c->cfi.assign(pcs + std::min(n, 1), pcs + std::max(n, 0));
  const int m = CaptureStackWith(UnwindMethod::kLibunwind, pcs, kMax, 0);
  c->libunwind.assign(pcs + std::min(m, 1), pcs + std::max(m, 0));
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void CutBelow(int depth, Cut* c) {
  if (depth > 0) {
    CutBelow(depth - 1, c);
  } else if (c->first_site) {
    CutWalk(c);
    asm volatile("nop" ::: "memory");
  } else {
    CutWalk(c);
    asm volatile("nop\n\tnop" ::: "memory");
  }
  asm volatile("" ::: "memory");
}

// A walk cut short records the caller it reached last (cfi_unwind.cc,
// Frames::SetLast): the next walk as deep takes every frame from the record,
// and a deeper one walks on by rule from that frame, which has no rule and no
// transition recorded. Cut walks from two call sites in turn, at several
// depths, give libunwind's frames.
TEST(CfiUnwind, AWalkCutShortRecordsTheCallerItReached) {
  SKIP_WITHOUT_LIBUNWIND();
  struct Step {
    int size;
    bool first_site;
  };
  const Step steps[] = {{10, true}, {10, true}, {10, false}, {10, false}, {20, true},
                        {5, false}, {5, false}, {40, true},  {12, false}, {40, true}};
  const Step* last = nullptr;
  for (const Step& step : steps) {
    SCOPED_TRACE(testing::Message() << step.size << (step.first_site ? " first" : " second"));
    Cut c;
    c.size = step.size;
    c.first_site = step.first_site;
    CutBelow(30, &c);
    ASSERT_EQ(c.cfi.size(), static_cast<size_t>(step.size - 1));
    ASSERT_GT(c.libunwind.size(), c.cfi.size());
    for (size_t i = 0; i < c.cfi.size(); ++i) EXPECT_EQ(c.cfi[i], c.libunwind[i]) << "frame " << i;
    // The same walk again: all of its frames but the walker's own (frame 0) from the record.
    if (last != nullptr && last->size == step.size && last->first_site == step.first_site) {
      EXPECT_EQ(c.reused, static_cast<uint64_t>(step.size));
    }
    last = &step;
  }
}

TEST(CfiUnwind, ThreadsWalkTogether) {
  SKIP_WITHOUT_LIBUNWIND();
  FlushCfiRules();  // every thread computes and inserts at once
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &mismatches] {
      for (int i = 0; i < 200; ++i) {
        const Stacks s = Recurse((t + i) % 30);
        if (s.walker < 1 || s.cfi != s.libunwind) mismatches++;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace gpuwatch
