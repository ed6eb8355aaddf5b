// End-to-end tests with real PyTorch: a CUDA build of torch (scripts/torch-env.sh) runs
// tests/e2e/programs/torch_*.py on the CUDA simulator under libgpuwatch.so, and gpuwatch's
// report must agree with PyTorch's own counters, which the script prints. Each test runs under
// `gpuwatch run`, LD_PRELOAD and the driver's injection.
//
// The interpreter is the one GPUWATCH_TORCH_PYTHON names (the last line scripts/torch-env.sh
// prints; .ci/run sets it). Without it, or when it cannot import torch, every test skips with
// one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

const std::string kSegmentsScript = kSourceDir + "/tests/e2e/programs/torch_segments.py";

// The value printed on the line "NAME VALUE" of `out`; -1 when there is none.
int64_t Printed(const std::string& out, const std::string& name) {
  const auto lines = LinesStartingWith(out, name + " ");
  if (lines.size() != 1) return -1;
  return std::stoll(lines[0].substr(name.size() + 1));
}

// Each test runs with gpuwatch attached by `gpuwatch run`, LD_PRELOAD and the driver's
// injection (CUDA_INJECTION64_PATH), which PyTorch's lazy CUDA initialisation reaches.
class TorchTest : public ::testing::TestWithParam<Attach> {
 protected:
  void SetUp() override {
    const char* python = std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
    if (python == nullptr || *python == '\0') {
      GTEST_SKIP() << "GPUWATCH_TORCH_PYTHON is not set (scripts/torch-env.sh makes the "
                      "environment and prints its python)";
    }
    python_ = python;
    if (access(python_.c_str(), X_OK) != 0) {
      GTEST_SKIP() << "GPUWATCH_TORCH_PYTHON=" << python_ << " is not an executable";
    }
  }

  // Runs `script` in `dir` on the simulator with gpuwatch attached as the parameter says; the
  // report goes to `out`.
  ProcessResult Run(const ScopedTempDir& dir, const std::string& script,
                    const std::string& out) const {
    std::map<std::string, std::string> env = SimEnv();
    env["PYTHONUNBUFFERED"] = "1";
    std::vector<std::string> argv = {python_, script};
    switch (GetParam()) {
      case Attach::kRun:
        argv.insert(argv.begin(), {kCli, "run", "-o", out, "--"});
        break;
      case Attach::kPreload:
        env["LD_PRELOAD"] = kLib;
        env["GPUWATCH_OUTPUT"] = out;
        break;
      case Attach::kInjection:
        env["CUDA_INJECTION64_PATH"] = kLib;
        env["NVTX_INJECTION64_PATH"] = kLib;
        env["GPUWATCH_OUTPUT"] = out;
        break;
    }
    return RunProcess(argv, env, dir.path());
  }

  std::string python_;
};

// The default caching allocator: the segment PyTorch reserves for the first tensor is the only
// device memory live at exit, gpuwatch counts exactly memory_reserved() bytes, and the site is
// the script's line that created the tensor, in the caching-allocator category.
TEST_P(TorchTest, CachingAllocatorSegmentIsReservedBytesAtTheTensorLine) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess({python_, kSegmentsScript},
                                     PreloadEnv(out, {{"PYTHONUNBUFFERED", "1"}}), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_NE(r.out.find("torch_segments: done"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(Printed(r.out, "available"), 1) << r.out;
  EXPECT_EQ(Printed(r.out, "copied"), 1 << 20) << r.out;
  const int64_t reserved = Printed(r.out, "reserved");
  // Two float tensors of 4 MiB share one 20 MiB segment (PyTorch's large-buffer rounding).
  EXPECT_EQ(reserved, 20 << 20) << r.out;
  EXPECT_EQ(Printed(r.out, "allocated"), 8 << 20) << r.out;

  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], reserved) << device.dump(1);
  EXPECT_EQ(device["count"], 1) << device.dump(1);
  const std::string location =
      "torch_segments.py:" + std::to_string(LineOf(kSegmentsScript, "# SEGMENT:zeros"));
  const json site = SiteAt(device, location);
  ASSERT_FALSE(site.is_null()) << "no site at " << location << "\n" << device.dump(1);
  EXPECT_EQ(site["bytes"], reserved);
  EXPECT_EQ(site["category"], "caching-allocator") << site.dump(1);
}

INSTANTIATE_TEST_SUITE_P(Attach, TorchTest,
                         ::testing::Values(Attach::kRun, Attach::kPreload, Attach::kInjection),
                         [](const ::testing::TestParamInfo<Attach>& info) {
                           switch (info.param) {
                             case Attach::kRun:
                               return "GpuwatchRun";
                             case Attach::kPreload:
                               return "Preload";
                             case Attach::kInjection:
                               return "Injection";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace gpuwatch::testing
