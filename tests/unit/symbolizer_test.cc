// Built with -g -O0 (tests/CMakeLists.txt) so that lines and frames are exact.
#include "libgpuwatch/symbolize/symbolizer.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "libgpuwatch/stacks/unwind.h"
#include "tests/unit/fixtures/fixture_lib.h"

namespace gpuwatch_test {

struct Site {
  uintptr_t pcs[32];
  int n = 0;
  int line = 0;
};

__attribute__((noinline)) void CaptureInto(Site* site) {
  // skip = 1: start at the return address in our caller.
  site->n = gpuwatch::CaptureStack(site->pcs, 32, 1);
}

// The call to CaptureInto is the last instruction of its line, so its return
// address belongs to the next line: only the pc - 1 lookup gives site.line.
__attribute__((noinline)) Site KnownFunction(int x) {
  Site site;
  // clang-format off
  site.line = __LINE__; CaptureInto(&site);
  // clang-format on
  site.n += x;
  return site;
}

}  // namespace gpuwatch_test

namespace gpuwatch {
namespace {

constexpr const char kFixtureFunction[] =
    "gpuwatch_fixture::CaptureInLibrary(int (*)(unsigned long*, int, int), unsigned long*, int, "
    "int*)";

uintptr_t LoadBiasOf(uintptr_t pc) {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(pc),  // NOLINT(performance-no-int-to-ptr)
              &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return 0;
  }
  return map->l_addr;
}

TEST(SymbolizerTest, UsesLibdw) {
  Symbolizer symbolizer;
  EXPECT_EQ(symbolizer.backend(), SymbolizerBackend::kLibdw);
  EXPECT_STREQ(SymbolizerBackendName(symbolizer.backend()), "libdw");
}

TEST(SymbolizerTest, KnownFunctionInExecutable) {
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  ASSERT_GE(site.n, 2);
  Symbolizer symbolizer;
  const Frame& frame = symbolizer.Symbolize(site.pcs[0]);
  EXPECT_EQ(frame.pc, site.pcs[0]);
  EXPECT_EQ(frame.function, "gpuwatch_test::KnownFunction(int)");
  EXPECT_EQ(Basename(frame.file), "symbolizer_test.cc");
  EXPECT_EQ(frame.line, site.line);
  EXPECT_EQ(Basename(frame.module), "symbolizer_test");
  EXPECT_EQ(frame.offset, site.pcs[0] - LoadBiasOf(site.pcs[0]));
  EXPECT_FALSE(frame.inlined);

  // The next frame is this test body.
  const Frame& caller = symbolizer.Symbolize(site.pcs[1]);
  EXPECT_NE(caller.function.find("KnownFunctionInExecutable"), std::string::npos)
      << caller.function;
  EXPECT_EQ(Basename(caller.file), "symbolizer_test.cc");
}

TEST(SymbolizerTest, FrameInSharedLibrary) {
  uintptr_t pcs[32];
  int line = 0;
  const int n = gpuwatch_fixture::CaptureInLibrary(&CaptureStack, pcs, 32, &line);
  ASSERT_GE(n, 2);
  Symbolizer symbolizer;
  const Frame& frame = symbolizer.Symbolize(pcs[0]);
  EXPECT_EQ(frame.function, kFixtureFunction);
  EXPECT_EQ(Basename(frame.file), "fixture_lib.cc");
  EXPECT_EQ(frame.line, line);
  EXPECT_EQ(Basename(frame.module), "libgpuwatch_test_fixture.so");
  EXPECT_EQ(frame.offset, pcs[0] - LoadBiasOf(pcs[0]));
  EXPECT_LT(frame.offset, frame.pc);  // a shared object's bias is not 0
}

// `frames`: the fixture's inlined function `inner` at `inner_line`, then the
// function it was inlined into, whose name starts with `outer`, at `call_line`.
void ExpectInlinedInto(std::span<const Frame> frames, const char* inner, int inner_line,
                       const char* outer, int call_line) {
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_NE(frames[0].function.find(inner), std::string::npos) << frames[0].function;
  EXPECT_EQ(Basename(frames[0].file), "fixture_lib.cc");
  EXPECT_EQ(frames[0].line, inner_line);
  EXPECT_FALSE(frames[1].inlined);
  EXPECT_EQ(frames[1].function.rfind(outer, 0), 0u) << frames[1].function;
  EXPECT_EQ(Basename(frames[1].file), "fixture_lib.cc");
  EXPECT_EQ(frames[1].line, call_line);
}

TEST(SymbolizerTest, InlinedFramesAreExpanded) {
  uintptr_t pcs[32];
  int inner_line = 0;
  int call_line = 0;
  const int n =
      gpuwatch_fixture::CaptureThroughInline(&CaptureStack, pcs, 32, &inner_line, &call_line);
  ASSERT_GE(n, 2);
  Symbolizer symbolizer;
  const std::span<const Frame> frames = symbolizer.SymbolizeAll(pcs[0]);
  ASSERT_NO_FATAL_FAILURE(ExpectInlinedInto(frames, "InlinedCapture", inner_line,
                                            "gpuwatch_fixture::CaptureThroughInline(", call_line));
  EXPECT_EQ(frames[0].pc, frames[1].pc);
  EXPECT_EQ(Basename(frames[1].module), "libgpuwatch_test_fixture.so");

  // Without expansion: one frame named after the containing function.
  Symbolizer flat(SymbolizerOptions{.expand_inlines = false});
  ASSERT_EQ(flat.SymbolizeAll(pcs[0]).size(), 1u);
  EXPECT_EQ(flat.Symbolize(pcs[0]).function, frames[1].function);
}

// A function whose unlikely branch GCC moved into a .cold part has no
// DW_AT_low_pc but DW_AT_ranges: the unit's index of functions still holds
// it, so a call inlined in that part is expanded as in one piece.
TEST(SymbolizerTest, AnInlinedCallInAFunctionsColdPartIsExpanded) {
  uintptr_t pcs[32];
  int inner_line = 0;
  int call_line = 0;
  const int n = gpuwatch_fixture::CaptureInColdPart(&CaptureStack, pcs, 32, &inner_line, &call_line,
                                                    /*rare=*/1);
  ASSERT_GE(n, 2);
  Symbolizer symbolizer;
  const std::span<const Frame> frames = symbolizer.SymbolizeAll(pcs[0]);
  ASSERT_NO_FATAL_FAILURE(ExpectInlinedInto(frames, "InlinedColdCapture", inner_line,
                                            "gpuwatch_fixture::CaptureInColdPart(", call_line));
  // Named by the symbol table: the cold part's own symbol (the split happened).
  EXPECT_NE(frames[1].function.find("[clone .cold]"), std::string::npos) << frames[1].function;
}

TEST(SymbolizerTest, LibraryLoadedAfterTheSessionStarted) {
  Symbolizer symbolizer;
  // Touch the session before the dlopen so that its module list is old.
  uintptr_t here[4];
  ASSERT_GT(CaptureStack(here, 4, 0), 0);
  symbolizer.Symbolize(here[0]);

  void* handle = dlopen(GPUWATCH_FIXTURE_DL_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto* capture = reinterpret_cast<decltype(&gpuwatch_fixture_capture)>(
      dlsym(handle, "gpuwatch_fixture_capture"));
  ASSERT_NE(capture, nullptr);
  uintptr_t pcs[8];
  int line = 0;
  ASSERT_GT(capture(&CaptureStack, pcs, 8, &line), 0);
  const Frame& frame = symbolizer.Symbolize(pcs[0]);
  EXPECT_EQ(frame.function, "gpuwatch_fixture_capture");
  EXPECT_EQ(frame.line, line);
  EXPECT_EQ(Basename(frame.module), "libgpuwatch_test_fixture_dl.so");
  // Not closed: the symbolizer's cache and libdw may still refer to it.
}

TEST(SymbolizerTest, CachesPerPc) {
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  Symbolizer symbolizer;
  const Frame& a = symbolizer.Symbolize(site.pcs[0]);
  const size_t size = symbolizer.cache_size();
  const Frame& b = symbolizer.Symbolize(site.pcs[0]);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(symbolizer.cache_size(), size);
  // An exact lookup is cached apart and does not subtract 1.
  const Frame& exact = symbolizer.Symbolize(site.pcs[0], /*is_return_address=*/false);
  EXPECT_EQ(exact.pc, site.pcs[0]);
  EXPECT_EQ(exact.line, site.line + 2);  // the line after the call, "site.n += x"
  EXPECT_EQ(symbolizer.cache_size(), size + 1);
}

TEST(SymbolizerTest, SymbolizesWholeStack) {
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  Symbolizer symbolizer;
  const std::vector<Frame> frames =
      symbolizer.SymbolizeStack(std::span<const uintptr_t>(site.pcs, site.n));
  ASSERT_GE(frames.size(), static_cast<size_t>(site.n));
  EXPECT_EQ(frames[0].function, "gpuwatch_test::KnownFunction(int)");
  // gtest and libc frames resolve to their modules.
  const bool has_libc = std::any_of(frames.begin(), frames.end(), [](const Frame& f) {
    return Basename(f.module).rfind("libc.so", 0) == 0;
  });
  EXPECT_TRUE(has_libc);
}

// The frames below main are named from the symbol table alone: no file:line
// even where libc's debug file is installed (libdw would inflate all of it
// for them). __libc_start_main is exported, so every machine names it.
TEST(SymbolizerTest, StartupFramesHaveNamesAndNoLines) {
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  Symbolizer symbolizer;
  const std::vector<Frame> frames =
      symbolizer.SymbolizeStack(std::span<const uintptr_t>(site.pcs, site.n));
  int startup = 0;
  for (const Frame& f : frames) {
    if (!IsStartupFunction(f.function, f.module)) continue;
    ++startup;
    EXPECT_FALSE(f.module.empty()) << f.function;
    EXPECT_TRUE(f.file.empty()) << f.function << " " << f.file;
    EXPECT_EQ(f.line, 0) << f.function;
    EXPECT_FALSE(f.inlined) << f.function;
  }
  EXPECT_GE(startup, 1);
  // The program's own frames keep their lines.
  EXPECT_EQ(frames[0].line, site.line);
}

// libc's start-up frames are named in one pass over its symbol table, not
// by reading and sorting the whole table (from its debug file, where one is
// installed): with the same names the whole table gives.
TEST(SymbolizerTest, LibcStartupFramesAreNamedWithoutItsWholeTable) {
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  Symbolizer whole;
  if (whole.backend() != SymbolizerBackend::kLibdw) GTEST_SKIP() << "no libdw";
  // A frame of libc's that is no start-up frame reads its whole table.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  const auto getpid_pc = reinterpret_cast<uintptr_t>(dlsym(libc, "getpid"));
  dlclose(libc);
  ASSERT_NE(getpid_pc, 0u);
  EXPECT_NE(whole.Symbolize(getpid_pc + 1, /*is_return_address=*/false).function, "");
  EXPECT_EQ(whole.symbol_tables_read(), 1u);
  std::vector<uintptr_t> startup;
  std::vector<std::string> names;
  for (int i = 0; i < site.n; ++i) {
    const Frame& f = whole.Symbolize(site.pcs[i]);
    if (Basename(f.module).rfind("libc.so", 0) != 0 || !IsStartupFunction(f.function, f.module))
      continue;
    startup.push_back(site.pcs[i]);
    names.push_back(f.function);
  }
  ASSERT_FALSE(startup.empty());  // __libc_start_main at least
  Symbolizer once;
  for (size_t i = 0; i < startup.size(); ++i) {
    const Frame& f = once.Symbolize(startup[i]);
    EXPECT_EQ(f.function, names[i]);
    EXPECT_EQ(Basename(f.module).rfind("libc.so", 0), 0u) << f.module;
    EXPECT_TRUE(f.file.empty()) << f.file;
    EXPECT_EQ(f.line, 0);
  }
  EXPECT_EQ(once.symbol_tables_read(), 0u);
  // One pass for all of them (glibc 2.34 and later: __libc_start_call_main
  // and __libc_start_main): the first pass keeps the symbols around its
  // frame, and the next frame is named from those.
  EXPECT_EQ(once.symbol_passes(), 1u);

  // What the kept symbols answer is what the whole table answers, at every
  // address of a start-up function around the first frame (a fresh session
  // each: one pass, then the address from what it kept).
  int probed = 0;
  for (uintptr_t pc = startup[0] - 2048; pc < startup[0] + 2048; pc += 16) {
    const Frame& expected = whole.Symbolize(pc, /*is_return_address=*/false);
    if (!IsStartupFunction(expected.function, expected.module)) continue;
    Symbolizer fresh;
    fresh.Symbolize(startup[0]);
    EXPECT_EQ(fresh.Symbolize(pc, /*is_return_address=*/false).function, expected.function)
        << std::hex << pc - startup[0];
    EXPECT_EQ(fresh.symbol_tables_read(), 0u);
    ++probed;
  }
  EXPECT_GE(probed, 2);
}

// A thread's stack ends in libc's start_thread and clone3, which its table
// names __clone3 (an alias at the same address, listed first): named from
// the table alone too, never with a line of libc's (its debug file would be
// inflated whole for it).
TEST(SymbolizerTest, AThreadsStartupFramesHaveNamesAndNoLines) {
  uintptr_t pcs[32];
  int n = 0;
  std::thread([&pcs, &n] { n = CaptureStack(pcs, 32, 0); }).join();
  ASSERT_GT(n, 2);
  Symbolizer symbolizer;
  if (symbolizer.backend() != SymbolizerBackend::kLibdw) GTEST_SKIP() << "no libdw";
  int libc = 0;
  for (int i = n - 1; i >= 0; --i) {  // from the bottom: libc's frames first
    const Frame& f = symbolizer.Symbolize(pcs[i]);
    if (Basename(f.module).rfind("libc.so", 0) != 0) break;
    ++libc;
    EXPECT_TRUE(IsStartupFunction(f.function, f.module)) << f.function;
    EXPECT_TRUE(f.file.empty()) << f.function << " " << f.file;
    EXPECT_EQ(f.line, 0) << f.function;
  }
  EXPECT_GE(libc, 1);
}

TEST(SymbolizerTest, UnknownPcIsHarmless) {
  Symbolizer symbolizer;
  const Frame& frame = symbolizer.Symbolize(0x10);
  EXPECT_EQ(frame.pc, 0x10u);
  EXPECT_TRUE(frame.module.empty());
  EXPECT_TRUE(frame.function.empty());
  EXPECT_EQ(frame.line, 0);
  EXPECT_EQ(symbolizer.Symbolize(0).pc, 0u);
}

TEST(SymbolizerTest, DladdrFallback) {
  Symbolizer symbolizer(SymbolizerOptions{.force_dladdr = true});
  EXPECT_EQ(symbolizer.backend(), SymbolizerBackend::kDladdr);
  uintptr_t pcs[32];
  int line = 0;
  ASSERT_GE(gpuwatch_fixture::CaptureInLibrary(&CaptureStack, pcs, 32, &line), 2);
  const Frame& frame = symbolizer.Symbolize(pcs[0]);
  EXPECT_EQ(frame.function, kFixtureFunction);  // exported, so dladdr sees it
  EXPECT_EQ(Basename(frame.module), "libgpuwatch_test_fixture.so");
  EXPECT_EQ(frame.offset, pcs[0] - LoadBiasOf(pcs[0]));
  EXPECT_TRUE(frame.file.empty());
  EXPECT_EQ(frame.line, 0);

  // A hidden function of the executable: module known, name not.
  const gpuwatch_test::Site site = gpuwatch_test::KnownFunction(0);
  const Frame& exe = symbolizer.Symbolize(site.pcs[0]);
  EXPECT_EQ(Basename(exe.module), "symbolizer_test");
  EXPECT_EQ(exe.offset, site.pcs[0] - LoadBiasOf(site.pcs[0]));
}

TEST(SymbolizerTest, MissingLibdwWarnsOnceAndFallsBack) {
  testing::internal::CaptureStderr();
  Symbolizer symbolizer(SymbolizerOptions{.libdw_soname = "libgpuwatch-no-such-dw.so.1"});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(symbolizer.backend(), SymbolizerBackend::kDladdr);
  EXPECT_EQ(err.rfind("gpuwatch: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  uintptr_t pcs[32];
  int line = 0;
  ASSERT_GE(gpuwatch_fixture::CaptureInLibrary(&CaptureStack, pcs, 32, &line), 2);
  EXPECT_EQ(symbolizer.Symbolize(pcs[0]).function, kFixtureFunction);
}

// --- Trimming -----------------------------------------------------------------

Frame MakeFrame(std::string function, std::string module) {
  Frame frame;
  frame.function = std::move(function);
  frame.module = std::move(module);
  return frame;
}

std::vector<std::string> Functions(const std::vector<Frame>& frames) {
  std::vector<std::string> names;
  names.reserve(frames.size());
  for (const Frame& f : frames) names.push_back(f.function);
  return names;
}

TEST(TrimTest, SharedCudartStack) {
  std::vector<Frame> frames = {
      MakeFrame("gpuwatch::CaptureStack(unsigned long*, int, int)", "/opt/gw/libgpuwatch.so"),
      MakeFrame("gpuwatch::OnCallback()", "/opt/gw/libgpuwatch.so"),
      MakeFrame("", "/usr/local/cuda/lib64/libcupti.so.13"),
      MakeFrame("", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
      MakeFrame("", "/usr/local/cuda/lib64/libcudart.so.13"),
      MakeFrame("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13"),
      MakeFrame("Model::Allocate(unsigned long)", "/home/u/train"),
      MakeFrame("main", "/home/u/train"),
  };
  EXPECT_EQ(TrimTop(&frames, IsToolFrame), 6u);
  EXPECT_EQ(Functions(frames),
            (std::vector<std::string>{"Model::Allocate(unsigned long)", "main"}));
}

TEST(TrimTest, StaticCudartStack) {
  std::vector<Frame> frames = {
      MakeFrame("", "/usr/local/cuda/lib64/libcupti.so.13"),
      MakeFrame("cuMemAlloc_v2", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
      MakeFrame("__cudart1234", "/home/u/app"),
      MakeFrame("cudart::cudaApiMalloc(void**, unsigned long)", "/home/u/app"),
      MakeFrame("cudaMalloc", "/home/u/app"),
      MakeFrame("cudaish_helper()", "/home/u/app"),
      MakeFrame("cudaMalloc", "/home/u/app"),  // below the user frame: kept
  };
  EXPECT_EQ(TrimTop(&frames, IsToolFrame), 5u);
  EXPECT_EQ(Functions(frames), (std::vector<std::string>{"cudaish_helper()", "cudaMalloc"}));
}

// The CUDA samples name their own functions cudaGraphsManual and the like:
// defined in a source file, they are the program's, not the runtime's.
TEST(TrimTest, KeepsTheProgramsOwnCudaNamedFunctions) {
  Frame runtime = MakeFrame("cudaMemcpyAsync", "/home/u/simpleCudaGraphs");  // no line table
  Frame wrapper =
      MakeFrame("cudaError cudaMalloc<float>(float**, unsigned long)", "/home/u/simpleCudaGraphs");
  wrapper.file = "/usr/local/cuda/include/cuda_runtime.h";  // an inline wrapper
  Frame own =
      MakeFrame("cudaGraphsManual(float*, float*, float*, int)", "/home/u/simpleCudaGraphs");
  own.file = "/home/u/samples/simpleCudaGraphs.cu";
  Frame driver_named = MakeFrame("cuBlasHelper()", "/home/u/app");
  driver_named.file = "helpers.cpp";
  EXPECT_TRUE(IsCudaInternalFrame(runtime));
  EXPECT_TRUE(IsCudaInternalFrame(wrapper));
  EXPECT_FALSE(IsCudaInternalFrame(own));
  EXPECT_FALSE(IsCudaInternalFrame(driver_named));
  std::vector<Frame> frames = {MakeFrame("", "/usr/local/cuda/lib64/libcupti.so.13"), runtime, own,
                               MakeFrame("main", "/home/u/simpleCudaGraphs")};
  EXPECT_EQ(TrimTop(&frames, IsToolFrame), 2u);
  EXPECT_EQ(frames[0].function, own.function);
}

TEST(TrimTest, KeepsTheLastFrame) {
  std::vector<Frame> frames = {MakeFrame("gpuwatch::Foo()", ""), MakeFrame("cudaFree", "")};
  EXPECT_EQ(TrimTop(&frames, IsToolFrame), 1u);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "cudaFree");
  std::vector<Frame> empty;
  EXPECT_EQ(TrimTop(&empty, IsToolFrame), 0u);
}

TEST(TrimTest, Predicates) {
  EXPECT_TRUE(IsGpuwatchFrame(MakeFrame("", "/x/libgpuwatch.so")));
  EXPECT_TRUE(IsGpuwatchFrame(MakeFrame("gpuwatch::internal::X()", "/x/app")));
  EXPECT_FALSE(IsGpuwatchFrame(MakeFrame("mygpuwatch::X()", "/x/app")));
  EXPECT_TRUE(IsCudaInternalFrame(MakeFrame("", "libcuda.so")));
  EXPECT_TRUE(IsCudaInternalFrame(MakeFrame("cuLaunchKernel", "/x/app")));
  EXPECT_FALSE(IsCudaInternalFrame(MakeFrame("cuda", "/x/app")));
  EXPECT_FALSE(IsCudaInternalFrame(MakeFrame("cute::copy()", "/x/app")));
  EXPECT_FALSE(IsCudaInternalFrame(MakeFrame("", "/x/libcudnn.so.9")));
  EXPECT_TRUE(IsStartupFunction("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsStartupFunction("__libc_start_main", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsStartupFunction("_start", "/x/app"));
  EXPECT_TRUE(IsStartupFunction("start_thread", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsStartupFunction("clone3", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsStartupFunction("__clone3", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsStartupFunction("__clone", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_FALSE(IsStartupFunction("start_thread", "/x/app"));  // the program's own
  EXPECT_FALSE(IsStartupFunction("main", "/x/app"));
  EXPECT_FALSE(IsStartupFunction("qsort", "/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_EQ(Basename("/a/b/c.so"), "c.so");
  EXPECT_EQ(Basename("c.so"), "c.so");
}

}  // namespace
}  // namespace gpuwatch
