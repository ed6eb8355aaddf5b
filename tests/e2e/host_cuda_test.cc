// End-to-end tests of hosts that manage CUDA and CUPTI themselves: a program
// that dlopens, dlcloses and dlopens again the CUDA runtime (never linking
// it), and programs that subscribe to CUPTI themselves, before gpuwatch and
// after it. In each, the host's stdout and exit status are those of a run
// without gpuwatch, and what gpuwatch reports is asserted exactly.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

const std::string kOtherSubscriber = GPUWATCH_TEST_OTHER_SUBSCRIBER;  // gwsim_inject

// By soname, so that LD_LIBRARY_PATH picks the simulator's.
const std::string kCudart = "libcudart.so.13";
const std::string kCupti = "libcupti.so.13";

// own_cupti in `mode`, loading the runtime and CUPTI by soname.
std::vector<std::string> OwnCupti(const std::string& mode) {
  return {kPrograms + "/own_cupti", mode, kCudart, kCupti};
}

// SimEnv() with libgpuwatch.so loaded by the driver alone
// (CUDA_INJECTION64_PATH), its report written to `output`.
std::map<std::string, std::string> InjectionEnv(const std::string& output) {
  auto env = SimEnv();
  env["CUDA_INJECTION64_PATH"] = kLib;
  env["GPUWATCH_OUTPUT"] = output;
  return env;
}

// `err` without the lines gpuwatch printed.
std::string WithoutGpuwatchLines(const std::string& err) {
  std::string rest;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    end = end == std::string::npos ? err.size() : end + 1;
    if (err.compare(start, 9, "gpuwatch:") != 0) rest += err.substr(start, end - start);
    start = end;
  }
  return rest;
}

// --- dlopen / dlclose of the CUDA runtime -----------------------------------

// What dlclose of NVIDIA's runtime does to its primary context is not known:
// at exit it destroys none that a subscriber hears of (the first GPU run), so
// the simulator's runtime by default keeps its contexts when it is unloaded,
// and with GWSIM_EXIT_CONTEXT_DESTROY=1 releases them from its exit handler,
// which dlclose runs. Every test of dlopen_cudart runs both ways.
std::map<std::string, std::string> DlopenEnv(bool destroy_at_dlclose) {
  auto env = SimEnv();
  if (destroy_at_dlclose) env["GWSIM_EXIT_CONTEXT_DESTROY"] = "1";
  return env;
}

// The exit report of dlopen_cudart: every allocation of both loads, exactly.
// gpuwatch attaches inside the first load's first call (injection: no CUDA is
// loaded when the preload constructor runs), which the driver does before
// that call's ENTER callback, so it sees the call whole and nothing is
// missed. The 1 MiB the program never freed before closing the first runtime
// stays live in the report while its context lives on. When the runtime's
// exit handler releases its context (at dlclose, and at exit, before
// gpuwatch's exit report: the second runtime registered its handler after
// gpuwatch's), the driver frees what the context holds: gpuwatch writes a
// context report then, with that memory live at the destroy, and the exit
// report counts it as freed by a context reset, not as live.
void ExpectDlopenReport(const ScopedTempDir& dir, const std::string& out, bool destroy_at_dlclose) {
  const json r = ReadReport(out);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["gpuwatch"]["attach"], "injection");
  const json& device = r["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 4);
  EXPECT_EQ(device["alloc_bytes"], 1 * kMiB + 2 * kMiB + 3 * kMiB + 512 * kKiB);
  EXPECT_EQ(device["frees"], destroy_at_dlclose ? 4 : 2);
  EXPECT_EQ(device["current_bytes"], destroy_at_dlclose ? 0 : 4 * kMiB);
  EXPECT_EQ(r["totals"]["unknown_frees"], 0);
  EXPECT_EQ(r["totals"]["copies"]["h2d"]["count"], 2);
  EXPECT_EQ(r["totals"]["copies"]["h2d"]["bytes"], 128 * kKiB);
  EXPECT_EQ(r["totals"]["copies"]["d2h"]["count"], 1);
  EXPECT_EQ(r["totals"]["copies"]["d2h"]["bytes"], 64 * kKiB);
  const json& contexts = r["lifecycle"]["contexts"];
  EXPECT_EQ(contexts["freed_count"], destroy_at_dlclose ? 2 : 0) << contexts.dump();
  EXPECT_EQ(contexts["freed_bytes"], destroy_at_dlclose ? 4 * kMiB : 0) << contexts.dump();
  const json& sites = r["leaks"]["device"]["sites"];
  const std::string load1 = ProgramLine("dlopen_cudart.cc", "\"load 1: cudaMalloc 1 MiB\"");
  const std::string load2 = ProgramLine("dlopen_cudart.cc", "\"load 2: cudaMalloc 3 MiB\"");
  if (!destroy_at_dlclose) {
    ASSERT_EQ(sites.size(), 2u) << sites.dump();
    EXPECT_EQ(sites[0]["location"], load2);
    EXPECT_EQ(sites[0]["bytes"], 3 * kMiB);
    EXPECT_EQ(sites[1]["location"], load1);
    EXPECT_EQ(sites[1]["bytes"], 1 * kMiB);
    for (const std::string& name : dir.List()) {
      EXPECT_NE(name.rfind("r.json.context", 0), 0u)
          << "a context report although none was destroyed";
    }
    return;
  }
  EXPECT_TRUE(sites.empty()) << sites.dump();
  // dlclose of the first runtime destroyed its context with 1 MiB live, the
  // exit of the second its own with 3 MiB: each in its context report.
  const json first = ReadReport(out + ".context-1");
  EXPECT_EQ(first["trigger"], "context_destroy");
  EXPECT_EQ(first["totals"]["kinds"]["device"]["current_bytes"], 1 * kMiB);
  EXPECT_EQ(first["totals"]["kinds"]["device"]["allocs"], 2);
  ASSERT_EQ(first["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(first["leaks"]["device"]["sites"][0]["location"], load1);
  const json second = ReadReport(out + ".context-2");
  EXPECT_EQ(second["totals"]["kinds"]["device"]["current_bytes"], 3 * kMiB);
  ASSERT_EQ(second["leaks"]["device"]["sites"].size(), 1u);
  EXPECT_EQ(second["leaks"]["device"]["sites"][0]["location"], load2);
}

void ExpectDlopenUnderPreload(bool destroy_at_dlclose) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = {kPrograms + "/dlopen_cudart", kCudart};
  const ProcessResult plain = RunProcess(argv, DlopenEnv(destroy_at_dlclose), dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const ProcessResult traced = RunProcess(
      argv, PreloadEnv(dir.path() + "/r.json", DlopenEnv(destroy_at_dlclose)), dir.path());
  EXPECT_FALSE(traced.signaled) << traced.signal;
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(WithoutGpuwatchLines(traced.err), plain.err);
  EXPECT_TRUE(LinesStartingWith(traced.err, "gpuwatch: profiling is off").empty()) << traced.err;
  ExpectDlopenReport(dir, dir.path() + "/r.json", destroy_at_dlclose);
}

TEST(HostCuda, DlopenDlcloseDlopenOfTheRuntimeUnderPreload) { ExpectDlopenUnderPreload(false); }

TEST(HostCuda, DlopenDlcloseDlopenOfTheRuntimeUnderPreloadContextDestroyedAtDlclose) {
  ExpectDlopenUnderPreload(true);
}

// The same through `gpuwatch run`, with libcupti dlopened and dlclosed by the
// host between the two loads (gpuwatch holds its own reference to it).
void ExpectDlopenUnderRun(bool destroy_at_dlclose) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = {kPrograms + "/dlopen_cudart", kCudart, kCupti};
  const ProcessResult plain = RunProcess(argv, DlopenEnv(destroy_at_dlclose), dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("libcupti: dlclose 0\n"), std::string::npos) << plain.out;
  std::vector<std::string> run = {kCli, "run", "-o", dir.path() + "/r.json", "--"};
  run.insert(run.end(), argv.begin(), argv.end());
  const ProcessResult traced = RunProcess(run, DlopenEnv(destroy_at_dlclose), dir.path());
  EXPECT_FALSE(traced.signaled) << traced.signal;
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(WithoutGpuwatchLines(traced.err), plain.err);
  ExpectDlopenReport(dir, dir.path() + "/r.json", destroy_at_dlclose);
}

TEST(HostCuda, DlopenDlcloseDlopenOfTheRuntimeAndCuptiUnderRun) { ExpectDlopenUnderRun(false); }

TEST(HostCuda, DlopenDlcloseDlopenOfTheRuntimeAndCuptiUnderRunContextDestroyedAtDlclose) {
  ExpectDlopenUnderRun(true);
}

// --- a host that subscribes to CUPTI itself ---------------------------------

// The host subscribes before its first CUDA call; gpuwatch, injected during
// that call, finds the subscription taken: it gives way with exactly one line
// and writes nothing, and the host's own callbacks see every call.
void ExpectGivesWay(const std::map<std::string, std::string>& attach) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = OwnCupti("first");
  const ProcessResult plain = RunProcess(argv, SimEnv(), dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("own callbacks: cudaMalloc enter 3 exit 3, cudaFree enter 2 exit 2\n"),
            std::string::npos)
      << plain.out;
  auto env = SimEnv();
  env.insert(attach.begin(), attach.end());
  env["GPUWATCH_OUTPUT"] = dir.path() + "/r.json";
  const ProcessResult traced = RunProcess(argv, env, dir.path());
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  const auto lines = LinesStartingWith(traced.err, "gpuwatch:");
  ASSERT_EQ(lines.size(), 1u) << traced.err;
  EXPECT_EQ(
      lines[0].rfind("gpuwatch: profiling is off: another CUPTI client holds the subscription", 0),
      0u)
      << lines[0];
  EXPECT_NE(lines[0].find("CUPTI error 39: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(WithoutGpuwatchLines(traced.err), plain.err);
  EXPECT_TRUE(dir.List().empty()) << "a report was written although profiling is off";
}

// Preloaded, gpuwatch shares CUPTI (interpose/cupti/cupti_mux.h): the host that
// subscribed before its first CUDA call keeps every callback it had alone,
// and gpuwatch, attaching at that call, records the program as usual.
void ExpectShares(const std::vector<std::string>& prefix, std::map<std::string, std::string> env,
                  const std::string& report) {
  ScopedTempDir dir;
  const std::vector<std::string> program = OwnCupti("first");
  const ProcessResult plain = RunProcess(program, SimEnv(), dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::vector<std::string> argv = prefix;
  argv.insert(argv.end(), program.begin(), program.end());
  const ProcessResult traced = RunProcess(argv, env, dir.path());
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_NE(traced.out.find("own callbacks: cudaMalloc enter 3 exit 3, cudaFree enter 2 exit 2\n"),
            std::string::npos)
      << traced.out;
  EXPECT_TRUE(LinesStartingWith(traced.err, "gpuwatch: profiling is off").empty()) << traced.err;
  const json r = ReadReport(report);
  ASSERT_TRUE(r.is_object());
  const json& device = r["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 3);
  EXPECT_EQ(device["frees"], 2);
  EXPECT_EQ(device["current_bytes"], 256 * kKiB);
}

TEST(HostCuda, HostSubscribedFirstUnderPreloadSharesCupti) {
  ScopedTempDir out;
  ExpectShares({}, PreloadEnv(out.path() + "/r.json"), out.path() + "/r.json");
}

TEST(HostCuda, HostSubscribedFirstUnderRunSharesCupti) {
  ScopedTempDir out;
  ExpectShares({kCli, "run", "-o", out.path() + "/r.json", "--"}, SimEnv(), out.path() + "/r.json");
}

// With GPUWATCH_SHARE_CUPTI=0 CUPTI is as it is: the host holds it, and
// gpuwatch gives way.
TEST(HostCuda, HostSubscribedFirstUnderPreloadWithSharingOff) {
  ExpectGivesWay({{"LD_PRELOAD", kLib}, {"GPUWATCH_SHARE_CUPTI", "0"}});
}

TEST(HostCuda, HostSubscribedFirstUnderInjection) {
  ExpectGivesWay({{"CUDA_INJECTION64_PATH", kLib}});
}

// gpuwatch subscribes first (the host initialised CUDA before subscribing),
// loaded by the driver alone, so it cannot share: the host's cuptiSubscribe
// fails exactly as it does under any other subscriber (here the simulator's
// minimal injected profiler), the host goes on, and gpuwatch keeps counting.
TEST(HostCuda, GpuwatchInjectedFirstHostSeesTheUsualError) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = OwnCupti("second");
  auto other = SimEnv();
  other["CUDA_INJECTION64_PATH"] = kOtherSubscriber;
  const ProcessResult under_other = RunProcess(argv, other, dir.path());
  ASSERT_EQ(under_other.exit_code, 0) << under_other.err;
  EXPECT_NE(
      under_other.out.find("cuptiSubscribe: 39 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\n"),
      std::string::npos)
      << under_other.out;
  const ProcessResult traced = RunProcess(argv, InjectionEnv(dir.path() + "/r.json"), dir.path());
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, under_other.out);
  EXPECT_TRUE(LinesStartingWith(traced.err, "gpuwatch: profiling is off").empty()) << traced.err;
  const json r = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(r.is_object());
  const json& device = r["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 2);
  EXPECT_EQ(device["alloc_bytes"], 2 * kMiB);
  EXPECT_EQ(device["frees"], 1);
  EXPECT_EQ(device["current_bytes"], 1 * kMiB);
  const json& sites = r["leaks"]["device"]["sites"];
  ASSERT_EQ(sites.size(), 1u) << sites.dump();
  EXPECT_EQ(sites[0]["location"], ProgramLine("own_cupti.cc", "cuda_malloc(&p[i], size)"));
}

// own_cupti second-v2 without gpuwatch, in `dir`: it exits 0 and its
// cuptiSubscribe_v2 succeeds; a failure (HasFailure()) when not.
ProcessResult SubscribesAlone(const ScopedTempDir& dir) {
  ProcessResult plain = RunProcess(OwnCupti("second-v2"), SimEnv(), dir.path());
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("cuptiSubscribe: 0 CUPTI_SUCCESS\n"), std::string::npos) << plain.out;
  return plain;
}

// Preloaded, gpuwatch that subscribed first still gives the host a working
// CUPTI: its subscribe succeeds and its callbacks come, beside gpuwatch's.
TEST(HostCuda, GpuwatchPreloadedFirstHostStillSubscribes) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = OwnCupti("second-v2");
  const ProcessResult plain = SubscribesAlone(dir);
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(plain.out.find("own callbacks: cudaMalloc enter 2 exit 2, cudaFree enter 1 exit 1\n"),
            std::string::npos)
      << plain.out;
  const ProcessResult traced = RunProcess(argv, PreloadEnv(dir.path() + "/r.json"), dir.path());
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  const json r = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["totals"]["kinds"]["device"]["allocs"], 2);
  EXPECT_EQ(r["totals"]["kinds"]["device"]["current_bytes"], 1 * kMiB);
}

// A host that subscribes through cuptiSubscribe_v2, as current Kineto does,
// learns from CUPTI itself who holds the subscription when gpuwatch cannot
// share it (loaded by the driver alone): gpuwatch names itself when it
// subscribes, so the host's own error message can say "gpuwatch".
TEST(HostCuda, GpuwatchInjectedFirstHostUsingV2IsToldItIsGpuwatch) {
  ScopedTempDir dir;
  const std::vector<std::string> argv = OwnCupti("second-v2");
  const ProcessResult plain = SubscribesAlone(dir);
  ASSERT_FALSE(HasFailure());
  const ProcessResult traced = RunProcess(argv, InjectionEnv(dir.path() + "/r.json"), dir.path());
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_NE(traced.out.find("cuptiSubscribe: 39 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\n"),
            std::string::npos)
      << traced.out;
  // CUPTI words the holder's name its own way ("CUPTI for gpuwatch" here).
  const auto held = LinesStartingWith(traced.out, "held by: ");
  ASSERT_EQ(held.size(), 1u) << traced.out;
  EXPECT_NE(held[0].find("gpuwatch"), std::string::npos) << held[0];
  const json r = ReadReport(dir.path() + "/r.json");
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["totals"]["kinds"]["device"]["allocs"], 2);
}

}  // namespace
}  // namespace gpuwatch::testing
