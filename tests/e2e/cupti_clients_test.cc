// Other CUPTI clients in the process beside gpuwatch (interpose/cupti/cupti_mux.h):
// tests/programs/cupti_client (linked against libcupti, as PyTorch's Kineto
// is) and cupti_client_dlsym (libcupti dlopened and each function looked up
// with dlsym, as XLA's tracer and ctypes tools do), using CUPTI's callbacks,
// its activity records, both, or both and then cuptiFinalize(), before the
// program's first CUDA call or after it (gpuwatch, preloaded into a program
// that links the CUDA runtime, attaches before either; a client that comes
// before gpuwatch is host_cuda_test's own_cupti). Under LD_PRELOAD and `gpuwatch run`
// the client prints exactly what it prints without gpuwatch, and gpuwatch's
// report is the one it writes when the client uses no CUPTI at all.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

enum class Attach { kNone, kPreload, kRun, kInjection };

struct ClientRun {
  ProcessResult process;
  json report;
};

// PROGRAM MODE [late] with gpuwatch attached as `attach`.
ClientRun RunClient(const std::string& program, const std::string& mode, bool late, Attach attach,
                    const std::map<std::string, std::string>& extra = {}) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/r.json";
  std::vector<std::string> argv = {kPrograms + "/" + program, mode};
  if (late) argv.emplace_back("late");
  auto env = SimEnv();
  env.insert(extra.begin(), extra.end());
  switch (attach) {
    case Attach::kNone:
      break;
    case Attach::kPreload:
      env["LD_PRELOAD"] = kLib;
      env["GPUWATCH_OUTPUT"] = report;
      break;
    case Attach::kInjection:
      env["CUDA_INJECTION64_PATH"] = kLib;
      env["GPUWATCH_OUTPUT"] = report;
      break;
    case Attach::kRun:
      argv.insert(argv.begin(), {kCli, "run", "-o", report, "--"});
      break;
  }
  ClientRun run;
  run.process = RunProcess(argv, env, dir.path());
  if (attach != Attach::kNone) run.report = ReadJson(report);
  return run;
}

// `j` without the keys that say when (on the wall clock), recursively.
json WithoutTimes(json j) {
  if (j.is_object()) {
    j.erase("oldest_ns");
    j.erase("sites_time_ns");
    for (auto& [key, value] : j.items()) value = WithoutTimes(value);
  } else if (j.is_array()) {
    for (json& value : j) value = WithoutTimes(value);
  }
  return j;
}

// What of a report must not change with another client in the process: every
// count, byte and site of memory, copies and kernels.
json Recorded(const json& report) {
  json out;
  for (const char* key : {"totals", "leaks", "kernels", "peak"}) {
    out[key] = report.contains(key) ? report[key] : json();
  }
  json transfers = report.value("transfers", json::object());
  transfers.erase("best_gbps");  // a rate: measured on the wall clock
  out["transfers"] = transfers;
  return WithoutTimes(out);
}

using Case = std::tuple<std::string, std::string, bool>;  // program, mode, late

class CuptiClient : public ::testing::TestWithParam<Case> {};

// The client sees the same callbacks and records with gpuwatch as without;
// gpuwatch records the same with the client as without.
TEST_P(CuptiClient, SeesWhatItSeesAloneAndGpuwatchRecordsTheSame) {
  const auto& [program, mode, late] = GetParam();
  const ClientRun alone = RunClient(program, mode, late, Attach::kNone);
  ASSERT_EQ(alone.process.exit_code, 0) << alone.process.out << alone.process.err;
  for (const Attach attach : {Attach::kPreload, Attach::kRun}) {
    SCOPED_TRACE(attach == Attach::kPreload ? "LD_PRELOAD" : "gpuwatch run");
    const ClientRun with = RunClient(program, mode, late, attach);
    EXPECT_EQ(with.process.exit_code, 0) << with.process.err;
    EXPECT_EQ(with.process.out, alone.process.out);
    EXPECT_TRUE(LinesStartingWith(with.process.err, "gpuwatch: profiling is off").empty())
        << with.process.err;
    EXPECT_TRUE(LinesStartingWith(with.process.err, "gpuwatch: libcupti was loaded").empty())
        << with.process.err;
    const ClientRun baseline = RunClient(program, "none", late, attach);
    ASSERT_TRUE(baseline.report.is_object()) << baseline.process.err;
    ASSERT_TRUE(with.report.is_object()) << with.process.err;
    EXPECT_EQ(Recorded(with.report), Recorded(baseline.report));
  }
}

// What the client saw, exactly (the simulator's counts): the comparison above
// would also pass if the client saw nothing either way.
TEST_P(CuptiClient, SeesEveryCallAndRecordOfItsWindow) {
  const auto& [program, mode, late] = GetParam();
  const ClientRun with = RunClient(program, mode, late, Attach::kPreload);
  ASSERT_EQ(with.process.exit_code, 0) << with.process.out << with.process.err;
  const std::string& out = with.process.out;
  const bool callbacks = mode != "activity";
  const bool activity = mode != "callbacks";
  // finalize: the client stops after FirstWork (3 mallocs, 1 free, 2 copies).
  const bool first_only = mode == "finalize";
  if (callbacks) {
    EXPECT_NE(out.find("subscribe: 0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("cudaGetLastError enabled: 0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("enable a cbid out of range: 1\n"), std::string::npos) << out;
    const std::string mallocs = first_only ? "3" : "4";
    EXPECT_NE(out.find("callback runtime cudaMalloc enter: " + mallocs + "\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("callback runtime cudaMalloc exit: " + mallocs + "\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("callback runtime cudaLaunchKernel enter: 2\n"), std::string::npos) << out;
    EXPECT_NE(out.find("correlationData mismatches: 0\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("cudaGetLastError enter"), std::string::npos) << out;
    // Runtime calls' driver calls are seen where the runtime reports them.
    EXPECT_FALSE(LineWith(out, {"domains seen:", " 2"}).empty()) << out;
  }
  if (activity) {
    // Records of the window only: FirstWork's copies and kernels, not
    // SecondWork's 512 KiB copy (after disable or finalize).
    EXPECT_NE(out.find("memcpy kind 1: 1048576 bytes\n"), std::string::npos) << out;
    EXPECT_NE(out.find("memcpy kind 2: 1048576 bytes\n"), std::string::npos) << out;
    EXPECT_NE(out.find("records of kind 10: 2\n"), std::string::npos) << out;
    EXPECT_NE(out.find("memory allocations: 3, 3145728 bytes\n"), std::string::npos) << out;
    EXPECT_NE(out.find("unknown 0, outstanding 0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("device buffer size: 64 MiB\n"), std::string::npos) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    , CuptiClient,
    ::testing::Combine(::testing::Values("cupti_client", "cupti_client_dlsym"),
                       ::testing::Values("callbacks", "activity", "both", "finalize"),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<Case>& info) {
      const std::string program = std::get<0>(info.param) == "cupti_client" ? "Linked" : "Dlsym";
      std::string mode = std::get<1>(info.param);
      mode[0] = static_cast<char>(mode[0] - 'a' + 'A');
      return program + mode + (std::get<2>(info.param) ? "AfterCuda" : "BeforeCuda");
    });

// A client's cuptiFinalize() detaches nobody but itself: gpuwatch sees the
// frees after it (no false leak), and the report's totals count them.
TEST(CuptiClients, FinalizeLeavesGpuwatchAttached) {
  const ClientRun with = RunClient("cupti_client", "finalize", false, Attach::kPreload);
  ASSERT_EQ(with.process.exit_code, 0) << with.process.err;
  ASSERT_NE(with.process.out.find("finalized\n"), std::string::npos) << with.process.out;
  const json& device = with.report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 4);  // 3 before the finalize, 1 after
  EXPECT_EQ(device["frees"], 3);   // 1 before, 2 after
  EXPECT_EQ(device["current_bytes"], 1 * kMiB);
  const json& sites = with.report["leaks"]["device"]["sites"];
  ASSERT_EQ(sites.size(), 1u) << sites.dump();
  EXPECT_EQ(sites[0]["bytes"], 1 * kMiB);
}

// gpuwatch's kernel timing stays off although the client asked CUPTI for
// kernel records: they are the client's.
TEST(CuptiClients, ClientKindsAreNotGpuwatchs) {
  const ClientRun with = RunClient("cupti_client", "activity", false, Attach::kPreload);
  ASSERT_EQ(with.process.exit_code, 0) << with.process.err;
  EXPECT_EQ(with.report["kernels"]["timing"], false);
  EXPECT_EQ(with.report["kernels"]["launches"], 2);
  // And gpuwatch's copies keep their timing (its records still come).
  const json& totals = with.report["transfers"]["totals"];
  ASSERT_EQ(totals.size(), 2u) << totals.dump();
  for (const json& t : totals) EXPECT_EQ(t["timed_count"], t["count"]) << t.dump();
}

// GPUWATCH_SHARE_CUPTI=0: CUPTI as it is. gpuwatch, attached when the
// program loaded (it links the CUDA runtime), holds the subscription and the
// client is refused as CUPTI refuses a second subscriber; its activity
// registration would replace gpuwatch's, so only its callbacks are asked for.
TEST(CuptiClients, SharingOffGivesCuptiAsItIs) {
  const ClientRun with = RunClient("cupti_client", "callbacks", false, Attach::kPreload,
                                   {{"GPUWATCH_SHARE_CUPTI", "0"}});
  EXPECT_EQ(with.process.exit_code, 1) << with.process.err;  // its unsubscribe fails too
  EXPECT_EQ(with.process.out.rfind("subscribe: 39\n", 0), 0u) << with.process.out;
  ASSERT_TRUE(with.report.is_object()) << with.process.err;
  EXPECT_EQ(with.report["totals"]["kinds"]["device"]["allocs"], 4);
}

// Loaded by the driver alone (CUDA_INJECTION64_PATH), gpuwatch comes after
// libcupti and cannot share: a client that subscribed first keeps CUPTI, and
// gpuwatch says it is off, naming the holder.
TEST(CuptiClients, InjectionAloneGivesWayToAClientThatCameFirst) {
  const ClientRun alone = RunClient("cupti_client", "callbacks", false, Attach::kNone);
  const ClientRun with = RunClient("cupti_client", "callbacks", false, Attach::kInjection);
  EXPECT_EQ(with.process.exit_code, 0) << with.process.err;
  EXPECT_EQ(with.process.out, alone.process.out);
  const auto lines = LinesStartingWith(with.process.err, "gpuwatch: profiling is off");
  ASSERT_EQ(lines.size(), 1u) << with.process.err;
  EXPECT_NE(lines[0].find("CUPTI for cupti_client"), std::string::npos) << lines[0];
}

// A ctypes client (cupti-python, small tools): libcupti dlopened by Python,
// every function looked up with dlsym on the handle, under `gpuwatch run`.
TEST(CuptiClients, PythonCtypesClientSeesWhatItSeesAlone) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  const std::string python = "/usr/bin/python3";
  if (RunProcess({python, "-c", "import ctypes"}, {}, "/").exit_code != 0) {
    GTEST_SKIP() << "no " << python;
  }
  ScopedTempDir dir;
  const std::string script = kSourceDir + "/tests/e2e/programs/ctypes_client.py";
  const ProcessResult alone = RunProcess({python, script}, SimEnv(), dir.path());
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.out,
            "subscribe: 0\nenable 20 0\nenable 22 0\n"
            "callback 2 20 enter 3\ncallback 2 20 exit 3\n"
            "callback 2 22 enter 3\ncallback 2 22 exit 3\nunsubscribe: 0\n");
  const ProcessResult with = RunProcess(
      {kCli, "run", "-o", dir.path() + "/r.json", "--", python, script}, SimEnv(), dir.path());
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, alone.out);
  const json r = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["totals"]["kinds"]["device"]["allocs"], 3);
  EXPECT_EQ(r["totals"]["kinds"]["device"]["frees"], 3);
}

// Two subscribers in one process: CUPTI alone refuses the second; beside
// gpuwatch both work, each with a correlationData of its own per call (the
// first marks it with 0xc11e..., the second with 0xb0b0..., and each finds
// its own at EXIT).
TEST(CuptiClients, TwoSubscribersEachKeepTheirOwnCorrelationData) {
  const ClientRun alone = RunClient("cupti_client", "two", false, Attach::kNone);
  EXPECT_NE(alone.process.out.find("second subscribe: 39\n"), std::string::npos)
      << alone.process.out;
  for (const Attach attach : {Attach::kPreload, Attach::kRun}) {
    const ClientRun with = RunClient("cupti_client", "two", false, attach);
    EXPECT_EQ(with.process.exit_code, 0) << with.process.err;
    const std::string& out = with.process.out;
    EXPECT_NE(out.find("second subscribe: 0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("correlationData mismatches: 0\n"), std::string::npos) << out;
    // 4 cudaMalloc and 3 cudaFree ENTERs.
    EXPECT_NE(out.find("second: 7 calls, 0 correlationData mismatches\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("callback runtime cudaMalloc enter: 4\n"), std::string::npos) << out;
  }
}

// Loaded by the driver alone into a process that has libcupti already (an
// activity-only client: no subscription to collide on), gpuwatch records but
// says in one line that it cannot share CUPTI there, and what would.
TEST(CuptiClients, InjectionAloneSaysItCannotShare) {
  const ClientRun with = RunClient("cupti_client", "activity", true, Attach::kInjection);
  EXPECT_EQ(with.process.exit_code, 0) << with.process.err;
  const auto lines = LinesStartingWith(with.process.err, "gpuwatch: libcupti was loaded before");
  ASSERT_EQ(lines.size(), 1u) << with.process.err;
  EXPECT_NE(lines[0].find("under `gpuwatch run` or LD_PRELOAD both work"), std::string::npos);
  ASSERT_TRUE(with.report.is_object()) << with.process.err;
  EXPECT_EQ(with.report["totals"]["kinds"]["device"]["allocs"], 4);
}

// Loaded by the driver alone, gpuwatch cannot keep a client from calling
// CUPTI's own cuptiFinalize: it notices the detach, says so, the report says
// recording stopped, and no gate vouches for it (check fails, and
// GPUWATCH_EXITCODE turns the status 0 into its own).
TEST(CuptiClients, InjectionAloneADetachIsNoticedAndNoGatePassesIt) {
  ScopedTempDir dir;
  const ClientRun with =
      RunClient("cupti_client", "finalize", true, Attach::kInjection, {{"GPUWATCH_EXITCODE", "5"}});
  EXPECT_EQ(with.process.exit_code, 5) << with.process.err;
  EXPECT_NE(with.process.out.find("subscribe: 39\n"), std::string::npos) << with.process.out;
  EXPECT_EQ(
      LinesStartingWith(with.process.err, "gpuwatch: CUPTI was detached from gpuwatch").size(), 1u)
      << with.process.err;
  EXPECT_EQ(LinesStartingWith(with.process.err, "gpuwatch: recording had stopped by ").size(), 1u)
      << with.process.err;
  EXPECT_NE(
      with.process.err.find("exit status 0 changed to 5: the run was not recorded to its end"),
      std::string::npos)
      << with.process.err;
  ASSERT_TRUE(with.report.is_object()) << with.process.err;
  const json& stopped = with.report["gpuwatch"]["recording_stopped"];
  ASSERT_TRUE(stopped.is_object()) << with.report["gpuwatch"].dump();
  EXPECT_NE(stopped["why"].get<std::string>().find("cuptiFinalize"), std::string::npos);
  // Only what came before the detach: FirstWork's 3 allocations and 1 free.
  EXPECT_EQ(with.report["totals"]["kinds"]["device"]["allocs"], 3);
  const std::string path = dir.path() + "/r.json";
  std::ofstream(path) << with.report.dump();
  const ProcessResult check =
      RunProcess({kCli, "check", path, "--max-leak", "1GiB"}, SimEnv(), dir.path());
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("FAIL  recorded: not recorded to its end: CUPTI was detached"),
            std::string::npos)
      << check.out;
}

}  // namespace
}  // namespace gpuwatch::testing
