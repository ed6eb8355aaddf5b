// End-to-end tests with real PyTorch in its other allocator modes and with its own tools: a
// CUDA build of torch (scripts/torch-env.sh) runs tests/e2e/programs/torch_*.py on the CUDA
// simulator under libgpuwatch.so, attached by `gpuwatch run`, LD_PRELOAD and the driver's
// injection, and gpuwatch's figures must be PyTorch's, which the scripts print as
// "NAME VALUE" lines. tests/e2e/torch_test.cc has the default caching allocator and
// cudaMallocAsync.
//
// The interpreter is the one GPUWATCH_TORCH_PYTHON names (the last line scripts/torch-env.sh
// prints); without it every test skips with one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {

// The attach modes' names in gtest's messages.
void PrintTo(Attach how, std::ostream* os) { *os << AttachName(how); }

namespace {

using nlohmann::json;

// The python of GPUWATCH_TORCH_PYTHON, or "" with *why saying why there is none.
std::string TorchPython(std::string* why) {
  const char* named = std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
  const std::string python = named != nullptr ? named : "";
  if (python.empty()) {
    *why = "GPUWATCH_TORCH_PYTHON is not set (scripts/torch-env.sh prints the python to use)";
  } else if (access(python.c_str(), X_OK) != 0) {
    *why = "GPUWATCH_TORCH_PYTHON=" + python + " is not an executable";
  }
  return why->empty() ? python : "";
}

// "FILE:LINE" of the line of tests/e2e/programs/FILE marked `marker`.
std::string Marked(const std::string& file, const std::string& marker) {
  return file + ":" + std::to_string(LineOf(kSourceDir + "/tests/e2e/programs/" + file, marker));
}

// What a script printed: NAME -> VALUE for each line "NAME VALUE" whose value is a number.
std::map<std::string, int64_t> Values(const std::string& out) {
  std::map<std::string, int64_t> values;
  std::istringstream lines(out);
  std::string name;
  std::string value;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    if (fields >> name >> value && value.find_first_not_of("-0123456789") == std::string::npos) {
      values[name] = std::stoll(value);
    }
  }
  return values;
}

class TorchModesTest : public ::testing::TestWithParam<Attach> {
 protected:
  void SetUp() override {
    std::string why;
    python_ = TorchPython(&why);
    if (python_.empty()) GTEST_SKIP() << why;
  }

  // Runs tests/e2e/programs/SCRIPT in dir_ on the simulator, gpuwatch attached as the parameter
  // says and writing dir_/report.json; `env` on top. The script must exit 0 after printing
  // "STEM: done" (STEM: its name without .py).
  ProcessResult Run(const std::string& script, const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> all = SimEnv();
    all["PYTHONUNBUFFERED"] = "1";
    all["PYTHONPATH"] = kSourceDir + "/python";  // the gpuwatch package
    for (const auto& [name, value] : env) all[name] = value;
    std::vector<std::string> argv = {python_, kSourceDir + "/tests/e2e/programs/" + script};
    AttachTo(GetParam(), report_path(), &argv, &all);
    ProcessResult r = RunTorchProcess(argv, all, dir_.path());
    const std::string done = script.substr(0, script.size() - 3) + ": done";
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(done), std::string::npos) << r.out << r.err;
    return r;
  }

  std::string report_path() const { return dir_.path() + "/report.json"; }

  ScopedTempDir dir_;
  std::string python_;
};

// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: PyTorch reserves one address range and maps
// 20 MiB VMM handles (cuMemCreate + cuMemMap) into it as the segment grows, unmapping and
// releasing them at empty_cache(). At each point the script reaches, gpuwatch's live VMM bytes
// are memory_reserved() (no double count as the segment grows: a mapping adds no memory), and
// its live device bytes too; a snapshot while grown puts each handle at the Python line whose
// tensor made PyTorch map it; the exit report holds exactly the handle of the tensor left live.
TEST_P(TorchModesTest, ExpandableSegmentsVmmHandlesAreReservedBytesAtEachPoint) {
  const ProcessResult r =
      Run("torch_expandable.py", {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}});
  ASSERT_FALSE(HasFailure());
  std::map<std::string, int64_t> v = Values(r.out);
  const std::map<std::string, int64_t> reserved = {{"first", 20 * kMiB}, {"fits", 20 * kMiB},
                                                   {"grown", 40 * kMiB}, {"shrunk", 20 * kMiB},
                                                   {"empty", 0},         {"exit", 20 * kMiB}};
  for (const auto& [point, bytes] : reserved) {
    EXPECT_EQ(v[point + ".reserved"], bytes) << point << "\n" << r.out;
    EXPECT_EQ(v[point + ".vmm"], bytes) << point << "\n" << r.out;
    EXPECT_EQ(v[point + ".device"], bytes) << point << "\n" << r.out;
    EXPECT_EQ(v[point + ".handles"], bytes / (20 * kMiB)) << point << "\n" << r.out;
  }
  EXPECT_EQ(v["grown.allocated"], 40 * kMiB) << r.out;
  EXPECT_EQ(v["exit.allocated"], 8 * kMiB) << r.out;
  ASSERT_EQ(v["snapshot"], 1) << r.out;

  const json grown = ReadReport(report_path() + ".snapshot-1")["leaks"]["device"];
  EXPECT_EQ(grown["bytes"], 40 * kMiB) << grown.dump(1);
  EXPECT_EQ(grown["count"], 2) << grown.dump(1);
  for (const char* tensor : {"a", "c"}) {
    const json site = SiteAt(grown, Marked("torch_expandable.py", std::string("TENSOR:") + tensor));
    ASSERT_FALSE(site.is_null()) << tensor << "\n" << grown.dump(1);
    EXPECT_EQ(site["bytes"], 20 * kMiB) << tensor;
    EXPECT_EQ(site["category"], "caching-allocator") << tensor;
  }
  const json exit_report = ReadReport(report_path());
  const json& device = exit_report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], 20 * kMiB) << device.dump(1);
  EXPECT_EQ(device["count"], 1) << device.dump(1);
  const json d = SiteAt(device, Marked("torch_expandable.py", "TENSOR:d"));
  ASSERT_FALSE(d.is_null()) << device.dump(1);
  EXPECT_EQ(d["bytes"], 20 * kMiB);
  const json& vmm = exit_report["totals"]["kinds"]["vmm"];
  EXPECT_EQ(vmm["allocs"], 3) << vmm.dump(1);  // a's, c's and d's handles
  EXPECT_EQ(vmm["frees"], 2) << vmm.dump(1);
  EXPECT_EQ(vmm["peak_bytes"], 40 * kMiB) << vmm.dump(1);
}

// Pinned host memory: pin_memory() and the caching host allocator (the pinned block a
// non_blocking copy to the host takes) are cudaHostAlloc'ed pinned host memory at their lines,
// with exactly the bytes PyTorch's host allocator counts (a later pin_memory() of the same size
// reuses the cached block: no new allocation). The non_blocking copy from pinned memory is a
// pinned h2d copy at its line, the copy from pageable memory a pageable one (and the one
// `pageable` finding), the copy back d2h into pinned memory.
TEST_P(TorchModesTest, PinnedMemoryAndCopiesAreClassifiedAtTheirLines) {
  const ProcessResult r = Run("torch_pinned.py", {});
  ASSERT_FALSE(HasFailure());
  std::map<std::string, int64_t> v = Values(r.out);
  EXPECT_EQ(v["pinned"], 1) << r.out;
  EXPECT_EQ(v["host_allocated"], 8 * kMiB) << r.out;
  EXPECT_EQ(v["host_allocs"], 2) << r.out;
  EXPECT_EQ(v["host_live"], 8 * kMiB) << r.out;

  const json report = ReadReport(report_path());
  const json& host = report["leaks"]["host"];
  EXPECT_EQ(host["bytes"], 8 * kMiB) << host.dump(1);
  EXPECT_EQ(host["count"], 2) << host.dump(1);
  for (const char* marker : {"PINNED:pin_memory", "PINNED:host_cache"}) {
    const json site = SiteAt(host, Marked("torch_pinned.py", marker));
    ASSERT_FALSE(site.is_null()) << marker << "\n" << host.dump(1);
    EXPECT_EQ(site["bytes"], 4 * kMiB) << marker;
  }
  const json& pinned_kind = report["totals"]["kinds"]["pinned_host"];
  EXPECT_EQ(pinned_kind["allocs"], 2) << pinned_kind.dump(1);
  EXPECT_EQ(pinned_kind["frees"], 0) << pinned_kind.dump(1);

  const json& transfers = report["transfers"];
  struct Copy {
    const char* marker;
    const char* direction;
    const char* host;
  };
  for (const Copy& c :
       {Copy{"COPY:pinned", "h2d", "pinned"}, Copy{"COPY:pageable", "h2d", "pageable"},
        Copy{"PINNED:host_cache", "d2h", "pinned"}}) {
    const json site = SiteAt(transfers, Marked("torch_pinned.py", c.marker));
    ASSERT_FALSE(site.is_null()) << c.marker << "\n" << transfers.dump(1);
    EXPECT_EQ(site["count"], 1) << c.marker;
    EXPECT_EQ(site["bytes"], 4 * kMiB) << c.marker;
    EXPECT_EQ(site["async"], 1) << c.marker;  // cudaMemcpyAsync, pageable or not
    EXPECT_EQ(site["directions"][c.direction]["bytes"], 4 * kMiB) << c.marker;
    EXPECT_EQ(site["hosts"].size(), 1u) << c.marker << site["hosts"].dump();
    EXPECT_EQ(site["hosts"][c.host]["bytes"], 4 * kMiB) << c.marker << site["hosts"].dump();
  }
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["bytes"], 8 * kMiB);
  EXPECT_EQ(report["totals"]["copies"]["d2h"]["bytes"], 4 * kMiB);
  ASSERT_EQ(transfers["findings"].size(), 1u) << transfers["findings"].dump(1);
  EXPECT_EQ(transfers["findings"][0]["type"], "pageable");
  EXPECT_EQ(transfers["findings"][0]["location"], Marked("torch_pinned.py", "COPY:pageable"));
}

// torch.cuda.OutOfMemoryError on a 64 MiB device: PyTorch's cudaMalloc of 32 MiB fails (twice:
// it frees its cache and tries again), and gpuwatch's OOM report, written at the first failure,
// names the script's line, the request and the device's free memory, with the device memory
// live at that moment equal to memory_reserved() as the script prints it after catching the
// error (two segments at their tensors' lines; memory_allocated() is less: 4 MiB of the first
// segment's 20 are used). PyTorch's own counters, from its out-of-memory observer
// (python/gpuwatch/torch_hooks.py: `gpuwatch run` puts its sitecustomize on PYTHONPATH, the
// other modes do it by hand as docs/pytorch.md says), are in the report's oom.torch, written
// again with them, and in the text report.
TEST_P(TorchModesTest, OutOfMemoryReportNamesTheLineWithPyTorchsCounters) {
  std::map<std::string, std::string> env = {{"GWSIM_DEVICE_MEMORY", "64MiB"}};
  if (GetParam() != Attach::kRun) {
    env["PYTHONPATH"] = kSourceDir + "/python/gpuwatch/torch_shim:" + kSourceDir + "/python";
  }
  const ProcessResult r = Run("torch_oom.py", env);
  ASSERT_FALSE(HasFailure());
  std::map<std::string, int64_t> v = Values(r.out);
  ASSERT_EQ(v["oom"], 1) << r.out;
  EXPECT_EQ(v["reserved"], 44 * kMiB) << r.out;
  EXPECT_EQ(v["allocated"], 28 * kMiB) << r.out;
  EXPECT_NE(r.out.find("message CUDA out of memory. Tried to allocate 32.00 MiB"),
            std::string::npos)
      << r.out;

  const json report = ReadReport(report_path() + ".oom-1");
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "oom");
  const json& oom = report["oom"];
  EXPECT_EQ(oom["location"], Marked("torch_oom.py", "OOM:c")) << oom.dump(1);
  EXPECT_EQ(oom["size"], 32 * kMiB);
  EXPECT_EQ(oom["api"], "cudaMalloc");
  EXPECT_EQ(oom["kind"], "device");
  EXPECT_EQ(oom["device_total_bytes"], 64 * kMiB);
  EXPECT_EQ(oom["device_free_bytes"], 20 * kMiB);
  ASSERT_TRUE(oom["torch"].is_object()) << oom.dump(1) << r.err;
  EXPECT_EQ(oom["torch"]["allocated_bytes"], v["allocated"]);
  EXPECT_EQ(oom["torch"]["reserved_bytes"], v["reserved"]);
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], v["reserved"]) << device.dump(1);
  EXPECT_EQ(device["count"], 2) << device.dump(1);
  const json a = SiteAt(device, Marked("torch_oom.py", "TENSOR:a"));
  const json b = SiteAt(device, Marked("torch_oom.py", "TENSOR:b"));
  ASSERT_FALSE(a.is_null()) << device.dump(1);
  ASSERT_FALSE(b.is_null()) << device.dump(1);
  EXPECT_EQ(a["bytes"], 20 * kMiB);
  EXPECT_EQ(b["bytes"], 24 * kMiB);
  EXPECT_EQ(ReadReport(report_path())["totals"]["oom_count"], 2);
  // Said once, though the report was written twice.
  const std::string said =
      "out of memory: cudaMalloc of 32.0 MiB failed at " + Marked("torch_oom.py", "OOM:c");
  const size_t at = r.err.find(said);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said, at + 1), std::string::npos) << r.err;
  const ProcessResult text = RunProcess({kCli, "report", report_path() + ".oom-1"}, {}, "");
  EXPECT_NE(text.out.find("PyTorch when it raised OutOfMemoryError: 28.0 MiB allocated, 44.0 MiB "
                          "reserved (after emptying its cache)"),
            std::string::npos)
      << text.out;
}

// The phases of a report with PyTorch's NVTX (each tensor a cudaMalloc of its own, with
// PYTORCH_NO_CUDA_MEMORY_CACHING=1): torch.cuda.nvtx.range("load"), range_push("step") and
// range_push("forward") inside it hold exactly the bytes allocated at their lines, with the
// peak of the three live together; under torch.autograd.profiler.emit_nvtx() each operator is
// a range named as PyTorch names it, the allocation in aten::empty nested in aten::ones and the
// fill kernel's launch in aten::fill_. "load" was opened before PyTorch's first CUDA call, so
// gpuwatch counts what it allocated but not its opening (report-format.md, Phases).
TEST_P(TorchModesTest, NvtxRangesAndEmitNvtxArePhasesWithTheirBytes) {
  Run("torch_nvtx.py", {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}});
  ASSERT_FALSE(HasFailure());
  const json phases = ReadReport(report_path())["phases"];
  std::map<std::string, json> paths;
  for (const json& p : phases["paths"]) paths[p["path"].get<std::string>()] = p;
  const std::string ones = "aten::ones, op_id = 1";
  struct Phase {
    std::string path;
    int opens;
    int64_t alloc_bytes;
    int64_t peak_bytes;
    int launches;
  };
  const std::vector<Phase> expected = {
      {"load", 0, 4 * kMiB, 4 * kMiB, 0},
      {"step", 1, 8 * kMiB, 24 * kMiB, 0},
      {"step/forward", 1, 12 * kMiB, 24 * kMiB, 0},
      {ones, 1, 0, 1 * kMiB, 0},
      {ones + "/aten::empty, op_id = 2", 1, 1 * kMiB, 1 * kMiB, 0},
      {ones + "/aten::fill_, op_id = 3", 1, 0, 1 * kMiB, 1},
  };
  EXPECT_EQ(paths.size(), expected.size()) << phases.dump(1);
  for (const Phase& e : expected) {
    ASSERT_EQ(paths.count(e.path), 1u) << e.path << "\n" << phases.dump(1);
    const json& p = paths[e.path];
    EXPECT_EQ(p["opens"], e.opens) << e.path;
    EXPECT_EQ(p["allocs"], e.alloc_bytes > 0 ? 1 : 0) << e.path;
    EXPECT_EQ(p["alloc_bytes"], e.alloc_bytes) << e.path;
    EXPECT_EQ(p["peak_bytes"], e.peak_bytes) << e.path;
    EXPECT_EQ(p["launches"], e.launches) << e.path;
  }
  EXPECT_EQ(paths["step/forward"]["peak_site"]["location"],
            Marked("torch_nvtx.py", "PHASE:step/forward"));
  EXPECT_EQ(phases["unbalanced_pops"], 0);
  EXPECT_EQ(phases["open_at_thread_exit"], 0);
}

// torch.profiler.profile(activities=[CPU, CUDA]) in a run under gpuwatch: Kineto, a second CUPTI
// client, gets the fill kernel, the device-to-host copy and the runtime calls
// (cudaLaunchKernel, cudaMemcpyAsync) linked to their operators (aten::fill_ has CUDA time),
// from the simulator's CONCURRENT_KERNEL, MEMCPY, RUNTIME, DRIVER and EXTERNAL_CORRELATION
// records on Kineto's clock. gpuwatch's report is unchanged by the profiling window: the same
// work inside it ("profiled") and after it ("plain") has the same allocations, bytes, copies,
// launches and peak, and the same sites. The profiler starts before the first CUDA call, so under
// injection Kineto has loaded CUPTI before the driver loads gpuwatch: gpuwatch says so in one
// line and counts its copies from the calls, untimed (report-format.md); with gpuwatch attached
// first the copies keep their timing.
TEST_P(TorchModesTest, TorchProfilerGetsCudaEventsAndLeavesTheReportUnchanged) {
  const ProcessResult r = Run("torch_profiler.py", {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}});
  ASSERT_FALSE(HasFailure());
  std::map<std::string, int64_t> v = Values(r.out);
  EXPECT_EQ(v["cuda_events"], 2) << r.out;
  EXPECT_EQ(v["kernels"], 1) << r.out;
  EXPECT_EQ(v["memcpys"], 1) << r.out;
  for (const char* name : {"cudaLaunchKernel", "cudaMemcpyAsync", "aten::fill_", "aten::copy_"}) {
    EXPECT_EQ(v[std::string("cpu:") + name], 1) << name << "\n" << r.out;
  }
  // Kineto links a kernel to its operator by the kernel record's correlation id, the
  // cudaLaunchKernel record's as NVIDIA's CUPTI makes it; under the runtime_only. model
  // (GWSIM_CORRELATION=own) the kernel record carries the nested driver call's id, which no
  // RUNTIME record has, and aten::fill_ gets no CUDA time.
  const char* model = std::getenv("GPUWATCH_TEST_SIM_ENV");  // NOLINT(concurrency-mt-unsafe)
  const bool own_ids =
      model != nullptr && std::string(model).find("GWSIM_CORRELATION=own") != std::string::npos;
  EXPECT_EQ(v["fill_cuda_us"], own_ids ? 0 : 1) << r.out;

  const json report = ReadReport(report_path());
  std::map<std::string, json> phases;
  for (const json& p : report["phases"]["paths"]) phases[p["path"].get<std::string>()] = p;
  ASSERT_EQ(phases.size(), 2u) << report["phases"].dump(1);
  for (const char* window : {"profiled", "plain"}) {
    const json& p = phases[window];
    EXPECT_EQ(p["allocs"], 2) << window;
    EXPECT_EQ(p["alloc_bytes"], 12 * kMiB) << window;
    EXPECT_EQ(p["peak_bytes"], 12 * kMiB) << window;
    EXPECT_EQ(p["launches"], 1) << window;
    EXPECT_EQ(p["copies"], json({{"d2h", {{"bytes", 8 * kMiB}, {"count", 1}}}})) << window;
  }
  // Each line of work() is two sites (called from two lines), alike.
  std::map<std::string, std::vector<int64_t>> allocated;
  for (const json& site : report["sites"]) {
    allocated[site["location"].get<std::string>()].push_back(site["alloc_bytes"].get<int64_t>());
  }
  EXPECT_EQ(allocated[Marked("torch_profiler.py", "WORK:alloc")],
            (std::vector<int64_t>{4 * kMiB, 4 * kMiB}));
  EXPECT_EQ(allocated[Marked("torch_profiler.py", "WORK:kernel")],
            (std::vector<int64_t>{8 * kMiB, 8 * kMiB}));
  EXPECT_EQ(report["kernels"]["launches"], 2);
  EXPECT_EQ(report["transfers"]["unmatched_records"], 0);
  const json& copies = report["transfers"]["sites"];
  ASSERT_EQ(copies.size(), 2u) << copies.dump(1);
  const bool injected = GetParam() == Attach::kInjection;
  for (const json& site : copies) {
    EXPECT_EQ(site["location"], Marked("torch_profiler.py", "WORK:copy"));
    EXPECT_EQ(site["bytes"], 8 * kMiB);
    EXPECT_EQ(site["hosts"]["pageable"]["count"], 1) << site.dump(1);
    EXPECT_EQ(site.contains("timed_count"), !injected) << site.dump(1);
  }
  EXPECT_EQ(r.err.find("libcupti was loaded before gpuwatch") != std::string::npos, injected)
      << r.err;
}

INSTANTIATE_TEST_SUITE_P(Attach, TorchModesTest,
                         ::testing::Values(Attach::kRun, Attach::kPreload, Attach::kInjection),
                         AttachTestName);

}  // namespace
}  // namespace gpuwatch::testing
