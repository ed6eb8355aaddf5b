// gpuwatch's pytest plugin on a real PyTorch suite (issue 32): tests/e2e/programs/torch_pytest
// run by the interpreter GPUWATCH_TORCH_PYTHON names (scripts/torch-env.sh) under `gpuwatch run`
// on the CUDA simulator, with --gpuwatch --gpuwatch-max-leak=0, under PyTorch's default caching
// allocator and under backend:cudaMallocAsync. The test that keeps a tensor in a module-level
// list fails naming its line; the tests that free everything pass, though the caching allocator
// keeps their segments; limit_gpu_memory gates the peak. Without GPUWATCH_TORCH_PYTHON every
// test skips with one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/e2e/common.h"
#include "tests/e2e/pytest_output.h"

namespace gpuwatch::testing {
namespace {

const std::string kSuiteDir = kSourceDir + "/tests/e2e/programs/torch_pytest";

// "test_torch_suite.py:N" for the line marked `# TORCH_SUITE:marker`.
std::string SuiteLine(const std::string& marker) {
  return "test_torch_suite.py:" +
         std::to_string(LineOf(kSuiteDir + "/test_torch_suite.py", "# TORCH_SUITE:" + marker));
}

// The PYTORCH_CUDA_ALLOC_CONF each test runs under: "" is the default caching allocator.
class TorchPytest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
    const char* python = std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
    if (python == nullptr || *python == '\0' || access(python, X_OK) != 0) {
      GTEST_SKIP() << "GPUWATCH_TORCH_PYTHON is not set to an interpreter (scripts/torch-env.sh "
                      "makes the environment and prints its python)";
    }
    python_ = python;
    if (RunProcess({python_, "-c", "import pytest"}, {}, "/").exit_code != 0) {
      GTEST_SKIP() << python_ << " cannot import pytest (an environment made before "
                   << "scripts/torch-env.sh pinned pytest's own requirements: rerun it)";
    }
    // A copy: pytest writes next to the tests it runs.
    ASSERT_EQ(RunProcess({"cp", "-r", kSuiteDir, suite_}, {}, "/").exit_code, 0);
  }

  // pytest on the suite under `gpuwatch run`, which puts the plugin on PYTEST_PLUGINS; pytest's
  // output.
  ProcessResult RunSuite() const {
    std::map<std::string, std::string> env = PytestEnv();
    env["PYTORCH_CUDA_ALLOC_CONF"] = GetParam();
    return RunTorchProcess(
        {kCli, "run", "--no-summary", "-o", dir_.path() + "/r.json", "--", python_, "-m", "pytest",
         "-p", "no:cacheprovider", "-p", "no:memray", "-rf", "--gpuwatch", "--gpuwatch-max-leak=0"},
        env, suite_);
  }

  bool Caching() const { return GetParam().empty(); }

  std::string python_;
  ScopedTempDir dir_;
  const std::string suite_ = dir_.path() + "/suite";
};

// The test that keeps a 4 MiB tensor fails with its 4 MiB and its line, under both allocators:
// under the caching allocator the bytes are PyTorch's tensors' (memory_allocated()) and the line
// is that of the 20 MiB segment made for it (the plugin emptied the cache that the test before
// left, where the tensor would have fitted); under cudaMallocAsync they are the tensor's own
// allocation. Every other test passes its leak gate: the first frees its 32 MiB (kept in the
// cache under the default allocator, shown as kept), the third uses a module fixture's 4 MiB.
// limit_gpu_memory('8 MB') fails the test that needs 16 MiB, '24 MB' passes it.
TEST_P(TorchPytest, KeptTensorFailsAtItsLineFreedOnesPass) {
  const ProcessResult r = RunSuite();
  ASSERT_NE(r.out.find("collected 5 items"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string leak = SuiteLine("leak");
  const std::string head =
      "gpuwatch: test_torch_suite.py::test_keeps_a_tensor left 4.0 MiB of device memory live "
      "(4194304 bytes), more than 0 B allowed (--gpuwatch-max-leak)\n";
  if (Caching()) {
    EXPECT_EQ(Section(r.out, "test_keeps_a_tensor"),
              head +
                  "  4.0 MiB in PyTorch's tensors (torch.cuda.memory_allocated() grew by 4194304 "
                  "bytes), in the segments below\n"
                  "  20.0 MiB in 1 allocation at " +
                  leak +
                  " (test_keeps_a_tensor)\n"
                  "      (category caching-allocator)\n");
  } else {
    EXPECT_EQ(Section(r.out, "test_keeps_a_tensor"),
              head + "  4.0 MiB in 1 allocation at " + leak + " (test_keeps_a_tensor)\n");
  }
  EXPECT_EQ(Section(r.out, "test_needs_more_than_its_limit"),
            "gpuwatch: test_torch_suite.py::test_needs_more_than_its_limit needed 16.0 MiB of "
            "device memory at its peak (16777216 bytes above what was live when its call began), "
            "more than 8.0 MiB allowed (@pytest.mark.limit_gpu_memory('8 MB'))\n");
  EXPECT_EQ(LinesStartingWith(r.out, "FAILED"),
            (std::vector<std::string>{
                "FAILED test_torch_suite.py::test_keeps_a_tensor - gpuwatch: left 4.0 MiB of "
                "device memory live, over 0 B; largest at " +
                    leak + " (test_keeps_a_tensor)",
                "FAILED test_torch_suite.py::test_needs_more_than_its_limit - gpuwatch: peak 16.0 "
                "MiB of device memory, over 8.0 MiB"}));
  // The summary: what each test left live and needed, and what the cache kept of it.
  const std::string kept32 = Caching() ? "  (+32.0 MiB kept)" : "";
  const std::string kept20 = Caching() ? "  (+20.0 MiB kept)" : "";
  const std::string kept16 = Caching() ? "  (+16.0 MiB kept)" : "";
  EXPECT_EQ(Between(r.out, "gpuwatch: device memory per test", "="),
            " left live        peak  test\n"
            "   4.0 MiB     4.0 MiB  test_torch_suite.py::test_keeps_a_tensor" +
                kept20 +
                "  FAILED\n"
                "       0 B    32.0 MiB  test_torch_suite.py::test_frees_everything" +
                kept32 +
                "\n"
                "       0 B    16.0 MiB  test_torch_suite.py::test_needs_less_than_its_limit" +
                kept16 +
                "\n"
                "       0 B    16.0 MiB  test_torch_suite.py::test_needs_more_than_its_limit" +
                kept16 +
                "  FAILED\n"
                "       0 B     4.0 MiB  test_torch_suite.py::test_uses_the_module_weights\n");
  EXPECT_EQ(Outcome(r.out), "2 failed, 3 passed");
}

INSTANTIATE_TEST_SUITE_P(Allocator, TorchPytest,
                         ::testing::Values(std::string(), std::string("backend:cudaMallocAsync")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("Caching")
                                                     : std::string("CudaMallocAsync");
                         });

}  // namespace
}  // namespace gpuwatch::testing
