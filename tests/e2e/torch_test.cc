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
#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {

// How gtest prints the parameter (in ctest's test names): the attach mode, not its bytes.
void PrintTo(Attach how, std::ostream* os) {
  *os << (how == Attach::kRun       ? "gpuwatch run"
          : how == Attach::kPreload ? "LD_PRELOAD"
                                    : "injection");
}

namespace {

using nlohmann::json;

const std::string kSegmentsScript = kSourceDir + "/tests/e2e/programs/torch_segments.py";
const std::string kAllocatorsScript = kSourceDir + "/tests/e2e/programs/torch_allocators.py";

// "torch_allocators.py:N" for the line marked `# TENSOR:name`.
std::string TensorLine(const std::string& name) {
  return "torch_allocators.py:" + std::to_string(LineOf(kAllocatorsScript, "# TENSOR:" + name));
}

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
  ProcessResult Run(const ScopedTempDir& dir, const std::string& script, const std::string& out,
                    const std::map<std::string, std::string>& extra = {},
                    const std::vector<std::string>& args = {}) const {
    std::map<std::string, std::string> env = SimEnv();
    env["PYTHONUNBUFFERED"] = "1";
    env["PYTHONPATH"] = kSourceDir + "/python";  // the gpuwatch package (gpuwatch run's too)
    env.insert(extra.begin(), extra.end());
    std::vector<std::string> argv = {python_, script};
    argv.insert(argv.end(), args.begin(), args.end());
    AttachTo(GetParam(), out, &argv, &env);
    return RunTorchProcess(argv, env, dir.path());
  }

  // Runs torch_allocators.py with `extra` in its environment; what it printed in *printed and
  // the device leaks section of the snapshot it took while its tensors were live in *device.
  void RunAllocators(const std::map<std::string, std::string>& extra, std::string* printed,
                     json* device) const {
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r = Run(dir, kAllocatorsScript, out, extra);
    *printed = r.out;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_NE(r.out.find("torch_allocators: done"), std::string::npos) << r.out << r.err;
    EXPECT_EQ(Printed(r.out, "attached"), 1) << r.out;
    EXPECT_EQ(Printed(r.out, "allocated"), 16 << 20) << r.out;
    ASSERT_EQ(Printed(r.out, "snapshot"), 1) << r.out;
    *device = ReadReport(out + ".snapshot-1")["leaks"]["device"];
  }

  std::string python_;
};

// The default caching allocator: the segment PyTorch reserves for the first tensor is the only
// device memory live at exit, gpuwatch counts exactly memory_reserved() bytes, and the site is
// the script's line that created the tensor, in the caching-allocator category.
TEST_P(TorchTest, CachingAllocatorSegmentIsReservedBytesAtTheTensorLine) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunTorchProcess({python_, kSegmentsScript},
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

// While two tensors (4 MiB and 12 MiB) are live under the default caching allocator, gpuwatch's
// live device bytes (gpuwatch.live(), and a snapshot report) are memory_reserved(): one 20 MiB
// segment, made at the first tensor's line; the second fits in it.
TEST_P(TorchTest, CachingAllocatorLiveBytesAreReservedWhileTensorsLive) {
  std::string printed;
  json device;
  ASSERT_NO_FATAL_FAILURE(RunAllocators({}, &printed, &device));
  EXPECT_EQ(Printed(printed, "reserved"), 20 << 20) << printed;
  EXPECT_EQ(Printed(printed, "live"), 20 << 20) << printed;
  EXPECT_EQ(device["bytes"], 20 << 20) << device.dump(1);
  EXPECT_EQ(device["count"], 1) << device.dump(1);
  const json site = SiteAt(device, TensorLine("a"));
  ASSERT_FALSE(site.is_null()) << device.dump(1);
  EXPECT_EQ(site["bytes"], 20 << 20);
  EXPECT_EQ(site["category"], "caching-allocator");
}

// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: every tensor is a cudaMallocAsync of its own,
// so gpuwatch's live bytes are memory_allocated(), one site per tensor line, and no site is put
// in the caching-allocator category (an empty category: gpuwatch turned it off).
TEST_P(TorchTest, AsyncBackendLiveBytesAreAllocatedOneSitePerTensorLine) {
  std::string printed;
  json device;
  ASSERT_NO_FATAL_FAILURE(
      RunAllocators({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}}, &printed, &device));
  EXPECT_EQ(Printed(printed, "reserved"), 16 << 20) << printed;
  EXPECT_EQ(Printed(printed, "live"), 16 << 20) << printed;
  EXPECT_EQ(device["bytes"], 16 << 20) << device.dump(1);
  EXPECT_EQ(device["count"], 2) << device.dump(1);
  EXPECT_EQ(device["leaked_bytes"], 16 << 20) << device.dump(1);
  const json a = SiteAt(device, TensorLine("a"));
  const json b = SiteAt(device, TensorLine("b"));
  ASSERT_FALSE(a.is_null()) << device.dump(1);
  ASSERT_FALSE(b.is_null()) << device.dump(1);
  EXPECT_EQ(a["bytes"], 4 << 20);
  EXPECT_EQ(b["bytes"], 12 << 20);
  EXPECT_EQ(a["category"], "");
  EXPECT_EQ(b["category"], "");
}

// torch_fault.py's multiplication kernel faults (GWSIM_FAULT_KERNEL=MulFunctor): PyTorch raises
// at the copy back to the host, and the report and the summary name that Python line, and the
// kernel with the line that launched it.
TEST_P(TorchTest, AKernelFaultIsReportedAtItsPythonLines) {
  const std::string script = kSourceDir + "/tests/e2e/programs/torch_fault.py";
  const auto line = [&script](const std::string& marker) {
    return "torch_fault.py:" + std::to_string(LineOf(script, marker));
  };
  ScopedTempDir dir;
  const std::string out = dir.path() + "/fault.json";
  const ProcessResult r = Run(dir, script, out, {{"GWSIM_FAULT_KERNEL", "MulFunctor"}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "launched\n");
  EXPECT_NE(r.err.find("CUDA error: an illegal memory access was encountered"), std::string::npos)
      << r.err;
  const json report = ReadReport(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& sticky = report["cuda_errors"]["sticky"];
  ASSERT_EQ(sticky.size(), 1u) << report["cuda_errors"].dump(1);
  EXPECT_EQ(sticky[0]["name"], "cudaErrorIllegalAddress");
  EXPECT_EQ(sticky[0]["location"], line("# SURFACES"));
  ASSERT_EQ(sticky[0]["kernels"].size(), 1u) << sticky.dump(1);
  const json& kernel = sticky[0]["kernels"][0];
  EXPECT_NE(kernel["kernel"].get<std::string>().find("MulFunctor<float>"), std::string::npos);
  EXPECT_EQ(kernel["location"], line("# LAUNCH:mul"));
  // The exit summary leads with the error (under injection a line at attach comes first).
  const size_t failed_at =
      r.err.find("gpuwatch: the run failed: CUDA error cudaErrorIllegalAddress (700)");
  ASSERT_NE(failed_at, std::string::npos) << r.err;
  EXPECT_LT(failed_at, r.err.find(" device allocation")) << r.err;
  EXPECT_NE(LineWith(r.err, {"gpuwatch: the run failed", " at " + line("# SURFACES")}), "")
      << r.err;
  EXPECT_NE(LineWith(r.err, {"MulFunctor", "launched at " + line("# LAUNCH:mul")}), "") << r.err;
}

// examples/torch_leak.py as docs/pytorch.md runs it (`gpuwatch run`, --no-blas on the
// simulator): every line the page gives for its leak is checked here. With PyTorch's cache off
// the kept activations grow by 8 MiB per step at the torch.relu line of Model.forward (line 60),
// in no category; under the default caching allocator the segments grow
// instead, at the line whose request first found the cache empty (Elementwise.forward's
// repeat), kept on purpose (caching-allocator), and no other site is a suspect.
TEST_P(TorchTest, TorchLeakExampleGrowsAtTheLineOfTheKeptActivations) {
  if (GetParam() != Attach::kRun) GTEST_SKIP() << "the page runs the example with gpuwatch run";
  const std::string script = kSourceDir + "/examples/torch_leak.py";
  const auto line = [&script](const std::string& marker) {
    return "torch_leak.py:" + std::to_string(LineOf(script, marker));
  };
  ScopedTempDir dir;
  const std::string uncached = dir.path() + "/uncached.json";
  const ProcessResult r =
      Run(dir, script, uncached, {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}}, {"--no-blas"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("torch_leak: 20 steps, 20 activations kept"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("gpuwatch: growing: 1 site; most: +8.0 MiB per mark at " +
                       line("# 512 x 4096 floats") + " (8.0 MiB -> 160.0 MiB)"),
            std::string::npos)
      << r.err;
  const json growth = ReadReport(uncached)["growth"];
  ASSERT_EQ(growth["suspects"].size(), 1u) << growth.dump(1);
  const json& suspect = growth["suspects"][0];
  EXPECT_EQ(suspect["location"], line("# 512 x 4096 floats"));
  EXPECT_EQ(suspect["rate"], 8 << 20);
  EXPECT_EQ(suspect["first_bytes"], 8 << 20);
  EXPECT_EQ(suspect["last_bytes"], 160 << 20);
  EXPECT_EQ(suspect["category"], "");

  const std::string cached = dir.path() + "/cached.json";
  const ProcessResult c = Run(dir, script, cached, {}, {"--no-blas"});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  const json suspects = ReadReport(cached)["growth"]["suspects"];
  bool at_repeat = false;
  for (const json& s : suspects) {
    EXPECT_EQ(s["category"], "caching-allocator") << s.dump(1);
    at_repeat = at_repeat || s["location"] == line("x.repeat(1, repeats)");
  }
  EXPECT_TRUE(at_repeat) << suspects.dump(1);
}

INSTANTIATE_TEST_SUITE_P(Attach, TorchTest,
                         ::testing::Values(Attach::kRun, Attach::kPreload, Attach::kInjection),
                         AttachTestName);

}  // namespace
}  // namespace gpuwatch::testing
