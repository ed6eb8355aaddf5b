// Fidelity on the programs real users write: no allocation lost when a freed
// address is reused by another thread at once, copies counted once whether
// or not their activity records join, device and host memory apart, VMM
// memory on the device it lives on, cudaMemcpyDefault copies resolved, a
// process that dies with status 127 explained, findings that read right, and
// copies without activity records.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string At(const std::string& program, const std::string& marker) {
  return ProgramLine(program, marker);
}

// Runs a test program with libgpuwatch.so preloaded on the simulator.
json RunUnder(const ScopedTempDir& dir, const std::string& program,
              const std::map<std::string, std::string>& extra = {},
              ProcessResult* result = nullptr) {
  const std::string out = dir.path() + "/" + program + ".json";
  const ProcessResult r =
      RunProcess({kPrograms + "/" + program}, PreloadEnv(out, extra), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (result != nullptr) *result = r;
  return ReadJson(out);
}

uint64_t Copies(const json& report, const std::string& direction) {
  return report["totals"]["copies"].value(direction, json::object()).value("count", uint64_t{0});
}

// Copies of one direction in transfers.totals, over every host kind.
uint64_t TransferCount(const json& report, const std::string& direction) {
  uint64_t n = 0;
  for (const json& t : report["transfers"]["totals"]) {
    if (t["direction"] == direction) n += t["count"].get<uint64_t>();
  }
  return n;
}

// Bug: frees were recorded at the API's exit, after the driver had released
// the memory; another thread's cudaMalloc got the address first and its
// allocation was erased by the late free (1,989-1,998 live of 2,000).
TEST(Fidelity, AnAddressReusedByAnotherThreadAtOnceLosesNoAllocation) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "reuse_race", {}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  // The simulator really handed freed addresses out again.
  int reused = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "reuse_race: done, %d", &reused), 1) << r.out;
  EXPECT_GT(reused, 100) << r.out;
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 2000);
  EXPECT_EQ(device["frees"], 1750);
  EXPECT_EQ(device["current_count"], 250);
  EXPECT_EQ(report["totals"]["device_live_count"], 250);
  EXPECT_EQ(report["totals"]["device_current_bytes"], 250 * 8192);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
  const json& leaks = report["leaks"]["device"];
  ASSERT_EQ(leaks["sites"].size(), 1u) << leaks.dump(1);
  EXPECT_EQ(leaks["sites"][0]["location"], At("reuse_race.cu", "LEAK:kept"));
  EXPECT_EQ(leaks["sites"][0]["count"], 250);
}

// The same with CUDA_INJECTION64_PATH: gpuwatch attaches inside one thread's
// first cudaMalloc while other threads are inside theirs. Calls in flight at
// attach deliver their EXIT without ENTER, after their nested driver calls
// were seen: each must still count once (2,001 allocations and a free
// "never seen" before the fix).
TEST(Fidelity, CallsInFlightWhenGpuwatchAttachesCountOnce) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess(
      {kPrograms + "/reuse_race"},
      {{"LD_LIBRARY_PATH", kSimDir}, {"CUDA_INJECTION64_PATH", kLib}, {"GPUWATCH_OUTPUT", out}},
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["gpuwatch"]["attach"], "injection");
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 2000);
  EXPECT_EQ(device["frees"], 1750);
  EXPECT_EQ(report["totals"]["device_live_count"], 250);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
}

// Bug: activity records that joined no call were counted as copies of their
// own (at "<no stack>") and the calls waiting for them again at exit.
TEST(Fidelity, CopiesAreCountedOnceWhenTheirRecordsDoNotJoin) {
  ScopedTempDir dir;
  const json joined = RunUnder(dir, "transfers");
  ScopedTempDir dir2;
  const json unjoined = RunUnder(dir2, "transfers", {{"GWSIM_CORRELATION", "unjoinable"}});
  ASSERT_TRUE(joined.is_object());
  ASSERT_TRUE(unjoined.is_object());
  uint64_t copies = 0;
  for (const char* direction : {"h2d", "d2h"}) {
    EXPECT_EQ(Copies(unjoined, direction), Copies(joined, direction)) << direction;
    EXPECT_EQ(TransferCount(unjoined, direction), Copies(joined, direction)) << direction;
    copies += Copies(joined, direction);
  }
  EXPECT_EQ(Copies(joined, "h2d"), 210u);
  EXPECT_EQ(joined["transfers"]["unmatched_records"], 0);
  EXPECT_EQ(unjoined["transfers"]["unmatched_records"], copies);
  for (const json& site : unjoined["transfers"]["sites"]) {
    EXPECT_NE(site["location"], "<no stack>") << site.dump();
  }
  for (const json& f : unjoined["transfers"]["findings"]) {
    EXPECT_NE(f["location"], "<no stack>") << f.dump();
  }
  // The copies still sit at their own lines, with the host memory kinds
  // gpuwatch's own tables give them.
  EXPECT_EQ(unjoined["transfers"]["totals"][0]["direction"], "h2d");
  const ProcessResult text =
      RunProcess({kCli, "report", dir2.path() + "/transfers.json"}, {}, dir2.path());
  EXPECT_NE(text.out.find(std::to_string(copies) +
                          " activity records joined no call (each copy is counted once"),
            std::string::npos)
      << text.out;
}

// Bug: the text report's "Device memory" block and `diff`'s allocation
// totals counted pinned and registered host memory.
TEST(Fidelity, DeviceAndHostMemoryAreReportedApart) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "zero_copy", {}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["totals"]["host_live_count"], 3);
  EXPECT_NE(r.err.find("gpuwatch: 0 device allocations (and 3 of pinned host memory)"),
            std::string::npos)
      << r.err;
  const std::string path = dir.path() + "/zero_copy.json";
  const ProcessResult text = RunProcess({kCli, "report", path}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_FALSE(
      LineWith(text.out, {"Device memory: peak 0 B; live at exit 0 B in 0 allocations"}).empty())
      << text.out;
  EXPECT_FALSE(LineWith(text.out, {"  0 allocations (0 B), 0 frees, 1 kernel launch"}).empty())
      << text.out;
  EXPECT_FALSE(LineWith(text.out, {"Pinned host memory: live 12.0 MiB in 3 allocations"}).empty())
      << text.out;
  EXPECT_FALSE(LineWith(text.out, {"  3 allocations (12.0 MiB), 0 frees"}).empty()) << text.out;
  EXPECT_FALSE(LineWith(text.out, {"Pinned host allocation sites"}).empty()) << text.out;
  EXPECT_TRUE(LineWith(text.out, {"Device allocation sites"}).empty()) << text.out;
  const ProcessResult diff = RunProcess({kCli, "diff", path, path}, {}, dir.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_FALSE(LineWith(diff.out, {"device allocations", " 0 ", " 0 "}).empty()) << diff.out;
  EXPECT_FALSE(LineWith(diff.out, {"host allocations", " 3 ", " 3 "}).empty()) << diff.out;
  EXPECT_FALSE(LineWith(diff.out, {"host bytes allocated", "12.0 MiB"}).empty()) << diff.out;
}

// Bug: VMM memory was put on the calling context's device.
TEST(Fidelity, VmmMemoryIsOnTheDeviceItWasCreatedOn) {
  ScopedTempDir dir;
  const json report = RunUnder(dir, "vmm_striped", {{"GWSIM_DEVICE_COUNT", "2"}});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["totals"]["kinds"]["vmm"]["allocs"], 2);
  EXPECT_EQ(report["totals"]["device_peak_bytes"], 4 * kMiB);
  const json& devices = report["trace"]["devices"];
  ASSERT_EQ(devices.size(), 2u) << devices.dump();
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(devices[d]["device"], d);
    EXPECT_EQ(devices[d]["peak_bytes"], 2 * kMiB) << "device " << d;
    EXPECT_EQ(devices[d]["live_bytes"], 0);
  }
}

// VMM memory is counted per physical handle, as the driver counts it
// (vmm_handles.cc has the sequence): from cuMemCreate, once however many
// mappings it has, until the last mapping is gone and the handle released,
// in either order; leaked at cuMemCreate's line; an imported handle is
// another process's memory, shown apart and never leaked.
// Bug: each cuMemMap was counted as an allocation and each cuMemUnmap as a
// free (peak 24 MiB; the imported mapping leaked; the two leaks missed).
TEST(Fidelity, VmmMemoryIsCountedPerHandleAsTheDriverCountsIt) {
  ScopedTempDir dir;
  const json report = RunUnder(dir, "vmm_handles");
  ASSERT_TRUE(report.is_object());
  const json& totals = report["totals"];
  EXPECT_EQ(totals["device_peak_bytes"], 12 * kMiB) << "one handle mapped twice counts once";
  EXPECT_EQ(totals["device_current_bytes"], 8 * kMiB);
  EXPECT_EQ(totals["unknown_frees"], 0);
  const json& vmm = totals["kinds"]["vmm"];
  EXPECT_EQ(vmm["allocs"], 5);
  EXPECT_EQ(vmm["alloc_bytes"], 26 * kMiB);
  EXPECT_EQ(vmm["frees"], 3);
  EXPECT_EQ(vmm["current_bytes"], 8 * kMiB);
  EXPECT_EQ(vmm["current_count"], 2);
  EXPECT_EQ(vmm["peak_bytes"], 12 * kMiB);
  const json& imported = totals["kinds"]["vmm_imported"];
  EXPECT_EQ(imported["allocs"], 1);
  EXPECT_EQ(imported["alloc_bytes"], 2 * kMiB);
  EXPECT_EQ(imported["current_bytes"], 2 * kMiB);
  EXPECT_EQ(imported["current_count"], 1);
  EXPECT_EQ(imported["frees"], 0);
  EXPECT_EQ(report["peak"]["kinds"]["vmm"], 12 * kMiB);
  // Device bytes after each change: the 4 MiB handle released while mapped
  // is freed at its unmap (6 -> 2), after the 2 MiB handle was made (4 -> 6).
  std::vector<uint64_t> device_bytes;
  for (const json& e : report["trace"]["events"]) {
    if (e[0] == "mem" && e[2] == 0) device_bytes.push_back(e[3].get<uint64_t>() / kMiB);
  }
  EXPECT_EQ(device_bytes, (std::vector<uint64_t>{12, 0, 4, 6, 2, 8, 10, 8}));
  // The leaks: the handle never released and the one never mapped, each at
  // its cuMemCreate; nothing imported among them.
  const json& leaks = report["leaks"]["device"];
  EXPECT_EQ(leaks["bytes"], 8 * kMiB);
  EXPECT_EQ(leaks["count"], 2);
  ASSERT_EQ(leaks["sites"].size(), 2u) << leaks.dump(1);
  const std::pair<const char*, uint64_t> expected[] = {{"LEAK:vmm_unreleased", 2 * kMiB},
                                                       {"LEAK:vmm_unmapped", 6 * kMiB}};
  for (const auto& [marker, bytes] : expected) {
    const json site = SiteAt(leaks, At("vmm_handles.cc", marker));
    ASSERT_FALSE(site.is_null()) << marker << "\n" << leaks.dump(1);
    EXPECT_EQ(site["bytes"], bytes) << marker;
    EXPECT_EQ(site["count"], 1) << marker;
    EXPECT_EQ(site["kinds"]["vmm"], bytes) << marker;
  }
  EXPECT_EQ(report["leaks"]["host"]["bytes"], 0);
  // The sites: the shared handle allocated once, at cuMemCreate.
  bool shared_seen = false;
  for (const json& site : report["sites"]) {
    if (site["location"] != At("vmm_handles.cc", "VMM:shared")) continue;
    shared_seen = true;
    EXPECT_EQ(site["allocs"], 1);
    EXPECT_EQ(site["alloc_bytes"], 12 * kMiB);
    EXPECT_EQ(site["live_device_bytes"], 0);
  }
  EXPECT_TRUE(shared_seen) << report["sites"].dump(1);
}

// Bug: totals.copies said "unknown" for cudaMemcpyDefault copies while
// transfers.totals resolved them.
TEST(Fidelity, DefaultCopiesHaveOneResolvedDirectionEverywhere) {
  ScopedTempDir dir;
  const json report = RunUnder(dir, "default_copies", {{"GWSIM_DEVICE_COUNT", "2"}});
  ASSERT_TRUE(report.is_object());
  const json& copies = report["totals"]["copies"];
  EXPECT_FALSE(copies.contains("unknown")) << copies.dump();
  EXPECT_EQ(Copies(report, "h2d"), 2u);
  EXPECT_EQ(Copies(report, "d2h"), 1u);
  EXPECT_EQ(Copies(report, "peer"), 1u);
  for (const char* direction : {"h2d", "d2h", "peer"}) {
    EXPECT_EQ(TransferCount(report, direction), Copies(report, direction)) << direction;
  }
  EXPECT_EQ(copies["h2d"]["bytes"], 2 * kMiB);
}

// Bug: a CUDA process that died with status 127 (a symbol the dynamic loader
// could not resolve lazily) left no report and `gpuwatch run` said nothing.
TEST(Fidelity, AProcessThatDiesWithStatus127IsExplainedWithItsLastCheckpoint) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/lazy.json";
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", out, "--", kPrograms + "/lazy_exit", out,
                  kPrograms + "/liblazy_missing.so"},
                 {{"LD_LIBRARY_PATH", kSimDir}, {"GPUWATCH_CHECKPOINT_SECONDS", "1"}}, dir.path());
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("symbol lookup error"), std::string::npos) << r.err;
  EXPECT_FALSE(LineWith(r.err, {"gpuwatch: ",
                                "lazy_exit used CUDA and exited with status 127 "
                                "before gpuwatch could write its exit report",
                                "cannot resolve a symbol"})
                   .empty())
      << r.err;
  const std::string known = LineWith(r.err, {"gpuwatch: what is known is its last checkpoint, "});
  EXPECT_NE(known.find(out + ": 1.0 MiB of device memory live in 1 allocation, most at " +
                       At("lazy_exit.cc", "LEAK:lazy") + " (main)"),
            std::string::npos)
      << r.err;
  // The checkpoint is a complete report.
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "checkpoint");
  EXPECT_EQ(report["leaks"]["device"]["bytes"], kMiB);
}

// Smaller fidelity bugs of the findings: a device-to-host copy is "to"
// pageable memory, one copy is "1 copy", and two template instances with
// copies at one line read as two sites.
TEST(Fidelity, FindingsReadRight) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "copy_findings", {}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  std::vector<std::string> messages;
  for (const json& f : report["transfers"]["findings"]) messages.push_back(f["message"]);
  const auto has = [&](const std::string& text) {
    for (const std::string& m : messages) {
      if (m == text) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("3 copies (6.0 MiB) to pageable memory at " +
                  At("copy_findings.cu", "AT:to_pageable") + ": pin it"))
      << report["transfers"]["findings"].dump(1);
  EXPECT_TRUE(has("1 copy (1.0 MiB) from pageable memory at " + At("copy_findings.cu", "AT:lone") +
                  ": pin it"));
  const std::string line = At("copy_findings.cu", "AT:template");
  EXPECT_TRUE(has("120 copies under 64 KiB at " + line +
                  " (void (anonymous namespace)::SmallCopies<float>(float*, std::vector<float, "
                  "std::allocator<float> > const&, int)): batch them"))
      << report["transfers"]["findings"].dump(1);
  EXPECT_TRUE(has("110 copies under 64 KiB at " + line +
                  " (void (anonymous namespace)::SmallCopies<double>(double*, "
                  "std::vector<double, std::allocator<double> > const&, int)): batch them"));
  // The stderr summary makes the same distinction.
  EXPECT_NE(r.err.find("SmallCopies<float>"), std::string::npos) << r.err;
}

// Without activity records (here: a CUPTI whose record layouts gpuwatch does
// not know), copies are counted from their calls, their host memory kind
// comes from gpuwatch's own table of pinned memory, and they say "not timed".
TEST(Fidelity, WithoutActivityRecordsCopiesKnowTheirHostMemoryAndAreNotTimed) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "transfers", {{"GWSIM_CUPTI_VERSION", "120000"}}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(LinesStartingWith(r.err,
                              "gpuwatch: CUPTI API version 120000 has activity record "
                              "layouts gpuwatch does not know")
                .size(),
            1u)
      << r.err;
  uint64_t pinned = 0;
  uint64_t pageable = 0;
  for (const json& t : report["transfers"]["totals"]) {
    EXPECT_FALSE(t.contains("duration_ns")) << t.dump();
    if (t["direction"] != "h2d") continue;
    if (t["host"] == "pinned") pinned = t["count"];
    if (t["host"] == "pageable") pageable = t["count"];
  }
  EXPECT_EQ(pinned, 204u);
  EXPECT_EQ(pageable, 6u);
  EXPECT_EQ(Copies(report, "h2d"), 210u);
  EXPECT_FALSE(LineWith(r.err, {"gpuwatch: transfers h2d: 210 copies, ",
                                ", not timed (pageable 6, pinned 204)"})
                   .empty())
      << r.err;
}

// PyTorch's per-tensor modes: every tensor is an allocation of its own, so
// memory allocated through its allocator is not "kept by a library" there,
// in the report and in every tool that reads it.
TEST(Fidelity, PytorchAllocatorIsACategoryOnlyWhenItCaches) {
  struct Mode {
    std::map<std::string, std::string> env;
    std::string reported;  // process.pytorch_allocator
    bool categorized;
  };
  const Mode modes[] = {
      {{}, "", true},
      {{{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}}, "expandable_segments", true},
      {{{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}}, "no_caching", false},
      {{{"PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:0.6, backend:cudaMallocAsync"}},
       "cudaMallocAsync",
       false},
  };
  for (const Mode& m : modes) {
    ScopedTempDir dir;
    ProcessResult r;
    const json report = RunUnder(dir, "allocator_category", m.env, &r);
    ASSERT_TRUE(report.is_object()) << r.err;
    EXPECT_EQ(report["process"].value("pytorch_allocator", ""), m.reported);
    const json& device = report["leaks"]["device"];
    ASSERT_EQ(device["sites"].size(), 1u);
    EXPECT_EQ(device["sites"][0]["location"], At("allocator_category.cu", "AT:malloc"));
    EXPECT_EQ(device["leaked_bytes"], m.categorized ? 0 : 3 * kMiB) << m.reported;
    EXPECT_EQ(device["categorized_bytes"], m.categorized ? 3 * kMiB : 0) << m.reported;
    const ProcessResult check =
        RunProcess({kCli, "check", dir.path() + "/allocator_category.json"}, {}, dir.path());
    EXPECT_EQ(check.exit_code, m.categorized ? 0 : 1) << m.reported << check.out << check.err;
  }
}

// CUDA arrays and copies to and from them, and the driver's 2D/3D copies,
// used not to be seen at all.
TEST(Fidelity, ArraysAndTheirCopiesAndDriver2DAnd3DCopiesAreTracked) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "arrays", {}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& arrays = report["totals"]["kinds"]["array"];
  EXPECT_EQ(arrays["allocs"], 3);
  EXPECT_EQ(arrays["frees"], 1);
  EXPECT_EQ(arrays["alloc_bytes"], 256 * kKiB + 32 * kKiB + 16 * kKiB);
  EXPECT_EQ(arrays["current_bytes"], 256 * kKiB + 16 * kKiB);
  const json& leaks = report["leaks"]["device"];
  ASSERT_EQ(leaks["sites"].size(), 2u) << leaks.dump(1);
  EXPECT_EQ(leaks["sites"][0]["location"], At("arrays.cu", "LEAK:array2d"));
  EXPECT_EQ(leaks["sites"][0]["kinds"]["array"], 256 * kKiB);
  EXPECT_EQ(leaks["sites"][1]["location"], At("arrays.cu", "LEAK:driver_array"));
  EXPECT_EQ(leaks["sites"][1]["bytes"], 16 * kKiB);
  // Copies: to and from the 2D array, into the 3D one, host <-> the driver
  // array, and the driver's 2D (h2d) and 3D (d2h) copies.
  EXPECT_EQ(Copies(report, "h2d"), 4u);
  EXPECT_EQ(Copies(report, "d2h"), 3u);
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["bytes"],
            256 * kKiB + 32 * kKiB + 16 * kKiB + 100 * kKiB);
  EXPECT_EQ(report["totals"]["copies"]["d2h"]["bytes"], 256 * kKiB + 16 * kKiB + 32 * kKiB);
  uint64_t sites_at_lines = 0;
  for (const json& site : report["transfers"]["sites"]) {
    for (const char* marker :
         {"AT:to_array", "AT:from_array", "AT:copy3d", "AT:copy2d", "AT:copy3d_driver"}) {
      if (site["location"] == At("arrays.cu", marker)) ++sites_at_lines;
    }
  }
  EXPECT_EQ(sites_at_lines, 5u);
  EXPECT_EQ(report["transfers"]["unmatched_records"], 0);
}

// CUDA graphs: a graph's copies and memory nodes do their work at each
// launch. A copy captured from a stream is no copy at capture and one per
// launch, at the line that issued it; an allocation node's memory is live
// from its launch; a cudaMallocAsync freed in the same graph is transient.
void ExpectGraphs(const json& report, const std::string& mode) {
  constexpr uint64_t kLaunches = 3;
  // 3 launches of the captured graph (1 MiB in, 1 MiB out each), 1 of the
  // built one (64 KiB in).
  EXPECT_EQ(Copies(report, "h2d"), kLaunches + 1) << mode;
  EXPECT_EQ(Copies(report, "d2h"), kLaunches) << mode;
  EXPECT_EQ(report["totals"]["copies"]["h2d"]["bytes"], kLaunches * kMiB + 64 * kKiB) << mode;
  const auto site = [&](const std::string& marker) -> json {
    for (const json& s : report["transfers"]["sites"]) {
      if (s["location"] == At("graphs.cu", marker)) return s;
    }
    return json();
  };
  EXPECT_EQ(site("AT:captured_in")["count"], kLaunches) << mode;
  EXPECT_EQ(site("AT:captured_in")["hosts"]["pinned"]["count"], kLaunches) << mode;
  EXPECT_EQ(site("AT:captured_out")["count"], kLaunches) << mode;
  EXPECT_EQ(site("AT:node_copy")["count"], 1) << mode;
  // Kernels run in graphs count per kernel node per launch, named: the
  // captured Scale launch (3 launches of its graph) and the Scale node added
  // explicitly to the built graph (1 launch). A graph launch itself is no
  // kernel.
  const json& kernels = report["kernels"]["kernels"];
  ASSERT_EQ(kernels.size(), 1u) << kernels.dump() << mode;
  EXPECT_EQ(kernels[0]["name"], "(anonymous namespace)::Scale(float*, unsigned long)") << mode;
  EXPECT_EQ(kernels[0]["launches"], kLaunches + 1) << mode;
  EXPECT_EQ(report["kernels"]["launches"], kLaunches + 1) << mode;
  EXPECT_EQ(report["totals"]["kernel_launches"], kLaunches + 1) << mode;
  // Graph memory: the scratch buffer lived during each launch (the peak
  // saw it), the allocation node's 4 MiB stays live.
  const json& graph = report["totals"]["kinds"]["graph"];
  EXPECT_EQ(graph["allocs"], kLaunches + 1) << mode;
  EXPECT_EQ(graph["frees"], kLaunches) << mode;
  EXPECT_EQ(graph["current_bytes"], 4 * kMiB) << mode;
  EXPECT_EQ(report["peak"]["kinds"]["graph"], 4 * kMiB) << mode;
  const json& leaks = report["leaks"]["device"];
  ASSERT_EQ(leaks["sites"].size(), 1u) << leaks.dump(1);
  EXPECT_EQ(leaks["sites"][0]["location"], At("graphs.cu", "LEAK:graph")) << mode;
  EXPECT_EQ(leaks["sites"][0]["kinds"]["graph"], 4 * kMiB) << mode;
  EXPECT_EQ(report["totals"]["unknown_frees"], 0) << mode;
}

TEST(Fidelity, GraphCopiesAndMemoryHappenAtEachLaunch) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = RunUnder(dir, "graphs", {}, &r);
  ASSERT_TRUE(report.is_object()) << r.err;
  ExpectGraphs(report, "activity");
  EXPECT_EQ(report["transfers"]["unmatched_records"], 0);
  for (const json& t : report["transfers"]["totals"]) EXPECT_TRUE(t.contains("duration_ns")) << t;
  // Without activity records the graph's copies are counted from its nodes.
  ScopedTempDir dir2;
  const json untimed = RunUnder(dir2, "graphs", {{"GWSIM_CUPTI_VERSION", "120000"}});
  ASSERT_TRUE(untimed.is_object());
  ExpectGraphs(untimed, "no activity");
  // With kernel timing, each launch of a graph kernel node is timed once:
  // never more timed launches than launches, one kernel.
  ScopedTempDir dir3;
  const json timed = RunUnder(dir3, "graphs", {{"GPUWATCH_KERNEL_TIMING", "1"}});
  ASSERT_TRUE(timed.is_object());
  ExpectGraphs(timed, "kernel timing");
  const json& kernel = timed["kernels"]["kernels"][0];
  EXPECT_EQ(kernel["timed"], kernel["launches"]) << kernel.dump();
}

// The program's own functions named as CUDA's are (the CUDA graphs sample's
// cudaGraphsManual) are its sites, not frames of the runtime to skip: the
// allocation and the copy name their own lines.
TEST(Fidelity, OwnFunctionsNamedLikeCudaKeepTheirLines) {
  ScopedTempDir dir;
  const json r = RunUnder(dir, "cuda_named");
  const json& sites = r["leaks"]["device"]["sites"];
  ASSERT_EQ(sites.size(), 1u) << sites.dump();
  EXPECT_EQ(sites[0]["location"], At("cuda_named.cu", "AT:manual"));
  EXPECT_EQ(sites[0]["frames"][0]["function"], "cudaGraphsManual(char**)");
  const json copy = SiteAt(r["transfers"], At("cuda_named.cu", "AT:capture"));
  ASSERT_TRUE(copy.is_object()) << r["transfers"].dump();
  EXPECT_EQ(copy["bytes"], 1 * kMiB);
}

// cudaDeviceReset with memory live: what the driver frees with the context
// (device, pinned, managed and pitched memory) is reported live at the
// destroy in the context report, then leaves the live table: the exit report
// counts it as freed by a context reset, never as live, and the device peak
// never counts memory the device did not hold at one moment (11 MiB: the
// 3 MiB stream-ordered block that survives plus the 8 MiB allocated after;
// 18 MiB if the freed memory stayed).
TEST(Fidelity, DeviceResetFreesWhatTheDriverFreesAndKeepsStreamOrderedMemory) {
  ScopedTempDir dir;
  ProcessResult run;
  const json r = RunUnder(dir, "device_reset", {}, &run);
  ASSERT_NE(run.out.find("device_reset: pitch 1024\n"), std::string::npos) << run.out;
  const json& totals = r["totals"];
  EXPECT_EQ(totals["device_current_bytes"], 8 * kMiB);
  EXPECT_EQ(totals["device_peak_bytes"], 11 * kMiB);
  EXPECT_EQ(totals["host_current_bytes"], 0);
  EXPECT_EQ(totals["kinds"]["pool"]["frees"], 1);  // by the program, after the reset
  EXPECT_EQ(totals["kinds"]["managed"]["current_bytes"], 0);
  // peak.kinds is the breakdown at the device peak: what was live then, not
  // each kind's own high-water mark (managed memory peaked at 1 MiB before
  // the reset, and held nothing at the device peak).
  const json& at_peak = r["peak"]["kinds"];
  EXPECT_EQ(at_peak["pool"], 3 * kMiB) << at_peak.dump();
  EXPECT_EQ(at_peak["device"], 8 * kMiB) << at_peak.dump();
  EXPECT_EQ(at_peak["managed"], 0) << at_peak.dump();
  EXPECT_EQ(totals["kinds"]["managed"]["peak_bytes"], 1 * kMiB);
  const json& contexts = r["lifecycle"]["contexts"];
  EXPECT_EQ(contexts["created"], 2);  // the primary context, then again after the reset
  EXPECT_EQ(contexts["destroyed"], 1);
  EXPECT_EQ(r["lifecycle"]["findings"], json::array());  // one reset is not churn
  EXPECT_EQ(contexts["freed_count"], 4);
  EXPECT_EQ(contexts["freed_bytes"], (4 + 2 + 1 + 2) * kMiB);
  const json& sites = r["leaks"]["device"]["sites"];
  ASSERT_EQ(sites.size(), 1u) << sites.dump();
  EXPECT_EQ(sites[0]["location"], At("device_reset.cu", "AT:after"));
  EXPECT_NE(run.err.find("gpuwatch: freed by a context reset: 9.0 MiB of device and pinned "
                         "memory in 4 allocations"),
            std::string::npos)
      << run.err;
  // The context report: everything live at the destroy, the surviving block included.
  const json c = ReadReport(dir.path() + "/device_reset.json.context-1");
  EXPECT_EQ(c["trigger"], "context_destroy");
  EXPECT_EQ(c["totals"]["device_current_bytes"], 10 * kMiB);
  EXPECT_EQ(c["leaks"]["host"]["bytes"], 2 * kMiB);
  const json& live = c["leaks"]["device"]["sites"];
  ASSERT_EQ(live.size(), 4u) << live.dump();
  EXPECT_EQ(live[0]["location"], At("device_reset.cu", "AT:device"));
  EXPECT_EQ(live[1]["location"], At("device_reset.cu", "AT:ordered"));
}

// A context per request (tests/e2e/programs/context_churn.cu: 4 requests, each ending with
// cudaDeviceReset): the lifecycle counts the 4 contexts made and destroyed, says so as a
// context_churn finding in the report, the exit summary and the text report, and times the cold
// start, from the first CUDA call to the first kernel launch.
TEST(Fidelity, ContextPerRequestIsAFindingAndTheColdStartIsTimed) {
  ScopedTempDir dir;
  ProcessResult run;
  const json r = RunUnder(dir, "context_churn", {}, &run);
  ASSERT_NE(run.out.find("context_churn: done"), std::string::npos) << run.out << run.err;
  const json& l = r["lifecycle"];
  EXPECT_EQ(l["contexts"]["created"], 4) << l.dump(1);
  EXPECT_EQ(l["contexts"]["destroyed"], 4) << l.dump(1);
  ASSERT_EQ(l["findings"].size(), 1u) << l.dump(1);
  EXPECT_EQ(l["findings"][0]["type"], "context_churn");
  EXPECT_EQ(l["findings"][0]["contexts_created"], 4);
  EXPECT_EQ(l["findings"][0]["contexts_destroyed"], 4);
  // The first launch comes after the first call and the first context; the cold start is
  // the time between the first call and it, exactly.
  const uint64_t first_call = l["first_call_ns"];
  const uint64_t first_launch = l["first_launch_ns"];
  EXPECT_GE(first_launch, l["context_ready_ns"].get<uint64_t>()) << l.dump(1);
  ASSERT_GT(first_launch, first_call) << l.dump(1);
  EXPECT_EQ(l["cold_start_ns"], first_launch - first_call) << l.dump(1);
  const std::string said =
      "finding: 4 contexts created and 4 destroyed while the process ran: a context per request";
  EXPECT_NE(run.err.find("gpuwatch: " + said), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" after the first CUDA call; host blocked"), std::string::npos) << run.err;
  const ProcessResult text =
      RunProcess({kCli, "report", dir.path() + "/context_churn.json"}, {}, "");
  EXPECT_NE(text.out.find("Lifecycle: CUDA init "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" after the first CUDA call (cold start); 4 contexts created, 4 "
                          "destroyed\n  " +
                          said),
            std::string::npos)
      << text.out;
}

// Graph memory the driver may place at one address for two allocation nodes
// whose lifetimes do not overlap (the programming guide allows it), with the
// instantiation's clone callbacks in creation order or reversed (undocumented):
// the 3 MiB is transient in each launch, the 1 MiB of the second launch is the
// one leak, and the device peak is the 3 MiB alone (4 MiB if the second
// allocation were counted before the first one's free).
TEST(Fidelity, GraphAllocationsSharingAnAddressInOneLaunch) {
  for (const std::string reuse : {"1", "0"}) {
    for (const std::string order : {"creation", "reverse"}) {
      const std::string mode = "reuse " + reuse + ", clones in " + order + " order";
      ScopedTempDir dir;
      ProcessResult run;
      const json r = RunUnder(
          dir, "graph_reuse",
          {{"GWSIM_GRAPH_ADDRESS_REUSE", reuse}, {"GWSIM_GRAPH_CLONE_ORDER", order}}, &run);
      EXPECT_NE(run.out.find(reuse == "1" ? "addresses shared" : "addresses distinct"),
                std::string::npos)
          << mode << run.out;
      const json& graph = r["totals"]["kinds"]["graph"];
      EXPECT_EQ(graph["allocs"], 4) << mode;
      EXPECT_EQ(graph["frees"], 3) << mode;
      EXPECT_EQ(graph["current_bytes"], kMiB) << mode;
      EXPECT_EQ(r["totals"]["device_peak_bytes"], 3 * kMiB) << mode;
      EXPECT_EQ(r["totals"]["unknown_frees"], 0) << mode;
      const json& sites = r["leaks"]["device"]["sites"];
      ASSERT_EQ(sites.size(), 1u) << mode << sites.dump();
      EXPECT_EQ(sites[0]["location"], At("graph_reuse.cu", "LEAK:second")) << mode;
      EXPECT_EQ(sites[0]["count"], 1) << mode;
      EXPECT_EQ(sites[0]["bytes"], kMiB) << mode;
      // The failed cudaMalloc: the graph memory the driver kept for reuse
      // (3 MiB, or 4 MiB with no reuse) less the 1 MiB live.
      const json oom = ReadReport(dir.path() + "/graph_reuse.json.oom-1");
      EXPECT_EQ(oom["oom"]["location"], At("graph_reuse.cu", "AT:oom")) << mode;
      EXPECT_EQ(oom["oom"]["graph_pool_idle_bytes"], (reuse == "1" ? 2 : 3) * kMiB) << mode;
    }
  }
}

}  // namespace
}  // namespace gpuwatch::testing
