// End-to-end tests of `gpuwatch run --torch-blocks` (docs/pytorch.md, "PyTorch's blocks in the
// report"): real PyTorch (GPUWATCH_TORCH_PYTHON, as tests/e2e/torch_test.cc) runs
// tests/e2e/programs/torch_blocks.py on the CUDA simulator, and the report's torch_blocks section
// must name each tensor's line with its exact block, PyTorch's allocated and reserved bytes, and
// the gpuwatch site of the segment; a Python program that never imports torch
// (torch_blocks_none.py, the machine's python3) runs as without the option, and
// gpuwatch_torch_blocks() refuses bad input.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

// tests/e2e/programs/NAME in the source tree.
std::string Source(const std::string& name) { return kSourceDir + "/tests/e2e/programs/" + name; }

const std::string kScript = Source("torch_blocks.py");
const std::string kNoTorchScript = Source("torch_blocks_none.py");
const std::string kFakeTorchDir = Source("fake_torch");

// The value printed on the line "NAME VALUE" of `out`; -1 when there is none.
int64_t Printed(const std::string& out, const std::string& name) {
  const auto lines = LinesStartingWith(out, name + " ");
  if (lines.size() != 1) return -1;
  return std::stoll(lines[0].substr(name.size() + 1));
}

// GPUWATCH_TORCH_PYTHON when it names an interpreter, else null (the test skips).
const char* TorchPython() {
  const char* python = std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
  return python != nullptr && *python != '\0' && access(python, X_OK) == 0 ? python : nullptr;
}
constexpr char kNoTorchPython[] =
    "GPUWATCH_TORCH_PYTHON is not set to an interpreter (scripts/torch-env.sh)";

// The block of `segment` whose location is `location`, or null.
json BlockAt(const json& segment, const std::string& location) {
  for (const json& b : segment["blocks"]) {
    if (b.value("location", "") == location) return b;
  }
  return nullptr;
}

std::string ScriptLine(const std::string& marker) {
  return "torch_blocks.py:" + std::to_string(LineOf(kScript, "# BLOCK:" + marker));
}

// Runs `script` with `python` under `gpuwatch run [--torch-blocks] -o DIR/report.json`.
ProcessResult RunUnderGpuwatch(const ScopedTempDir& dir, const std::string& python,
                               const std::string& script, bool torch_blocks,
                               const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> env = SimEnv();
  env["PYTHONUNBUFFERED"] = "1";
  env.insert(extra.begin(), extra.end());
  std::vector<std::string> argv = {kCli, "run", "-o", dir.path() + "/report.json"};
  if (torch_blocks) argv.push_back("--torch-blocks");
  argv.insert(argv.end(), {"--", python, script});
  return RunTorchProcess(argv, env, dir.path());
}

// Two tensors (4 MiB at one line, 12 MiB through a helper) in one 20 MiB segment: the snapshot
// report, taken while both are live, lists both blocks at their lines with their exact sizes
// and Python frames, allocated bytes memory_allocated(), and the segment under the gpuwatch site
// that made it (the first tensor's line), reserved bytes memory_reserved() == gpuwatch's live
// device bytes. The exit report, after the second is freed, has the first block alone.
TEST(TorchBlocksTest, ReportNamesEachTensorLineWithItsBlockInTheSegmentGpuwatchSaw) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  const char* python = TorchPython();
  if (python == nullptr) GTEST_SKIP() << kNoTorchPython;
  ScopedTempDir dir;
  const ProcessResult r = RunUnderGpuwatch(dir, python, kScript, true);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_NE(r.out.find("torch_blocks: done"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("--torch-blocks:"), std::string::npos) << r.err;
  EXPECT_EQ(Printed(r.out, "snapshot"), 1) << r.out;
  EXPECT_EQ(Printed(r.out, "snapshot_allocated"), 16 << 20) << r.out;
  const int64_t reserved = Printed(r.out, "reserved");
  EXPECT_EQ(reserved, 20 << 20) << r.out;
  EXPECT_EQ(Printed(r.out, "live"), reserved) << r.out;
  EXPECT_EQ(Printed(r.out, "allocated"), 4 << 20) << r.out;

  const std::string segment_line = ScriptLine("a");
  // While both tensors were live.
  const json snapshot = ReadReport(dir.path() + "/report.json.snapshot-1");
  const json& during = snapshot["torch_blocks"];
  ASSERT_TRUE(during.is_object()) << snapshot.dump(1).substr(0, 2000);
  EXPECT_EQ(during["moment"], "snapshot");
  EXPECT_EQ(during["allocated_bytes"], 16 << 20) << during.dump(1);
  EXPECT_EQ(during["reserved_bytes"], reserved) << during.dump(1);
  EXPECT_EQ(during["reserved_bytes"], snapshot["totals"]["device_current_bytes"]);
  EXPECT_EQ(during["segment_count"], 1);
  EXPECT_EQ(during["block_count"], 3);  // a, b, and the free rest of the segment
  EXPECT_EQ(during["unmatched_segments"], 0);
  ASSERT_EQ(during["segments"].size(), 1u) << during.dump(1);
  const json& segment = during["segments"][0];
  EXPECT_EQ(segment["location"], segment_line) << segment.dump(1);
  EXPECT_EQ(segment["reserved_bytes"], 20 << 20);
  EXPECT_EQ(segment["allocated_bytes"], 16 << 20);
  EXPECT_EQ(segment["pool"], "large");
  const json site = SiteAt(snapshot["leaks"]["device"], segment_line);
  ASSERT_FALSE(site.is_null()) << snapshot["leaks"]["device"].dump(1);
  EXPECT_EQ(segment["site"], site["site"]);
  EXPECT_EQ(site["bytes"], segment["reserved_bytes"]);
  // Each tensor's block, at its line: sizes exact, the first at the segment's start.
  for (const auto& [marker, size] : {std::pair{"a", 4 << 20}, std::pair{"make", 12 << 20}}) {
    const json block = BlockAt(segment, ScriptLine(marker));
    ASSERT_FALSE(block.is_null()) << marker << "\n" << segment.dump(1);
    EXPECT_EQ(block["size"], size) << marker;
    EXPECT_EQ(block["requested_size"], size) << marker;
    EXPECT_EQ(block["state"], "active_allocated") << marker;
  }
  EXPECT_EQ(BlockAt(segment, ScriptLine("a"))["address"], segment["address"]);
  const json b = BlockAt(segment, ScriptLine("make"));
  ASSERT_EQ(b["frames"].size(), 2u) << b.dump(1);
  EXPECT_EQ(b["frames"][0],
            kScript + ":" + std::to_string(LineOf(kScript, "# BLOCK:make")) + ":make");
  EXPECT_EQ(b["frames"][1],
            kScript + ":" + std::to_string(LineOf(kScript, "# BLOCK:b")) + ":<module>");

  // At exit: b freed (its block free again), a still live.
  const json report = ReadReport(dir.path() + "/report.json");
  const json& at_exit = report["torch_blocks"];
  ASSERT_TRUE(at_exit.is_object()) << report.dump(1).substr(0, 2000);
  EXPECT_EQ(at_exit["moment"], "exit");
  EXPECT_EQ(at_exit["allocated_bytes"], 4 << 20) << at_exit.dump(1);
  EXPECT_EQ(at_exit["reserved_bytes"], reserved);
  EXPECT_EQ(at_exit["reserved_bytes"], report["leaks"]["device"]["bytes"]);
  ASSERT_EQ(at_exit["segments"].size(), 1u) << at_exit.dump(1);
  EXPECT_EQ(at_exit["segments"][0]["location"], segment_line);
  EXPECT_FALSE(BlockAt(at_exit["segments"][0], ScriptLine("a")).is_null()) << at_exit.dump(1);
  EXPECT_TRUE(BlockAt(at_exit["segments"][0], ScriptLine("make")).is_null()) << at_exit.dump(1);

  // `gpuwatch merge` of this process and a copy as another: the sums summed, no segments.
  json other = ReadJson(dir.path() + "/report.json");
  other["process"]["pid"] = report["process"]["pid"].get<uint64_t>() + 1;
  const std::string other_path = WriteReport(dir, "other.json", other);
  const ProcessResult merge = RunProcess(
      {kCli, "merge", dir.path() + "/report.json", other_path, "-o", dir.path() + "/merged.json"},
      {}, "");
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  const json merged = ReadReport(dir.path() + "/merged.json")["torch_blocks"];
  EXPECT_EQ(merged["reserved_bytes"], 2 * reserved) << merged.dump(1);
  EXPECT_EQ(merged["allocated_bytes"], 2 * (4 << 20)) << merged.dump(1);
  EXPECT_EQ(merged["segment_count"], 2);
  EXPECT_EQ(merged["segments"], json::array());

  // `gpuwatch report` shows the segment under its site, and each block at its line.
  const ProcessResult text =
      RunProcess({kCli, "report", dir.path() + "/report.json.snapshot-1"}, {}, "");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(LineWith(text.out, {"PyTorch's blocks (torch.cuda.memory._snapshot() at snapshot): "
                                "20.0 MiB reserved, 16.0 MiB allocated, in 1 segment"}),
            "")
      << text.out;
  EXPECT_NE(
      LineWith(text.out, {"made at " + segment_line + ": 20.0 MiB reserved, 16.0 MiB allocated"}),
      "")
      << text.out;
  EXPECT_NE(LineWith(text.out, {"4.0 MiB  allocated", ScriptLine("a") + " (<module>)"}), "")
      << text.out;
  EXPECT_NE(LineWith(text.out, {"12.0 MiB  allocated", ScriptLine("make") + " (make)"}), "")
      << text.out;
  EXPECT_NE(LineWith(text.out, {"<- <module> (" + ScriptLine("b") + ")"}), "") << text.out;
  EXPECT_NE(LineWith(text.out, {"4.0 MiB       free"}), "") << text.out;
  // The HTML page carries the section (its table is drawn from it).
  const ProcessResult html = RunProcess(
      {kCli, "report", "--format", "html", dir.path() + "/report.json.snapshot-1"}, {}, "");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  EXPECT_NE(html.out.find("\"torch_blocks\":{"), std::string::npos);
  EXPECT_NE(html.out.find("id=\"gw-torch-blocks\""), std::string::npos);
}

// A program that never imports torch: the shim runs the sitecustomize it hides and nothing else
// changes (the same output and leak as without --torch-blocks, no torch_blocks section, not a
// word from the shim), and gpuwatch_torch_blocks() refuses each bad input with -1 and one line.
TEST(TorchBlocksTest, ProgramWithoutTorchIsUnchangedAndBadInputIsRefused) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  ScopedTempDir site_dir;
  {
    std::ofstream chained(site_dir.path() + "/sitecustomize.py");
    chained << "import os\nos.environ['GPUWATCH_TEST_CHAINED'] = '1'\n";
  }
  const std::map<std::string, std::string> extra = {{"PYTHONPATH", site_dir.path()}};
  ScopedTempDir with_dir;
  ScopedTempDir without_dir;
  const ProcessResult with = RunUnderGpuwatch(with_dir, "python3", kNoTorchScript, true, extra);
  const ProcessResult without =
      RunUnderGpuwatch(without_dir, "python3", kNoTorchScript, false, extra);
  ASSERT_EQ(with.exit_code, 0) << with.out << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.out << without.err;
  ASSERT_NE(with.out.find("torch_blocks_none: done"), std::string::npos) << with.out << with.err;
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(Printed(with.out, "chained"), 1) << with.out;
  EXPECT_EQ(Printed(with.out, "torch_imported"), 0) << with.out;
  EXPECT_EQ(Printed(with.out, "malloc"), 0) << with.out;
  for (const char* name : {"not_json", "not_object", "no_segments", "negative", "null"}) {
    EXPECT_EQ(Printed(with.out, std::string("refused_") + name), -1) << name << "\n" << with.out;
  }
  EXPECT_EQ(with.err.find("--torch-blocks:"), std::string::npos) << with.err;
  EXPECT_EQ(LinesStartingWith(with.err, "gpuwatch: gpuwatch_torch_blocks: refused: ").size(), 5u)
      << with.err;
  EXPECT_NE(with.err.find("refused: torch_blocks.segments[0].reserved_bytes is -5"),
            std::string::npos)
      << with.err;
  const json report = ReadReport(with_dir.path() + "/report.json");
  const json plain = ReadReport(without_dir.path() + "/report.json");
  EXPECT_FALSE(report.contains("torch_blocks"));
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 1 << 20);
  EXPECT_EQ(report["leaks"]["device"]["bytes"], plain["leaks"]["device"]["bytes"]);
  EXPECT_EQ(report["leaks"]["device"]["sites"][0]["location"],
            plain["leaks"]["device"]["sites"][0]["location"]);
}

// The pytest plugin's --gpuwatch-torch-blocks, on a python with pytest and a stand-in for
// torch (tests/e2e/programs/fake_torch: its segments are real cudaMallocs): the hook is installed
// before the test module imports torch, the history starts at CUDA's initialization, and the
// snapshot the test takes has the block at the test's line, in the segment gpuwatch saw made.
TEST(TorchBlocksTest, PytestOptionPutsTheBlocksIntoTheTestsSnapshot) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  // Debian's python3 (python3-pytest, as the gates tests), else the torch environment's (it
  // has pytest); its torch is not imported: pytest puts the test's folder, with the stand-in,
  // first on sys.path.
  std::string python = "/usr/bin/python3";
  if (RunProcess({python, "-c", "import pytest"}, {}, "/").exit_code != 0) {
    const char* torch_python =
        std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
    python = torch_python != nullptr ? torch_python : "";
    if (python.empty() || RunProcess({python, "-c", "import pytest"}, {}, "/").exit_code != 0) {
      GTEST_SKIP() << "neither /usr/bin/python3 nor GPUWATCH_TORCH_PYTHON has pytest";
    }
  }
  ScopedTempDir dir;
  std::map<std::string, std::string> env = SimEnv();
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  const ProcessResult r = RunTorchProcess(
      {kCli, "run", "-o", dir.path() + "/report.json", "--", python, "-m", "pytest", "-q", "-p",
       "no:cacheprovider", "--gpuwatch-torch-blocks", kFakeTorchDir + "/test_fake_torch.py"},
      env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 passed"), std::string::npos) << r.out;
  const json report = ReadReport(dir.path() + "/report.json.snapshot-1");
  const json& blocks = report["torch_blocks"];
  ASSERT_TRUE(blocks.is_object()) << report.dump(1).substr(0, 2000);
  EXPECT_EQ(blocks["moment"], "snapshot");
  EXPECT_EQ(blocks["allocated_bytes"], 3 << 20);
  EXPECT_EQ(blocks["reserved_bytes"], 3 << 20);
  EXPECT_EQ(blocks["unmatched_segments"], 0);
  ASSERT_EQ(blocks["segments"].size(), 1u) << blocks.dump(1);
  const json& segment = blocks["segments"][0];
  const std::string malloc_line =
      "__init__.py:" +
      std::to_string(LineOf(kFakeTorchDir + "/torch/cuda/__init__.py", "# FAKE:malloc"));
  EXPECT_EQ(segment["location"], malloc_line) << segment.dump(1);
  const std::string test_file = kFakeTorchDir + "/test_fake_torch.py";
  const json block =
      BlockAt(segment, "test_fake_torch.py:" + std::to_string(LineOf(test_file, "# FAKE:make")));
  ASSERT_FALSE(block.is_null()) << segment.dump(1);
  EXPECT_EQ(block["size"], 3 << 20);
  ASSERT_GE(block["frames"].size(), 2u) << block.dump(1);
  EXPECT_EQ(block["frames"][1], test_file + ":" + std::to_string(LineOf(test_file, "# FAKE:test")) +
                                    ":test_blocks_reach_the_snapshot_report");
}

// At torch.cuda.OutOfMemoryError (tests/e2e/programs/torch_oom.py on a 64 MiB device), PyTorch's
// out-of-memory observer hands its blocks over (moment "oom") and then its counters: the .oom-1
// report, written again with them, has both, and they agree with what the script printed.
TEST(TorchBlocksTest, OutOfMemoryReportHasPyTorchsBlocksAtThatMoment) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  const char* python = TorchPython();
  if (python == nullptr) GTEST_SKIP() << kNoTorchPython;
  ScopedTempDir dir;
  const ProcessResult r = RunUnderGpuwatch(dir, python, Source("torch_oom.py"), true,
                                           {{"GWSIM_DEVICE_MEMORY", "64MiB"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(Printed(r.out, "oom"), 1) << r.out << r.err;
  const json report = ReadReport(dir.path() + "/report.json.oom-1");
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& torch = report["oom"]["torch"];
  ASSERT_TRUE(torch.is_object()) << report["oom"].dump(1) << r.err;
  EXPECT_EQ(torch["allocated_bytes"], Printed(r.out, "allocated"));
  EXPECT_EQ(torch["reserved_bytes"], Printed(r.out, "reserved"));
  const json& blocks = report["torch_blocks"];
  EXPECT_EQ(blocks["moment"], "oom") << blocks.dump(1);
  EXPECT_EQ(blocks["allocated_bytes"], Printed(r.out, "allocated")) << blocks.dump(1);
  EXPECT_EQ(blocks["reserved_bytes"], Printed(r.out, "reserved")) << blocks.dump(1);
  ASSERT_EQ(blocks["segments"].size(), 2u) << blocks.dump(1);
  const std::string a =
      "torch_oom.py:" + std::to_string(LineOf(Source("torch_oom.py"), "# TENSOR:a"));
  EXPECT_FALSE(BlockAt(blocks["segments"][0], a).is_null() &&
               BlockAt(blocks["segments"][1], a).is_null())
      << blocks.dump(1);
}

}  // namespace
}  // namespace gpuwatch::testing
