#include "libgpuwatch/analysis/suppressions.h"

#include "libgpuwatch/analysis/alloc_functions.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

namespace gpuwatch {
namespace {

TEST(MatchPattern, SubstringWildcardsAndAnchors) {
  EXPECT_TRUE(MatchPattern("AllocateHistory", "(anonymous namespace)::AllocateHistory()"));
  EXPECT_TRUE(MatchPattern("Alloc*History", "(anonymous namespace)::AllocateHistory()"));
  EXPECT_TRUE(MatchPattern("*", "anything"));
  EXPECT_FALSE(MatchPattern("AllocateHistory", "AllocateScratch"));
  EXPECT_TRUE(MatchPattern("^libcublas", "libcublas.so.13"));
  EXPECT_FALSE(MatchPattern("^libcublas", "/usr/lib/libcublas.so.13"));
  EXPECT_TRUE(MatchPattern("*/libcublas.so*", "/usr/lib/libcublas.so.13"));
  EXPECT_TRUE(MatchPattern(".cu$", "train.cu"));
  EXPECT_FALSE(MatchPattern(".cu$", "train.cuh"));
  EXPECT_TRUE(MatchPattern("^main$", "main"));
  EXPECT_FALSE(MatchPattern("^main$", "domain"));
  EXPECT_TRUE(MatchPattern("a*b*c", "xxaYYbZZcxx"));
  EXPECT_FALSE(MatchPattern("a*b*c", "xxaYYcZZbxx"));
  EXPECT_FALSE(MatchPattern("", "text"));
  EXPECT_FALSE(MatchPattern("x", ""));
}

TEST(Suppressions, ParsesRulesCommentsAndBlankLines) {
  Suppressions s;
  std::string error;
  ASSERT_TRUE(
      s.Parse("# comment\n\n  leak:Foo  \ngrowth: *cache*\r\nleak:^main$\n", "x.supp", &error))
      << error;
  EXPECT_EQ(s.size(), 3u);
  const std::vector<FrameView> frames = {{"ns::Foo(int)", "/src/a.cc", "/bin/app"},
                                         {"main", "/src/main.cc", "/bin/app"}};
  const Suppression* rule = s.Match(SuppressionKind::kLeak, frames);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->Text(), "leak:Foo");
  EXPECT_EQ(rule->origin, "x.supp:3");
  // growth: rules never suppress leaks, and the reverse.
  const std::vector<FrameView> cache = {{"Cache::Grow()", "/src/cache.cc", "/bin/app"}};
  EXPECT_EQ(s.Match(SuppressionKind::kLeak, cache), nullptr);
  ASSERT_NE(s.Match(SuppressionKind::kGrowth, cache), nullptr);
  EXPECT_EQ(s.Match(SuppressionKind::kGrowth, cache)->Text(), "growth:*cache*");
}

TEST(Suppressions, MatchesFunctionFileOrModuleOfAnyFrame) {
  Suppressions s;
  std::string error;
  ASSERT_TRUE(s.Parse("leak:third_party/\nleak:libfoo.so\n", "s", &error));
  const std::vector<FrameView> by_file = {{"f", "/src/app.cc", "/bin/app"},
                                          {"g", "/src/third_party/lib.cc", "/bin/app"}};
  EXPECT_NE(s.Match(SuppressionKind::kLeak, by_file), nullptr);
  const std::vector<FrameView> by_module = {{"", "", "/usr/lib/libfoo.so.1"}};
  EXPECT_NE(s.Match(SuppressionKind::kLeak, by_module), nullptr);
  const std::vector<FrameView> none = {{"main", "/src/app.cc", "/bin/app"}};
  EXPECT_EQ(s.Match(SuppressionKind::kLeak, none), nullptr);
}

TEST(Suppressions, ErrorsNameTheFileLineAndProblem) {
  std::string error;
  Suppressions a;
  EXPECT_FALSE(a.Parse("leak:ok\nleek:typo\n", "ci.supp", &error));
  EXPECT_EQ(error, "ci.supp:2: unknown suppression type \"leek\" (expected leak or growth)");
  Suppressions b;
  EXPECT_FALSE(b.Parse("\nAllocateHistory\n", "ci.supp", &error));
  EXPECT_EQ(error,
            "ci.supp:2: expected TYPE:PATTERN (e.g. leak:MyFunction), got \"AllocateHistory\"");
  Suppressions c;
  EXPECT_FALSE(c.Parse("leak:\n", "ci.supp", &error));
  EXPECT_EQ(error, "ci.supp:1: empty pattern");
  Suppressions d;
  EXPECT_FALSE(d.LoadFile("/nonexistent/gpuwatch.supp", &error));
  EXPECT_EQ(error,
            "cannot read suppressions file /nonexistent/gpuwatch.supp: No such file or directory");
}

TEST(Suppressions, LoadsAFile) {
  char path[] = "/tmp/gpuwatch-supp-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "leak:Foo\n";
  Suppressions s;
  std::string error;
  EXPECT_TRUE(s.LoadFile(path, &error)) << error;
  EXPECT_EQ(s.size(), 1u);
  unlink(path);
}

TEST(Categories, LibrariesThatKeepMemoryOnPurpose) {
  using V = std::vector<FrameView>;
  EXPECT_EQ(CategoryOf(V{{"cublasCreate_v2", "", "/usr/local/cuda/lib64/libcublas.so.13"},
                         {"main", "/src/app.cc", "/bin/app"}}),
            "cublas");
  EXPECT_EQ(CategoryOf(V{{"", "", "/opt/lib/libcublasLt.so.13"}}), "cublas");
  EXPECT_EQ(CategoryOf(V{{"", "", "/usr/lib/libcudnn_ops.so.9"}}), "cudnn");
  EXPECT_EQ(CategoryOf(V{{"", "", "/usr/lib/libnccl.so.2"}}), "nccl");
  EXPECT_EQ(CategoryOf(V{{"cudart::globalState::init()", "", "/bin/app"}}), "cuda-runtime");
  EXPECT_EQ(CategoryOf(V{{"", "", "/usr/lib/libcufft.so.12"}}), "cuda-libraries");
  EXPECT_EQ(CategoryOf(V{{"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
                          "signed char, unsigned long, CUstream_st*)",
                          "", "/site-packages/torch/lib/libc10_cuda.so"}}),
            "caching-allocator");
  EXPECT_EQ(CategoryOf(V{{"tensorflow::BFCAllocator::AllocateRaw(unsigned long, unsigned long)", "",
                          "/x/libtensorflow_framework.so.2"}}),
            "caching-allocator");
  // The innermost frame in a category names it.
  EXPECT_EQ(CategoryOf(V{{"", "", "/usr/lib/libcublas.so.13"},
                         {"at::cuda::blas::gemm()", "", "/x/libc10_cuda.so"}}),
            "cublas");
  // The user's own code is in none, even when its names look like CUDA's.
  EXPECT_EQ(CategoryOf(V{{"cudartHelper()", "/src/app.cc", "/bin/app"},
                         {"main", "/src/app.cc", "/bin/app"}}),
            "");
  EXPECT_EQ(CategoryOf(V{}), "");
}

// --alloc-fn names: the whole function, with or without its parameters;
// `*` globs; never a part of a longer name.
TEST(AllocFunctions, MatchWholeNamesWithOrWithoutParameters) {
  const AllocFunctions fns({"Alloc", "ns::Pool::Get*", "Make(int)", ""});
  EXPECT_TRUE(fns.Matches("Alloc(unsigned long)"));
  EXPECT_TRUE(fns.Matches("Alloc"));
  EXPECT_FALSE(fns.Matches("AllocScratch(unsigned long)"));
  EXPECT_FALSE(fns.Matches("(anonymous namespace)::Alloc(unsigned long)"));
  EXPECT_FALSE(fns.Matches("cudaMalloc"));
  EXPECT_TRUE(fns.Matches("ns::Pool::Get(unsigned long) const"));
  EXPECT_TRUE(fns.Matches("ns::Pool::GetBlock(std::function<void (int)>)"));
  EXPECT_TRUE(fns.Matches("Make(int)"));
  EXPECT_FALSE(fns.Matches("Make(long)"));
  EXPECT_FALSE(fns.Matches(""));
  EXPECT_TRUE(AllocFunctions({"*::Alloc"}).Matches("(anonymous namespace)::Alloc(unsigned long)"));
  EXPECT_TRUE(AllocFunctions().empty());
  EXPECT_EQ(FunctionNameOf("a::B::f(std::function<void (int)>) const"), "a::B::f");
  EXPECT_EQ(FunctionNameOf("main"), "main");
}

}  // namespace
}  // namespace gpuwatch
