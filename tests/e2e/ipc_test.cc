// CUDA IPC between two processes, both under gpuwatch (programs/ipc_pair.cu):
// the parent allocates 3 MiB and exports it, the child opens it, writes
// through it and closes it (twice, having opened it twice) or exits with it
// open. The child's report shows the opened memory as another process's
// (`ipc_imported`), at the line of the open, open at exit only when it was
// not closed, and never as its own leak: its exit-code gate and `gpuwatch
// check` pass. The parent's report is the same as without a child. Run with
// the simulator reporting MEMORY2 records of an opening and without
// (GWSIM_IPC_MEMORY_RECORDS: what NVIDIA's CUPTI does is not known), which a
// CUPTI client in the child counts beside gpuwatch.
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

constexpr uint64_t kBytes = 3 * kMiB;

// The member at `keys` of a report (null when there is none).
const json& Get(const json& report, std::initializer_list<const char*> keys) {
  static const json kNone;
  const json* at = &report;
  for (const char* key : keys) {
    if (!at->is_object() || !at->contains(key)) return kNone;
    at = &(*at)[key];
  }
  return *at;
}

// A count of a report's object, 0 when the report leaves it out.
uint64_t Count(const json& object, const char* key) {
  return object.is_object() ? object.value(key, uint64_t{0}) : 0;
}

const json& Kind(const json& report, const char* kind) {
  return Get(report, {"totals", "kinds", kind});
}

struct Pair {
  ProcessResult run;
  json parent = nullptr;
  json child = nullptr;
  std::string child_path;
};

// Runs `ipc_pair parent MODE` under gpuwatch (preloaded, or under `gpuwatch
// run`), each process's report at dir/report.PID.json, told apart by the
// program's first argument; a report that does not read is a failure.
Pair RunPair(const ScopedTempDir& dir, const std::string& mode,
             const std::map<std::string, std::string>& extra, bool under_run) {
  const std::string out = dir.path() + "/report.%p.json";
  std::vector<std::string> argv = {kPrograms + "/ipc_pair", "parent", mode};
  std::map<std::string, std::string> env = PreloadEnv(out, extra);
  if (under_run) {
    env = SimEnv();
    for (const auto& [k, v] : extra) env[k] = v;
    argv.insert(argv.begin(), {kCli, "run", "-o", out, "--"});
  }
  Pair pair{RunProcess(argv, env, dir.path()), nullptr, nullptr, ""};
  for (const std::string& name : dir.List()) {
    if (name.rfind("report.", 0) != 0 || name.find(".json") != name.size() - 5) continue;
    const std::string path = dir.path() + "/" + name;
    json report = ReadReport(path);
    if (report["process"]["command"][1] == "child") {
      pair.child = std::move(report);
      pair.child_path = path;
    } else {
      pair.parent = std::move(report);
    }
  }
  return pair;
}

// What every report of the child says whatever it did with the mapping: one
// opening of 3 MiB of another process's memory at the open's line, none of
// its own device memory, one copy each way.
void ExpectChildOpenedAndCopied(const json& child) {
  ASSERT_TRUE(child.is_object());
  const json& ipc = Kind(child, "ipc_imported");
  EXPECT_EQ(Count(ipc, "allocs"), 1u) << "opened twice, mapped once";
  EXPECT_EQ(Count(ipc, "alloc_bytes"), kBytes);
  EXPECT_EQ(Count(ipc, "peak_bytes"), kBytes);
  const json& totals = Get(child, {"totals"});
  EXPECT_EQ(Count(totals, "device_peak_bytes"), 0u) << "not this process's device memory";
  EXPECT_EQ(Count(totals, "device_current_bytes"), 0u);
  EXPECT_EQ(Count(totals, "device_live_count"), 0u);
  EXPECT_EQ(Count(totals, "host_live_count"), 0u);
  EXPECT_EQ(Count(Kind(child, "device"), "allocs"), 0u);
  EXPECT_EQ(Count(totals, "unknown_frees"), 0u);
  for (const char* direction : {"h2d", "d2h"}) {
    EXPECT_EQ(Count(Get(totals, {"copies", direction}), "count"), 1u) << direction;
    EXPECT_EQ(Count(Get(totals, {"copies", direction}), "bytes"), kBytes) << direction;
  }
  for (const char* section : {"device", "host"}) {
    EXPECT_EQ(Count(Get(child, {"leaks", section}), "bytes"), 0u) << section;
    EXPECT_EQ(Count(Get(child, {"leaks", section}), "count"), 0u) << section;
  }
  EXPECT_TRUE(SiteAt(child, ProgramLine("ipc_pair.cu", "IPC:open")).is_null())
      << "an opening is no allocation site of the process";
}

// The parent: 3 MiB allocated and freed, nothing of another process's.
void ExpectParentAllocatedAndFreed(const json& parent) {
  ASSERT_TRUE(parent.is_object());
  const json& device = Kind(parent, "device");
  EXPECT_EQ(Count(device, "allocs"), 1u);
  EXPECT_EQ(Count(device, "alloc_bytes"), kBytes);
  EXPECT_EQ(Count(device, "frees"), 1u);
  EXPECT_EQ(Count(device, "current_bytes"), 0u);
  EXPECT_EQ(Count(Get(parent, {"totals"}), "device_peak_bytes"), kBytes);
  EXPECT_EQ(Count(Kind(parent, "ipc_imported"), "allocs"), 0u);
  for (const char* section : {"device", "host", "ipc_imported"}) {
    EXPECT_EQ(Count(Get(parent, {"leaks", section}), "bytes"), 0u) << section;
  }
}

// What a report says of memory and copies, without times.
json MemoryFigures(const json& report) {
  json sites = json::array();
  for (const json& s : report["sites"]) {
    sites.push_back({s["location"], s["allocs"], s["alloc_bytes"], s["live_device_bytes"]});
  }
  return {{"totals", report["totals"]},
          {"leaks", report["leaks"]},
          {"peak", {report["peak"]["device_bytes"], report["peak"]["kinds"]}},
          {"sites", sites}};
}

class Ipc : public ::testing::TestWithParam<const char*> {
 protected:
  std::map<std::string, std::string> Env() const {
    return {{"GWSIM_IPC_MEMORY_RECORDS", GetParam()}};
  }
  // The line the child prints: MEMORY2 records of the opened memory that a
  // CUPTI client beside gpuwatch got (an ALLOCATION at the open, a RELEASE
  // at the last close, when the simulator makes them).
  std::string RecordsLine(int with_records) const {
    const int n = std::string(GetParam()) == "1" ? with_records : 0;
    return "ipc_pair child: " + std::to_string(n) + " memory records of the opened memory\n";
  }
};

// Opened twice and closed twice: nothing open at exit.
TEST_P(Ipc, AChildThatClosesWhatItOpenedHasNothingOpenAtExit) {
  ScopedTempDir dir;
  const Pair pair = RunPair(dir, "close", Env(), false);
  ASSERT_EQ(pair.run.exit_code, 0) << pair.run.err;
  EXPECT_EQ(pair.run.out, RecordsLine(2) + "ipc_pair child: done\nipc_pair: done\n");
  ASSERT_NO_FATAL_FAILURE(ExpectChildOpenedAndCopied(pair.child));
  const json& ipc = Kind(pair.child, "ipc_imported");
  EXPECT_EQ(Count(ipc, "frees"), 1u) << "closed twice, unmapped once";
  EXPECT_EQ(Count(ipc, "current_bytes"), 0u);
  EXPECT_EQ(Count(ipc, "current_count"), 0u);
  EXPECT_EQ(Count(Get(pair.child, {"leaks", "ipc_imported"}), "bytes"), 0u);
  EXPECT_EQ(Get(pair.child, {"leaks", "ipc_imported", "sites"}), json::array());
  ExpectParentAllocatedAndFreed(pair.parent);
}

// Left open: shown as another process's memory open at exit, at the line of
// the open, apart from this process's leaks; no gate fails for it.
TEST_P(Ipc, AChildThatKeepsItOpenShowsItApartFromItsOwnLeaks) {
  ScopedTempDir dir;
  std::map<std::string, std::string> env = Env();
  env["GPUWATCH_EXITCODE"] = "3";  // the child's leak gate: exits 3 on a leak of its own
  const Pair pair = RunPair(dir, "keep", env, false);
  ASSERT_EQ(pair.run.exit_code, 0) << "the parent checks that the child exited 0\n" << pair.run.err;
  EXPECT_EQ(pair.run.out, RecordsLine(1) + "ipc_pair child: done\nipc_pair: done\n");
  ASSERT_NO_FATAL_FAILURE(ExpectChildOpenedAndCopied(pair.child));
  const json& ipc = Kind(pair.child, "ipc_imported");
  EXPECT_EQ(Count(ipc, "frees"), 0u);
  EXPECT_EQ(Count(ipc, "current_bytes"), kBytes);
  EXPECT_EQ(Count(ipc, "current_count"), 1u);
  const std::string open_line = ProgramLine("ipc_pair.cu", "IPC:open");
  const json& open = Get(pair.child, {"leaks", "ipc_imported"});
  EXPECT_EQ(Count(open, "bytes"), kBytes);
  EXPECT_EQ(Count(open, "count"), 1u);
  ASSERT_TRUE(open.is_object());
  ASSERT_EQ(open["sites"].size(), 1u) << open.dump(1);
  EXPECT_EQ(open["sites"][0]["location"], open_line);
  EXPECT_EQ(Count(open["sites"][0], "bytes"), kBytes);
  EXPECT_EQ(Count(open["sites"][0]["kinds"], "ipc_imported"), kBytes);
  EXPECT_NE(LineWith(pair.run.err, {"still open: 3.0 MiB of another process's memory",
                                    "not a leak of this process", "in 1 mapping from 1 site"}),
            "")
      << pair.run.err;
  EXPECT_NE(LineWith(pair.run.err, {"3.0 MiB in", open_line}), "") << pair.run.err;
  EXPECT_EQ(LineWith(pair.run.err, {"still live"}), "") << pair.run.err;
  const ProcessResult check = RunProcess({kCli, "check", pair.child_path}, {}, dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const ProcessResult text = RunProcess({kCli, "report", pair.child_path}, {}, dir.path());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(LineWith(text.out, {"Open at exit, another process's memory", "3.0 MiB in 1 mapping"}),
            "")
      << text.out;
  EXPECT_NE(LineWith(text.out, {"3.0 MiB", open_line}), "") << text.out;
  EXPECT_NE(LineWith(text.out, {"No device memory leaked."}), "") << text.out;
  ExpectParentAllocatedAndFreed(pair.parent);
}

// The exporter's report is the one it would have without a child: exporting
// marks nothing, and what the child did is the child's.
TEST_P(Ipc, TheParentsReportIsTheSameAsWithoutAChild) {
  ScopedTempDir alone_dir;
  const Pair alone = RunPair(alone_dir, "alone", Env(), false);
  ASSERT_EQ(alone.run.exit_code, 0) << alone.run.err;
  EXPECT_EQ(alone.run.out, "ipc_pair: done\n");
  EXPECT_TRUE(alone.child.is_null());
  ASSERT_NO_FATAL_FAILURE(ExpectParentAllocatedAndFreed(alone.parent));
  for (const char* mode : {"close", "keep"}) {
    ScopedTempDir dir;
    const Pair pair = RunPair(dir, mode, Env(), false);
    ASSERT_EQ(pair.run.exit_code, 0) << pair.run.err;
    ASSERT_NO_FATAL_FAILURE(ExpectParentAllocatedAndFreed(pair.parent));
    EXPECT_EQ(MemoryFigures(pair.parent), MemoryFigures(alone.parent)) << mode;
  }
}

// The same pair under `gpuwatch run`: each process's report where -o says.
TEST_P(Ipc, UnderGpuwatchRunEachProcessReportsItsOwn) {
  ScopedTempDir dir;
  const Pair pair = RunPair(dir, "keep", Env(), true);
  ASSERT_EQ(pair.run.exit_code, 0) << pair.run.err;
  ASSERT_NO_FATAL_FAILURE(ExpectChildOpenedAndCopied(pair.child));
  const json& open = Get(pair.child, {"leaks", "ipc_imported"});
  EXPECT_EQ(Count(open, "bytes"), kBytes);
  ASSERT_TRUE(open.is_object());
  ASSERT_EQ(open["sites"].size(), 1u) << open.dump(1);
  EXPECT_EQ(open["sites"][0]["location"], ProgramLine("ipc_pair.cu", "IPC:open"));
  ExpectParentAllocatedAndFreed(pair.parent);
}

INSTANTIATE_TEST_SUITE_P(MemoryRecords, Ipc, ::testing::Values("0", "1"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "1" ? "WithOpeningRecords"
                                                                 : "WithoutOpeningRecords";
                         });

}  // namespace
}  // namespace gpuwatch::testing
