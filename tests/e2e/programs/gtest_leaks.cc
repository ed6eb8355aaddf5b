// A GoogleTest binary with gpuwatch's leak listener (include/gpuwatch/gtest.h),
// run by tests/e2e/gates_test.cc under `gpuwatch run` and without gpuwatch. It
// links GoogleTest and the CUDA runtime (the simulator's), not libgpuwatch.
// Each test states what it does to device memory; GWTEST_MAX_LEAK sets the
// listener's limit (bytes, default 0), GWTEST_ALLOW_OFF (any value) makes a
// gpuwatch that does not record a warning, not a failure.
#include <cuda_runtime.h>
#include <gpuwatch/gtest.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace {

std::vector<void*>& Kept() {  // what the tests leak stays referenced
  static std::vector<void*> kept;
  return kept;
}

void* Allocate(size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);  // GTEST:allocate
  return p;
}

// Memory a library keeps on purpose: the suppressions file names it.
__attribute__((noinline)) void* KeptByLibrary(size_t bytes) { return Allocate(bytes); }

TEST(Leaks, Clean) { EXPECT_EQ(cudaFree(Allocate(4 << 20)), cudaSuccess); }

TEST(Leaks, OneMiB) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);  // GTEST:leak
  Kept().push_back(p);
}

TEST(Leaks, ThroughAHelper) {
  Kept().push_back(Allocate(512 << 10));  // GTEST:helper
}

TEST(Leaks, KeptByALibrary) { Kept().push_back(KeptByLibrary(3 << 20)); }

TEST(Leaks, FailsAndLeaks) {
  Kept().push_back(Allocate(1 << 20));
  FAIL() << "this test fails on its own";
}

// Weights shared by a suite: set up before its first test starts, not that
// test's leak; scratch a fixture frees in TearDown: not a leak either.
class Model : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { weights_ = Allocate(8 << 20); }
  static void TearDownTestSuite() { EXPECT_EQ(cudaFree(weights_), cudaSuccess); }
  void SetUp() override { scratch_ = Allocate(2 << 20); }
  void TearDown() override { EXPECT_EQ(cudaFree(scratch_), cudaSuccess); }

  static void* weights_;
  void* scratch_ = nullptr;
};
void* Model::weights_ = nullptr;

TEST_F(Model, First) { EXPECT_NE(weights_, nullptr); }
TEST_F(Model, Second) { EXPECT_NE(scratch_, nullptr); }

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* limit = std::getenv("GWTEST_MAX_LEAK");       // NOLINT(concurrency-mt-unsafe)
  const char* allow_off = std::getenv("GWTEST_ALLOW_OFF");  // NOLINT(concurrency-mt-unsafe)
  gpuwatch::AddLeakListener(limit != nullptr ? std::strtoull(limit, nullptr, 10) : 0, false,
                            allow_off != nullptr);
  return RUN_ALL_TESTS();
}
