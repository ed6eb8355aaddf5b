// End-to-end tests of a process that cannot answer: hung in a CUDA call
// (tests/e2e/programs/hung_copy.cu: a copy behind a kernel that never
// finishes, GWSIM_HANG_KERNEL) and then stopped with SIGSTOP. Its status page
// (libgpuwatch/base/status_page.h) is read by `gpuwatch why`, `gpuwatch top
// --once` and `gpuwatch exporter --textfile --once`: the call, how long it
// has lasted (growing), its line, what the process holds.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "libgpuwatch/base/status_page.h"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

// hung_copy under gpuwatch, its copy hung, serving its live state in `live`.
class HungCopy {
 public:
  // `mode`: "sync" hangs in cudaDeviceSynchronize instead of the copy.
  HungCopy(const ScopedTempDir& dir, const std::string& live, const std::string& mode = "") {
    std::map<std::string, std::string> env =
        PreloadEnv(dir.path() + "/hung.json", {{"GPUWATCH_LIVE_DIR", live}});
    env["GWSIM_HANG_KERNEL"] = "never_ends";
    std::vector<std::string> argv = {kPrograms + "/hung_copy"};
    if (!mode.empty()) argv.push_back(mode);
    child_ = StartProcess(argv, env, dir.path(), {.no_core_dumps = true});
    copying_ = WaitForOutput(child_, "hung_copy: copying\n");
  }
  ~HungCopy() {
    kill(child_.pid, SIGKILL);
    kill(child_.pid, SIGCONT);
    FinishProcess(child_, 60000);
  }
  HungCopy(const HungCopy&) = delete;
  HungCopy& operator=(const HungCopy&) = delete;
  bool copying() const { return copying_; }
  pid_t pid() const { return child_.pid; }
  const std::string& err() const { return child_.err_text; }

 private:
  RunningProcess child_;
  bool copying_ = false;
};

ProcessResult Why(const std::string& live, pid_t pid) {
  return RunProcess({kCli, "why", std::to_string(pid), "--dir", live}, {{"LANG", "C"}}, "");
}

// `gpuwatch top --once`, 200 columns wide, waiting `timeout` ms for answers.
ProcessResult TopOnce(const std::string& live, const std::string& timeout) {
  return RunProcess(
      {kCli, "top", "--once", "--width", "200", "--timeout-ms", timeout, "--dir", live},
      {{"LANG", "C"}}, "");
}

// What `gpuwatch exporter --textfile DIR/textfile --once` writes, waiting
// `timeout` ms for answers; "" when it failed.
std::string ExportOnce(const ScopedTempDir& dir, const std::string& live,
                       const std::string& timeout) {
  const std::string textfile = dir.path() + "/textfile";
  mkdir(textfile.c_str(), 0755);
  const ProcessResult r = RunProcess(
      {kCli, "exporter", "--textfile", textfile, "--once", "--timeout-ms", timeout, "--dir", live},
      {}, "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? ReadFile(textfile + "/gpuwatch.prom") : "";
}

// Runs `run` until `done` says its output is the one expected, for 60 s at
// most (a hang guard: the page is written at once, its site within a
// second); the last output.
std::string Until(const std::function<std::string()>& run,
                  const std::function<bool(const std::string&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string out = run();
  while (!done(out) && std::chrono::steady_clock::now() < deadline) out = run();
  return out;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The seconds of "in cudaMemcpy for 4.2s" (a duration under a minute); -1
// when there is none.
double CallSeconds(const std::string& out) {
  const std::string key = "in cudaMemcpy for ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return -1;
  return std::strtod(out.c_str() + at + key.size(), nullptr);
}

// hung_copy hung in its copy, and what the tests look for.
class Hung : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(hung.copying()) << hung.err(); }
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  HungCopy hung{dir, live};
  const std::string at = " at " + ProgramLine("hung_copy.cu", "HUNG:copy");
  const std::function<std::string()> why = [this] { return Why(live, hung.pid()).out; };
};

// A synchronization captures its site when a kernel was launched since the
// context's last one (one with nothing to wait for does not, to stay cheap):
// a process hung in cudaDeviceSynchronize behind that kernel shows its line.
TEST(HungSync, ASyncWaitingForAKernelShowsItsLine) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  HungCopy hung(dir, live, "sync");
  ASSERT_TRUE(hung.copying()) << hung.err();
  const std::string at = " at " + ProgramLine("hung_copy.cu", "HUNG:sync");
  const std::string out = Until([&] { return Why(live, hung.pid()).out; },
                                [&](const std::string& o) { return Has(o, at); });
  EXPECT_TRUE(Has(out, "thread " + std::to_string(hung.pid()) + ": in cudaDeviceSynchronize for "))
      << out;
  EXPECT_TRUE(Has(out, at)) << out;
}

TEST_F(Hung, WhyTopAndTheExporterShowTheCallItsDurationAndItsLine) {
  // The site is written by gpuwatch's thread within a second of the call.
  const std::string first = Until(why, [&](const std::string& o) { return Has(o, at); });
  const std::string thread = "thread " + std::to_string(hung.pid()) + ": in cudaMemcpy for ";
  EXPECT_TRUE(Has(first, thread)) << first;
  EXPECT_TRUE(Has(first, at)) << first;
  EXPECT_TRUE(Has(first, "  last completed: cudaLaunchKernel, ")) << first;
  EXPECT_TRUE(Has(first, "pid " + std::to_string(hung.pid()) + ": " + kPrograms + "/hung_copy\n"))
      << first;
  // What it holds and its last checkpoint (the tests' environment writes
  // them once a second), once gpuwatch's thread has written them.
  const std::string checkpoint = "last checkpoint: " + dir.path() + "/hung.json, ";
  const std::string held = Until(why, [&](const std::string& o) {
    return Has(o, "holds: 512.0 KiB on device 0\n") && Has(o, checkpoint);
  });
  EXPECT_TRUE(Has(held, "holds: 512.0 KiB on device 0\n")) << held;
  EXPECT_TRUE(Has(held, checkpoint)) << held;
  // The call's duration grows.
  const double before = CallSeconds(held);
  ASSERT_GE(before, 0) << held;
  const std::string later =
      Until(why, [&](const std::string& o) { return CallSeconds(o) > before + 0.5; });
  EXPECT_GT(CallSeconds(later), before + 0.5) << held << later;

  // `top --once` lists it with the call under its row.
  const ProcessResult top = TopOnce(live, "60000");
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_TRUE(Has(top.out, "         in cudaMemcpy ")) << top.out;
  EXPECT_TRUE(Has(top.out, at + "\n")) << top.out;
  EXPECT_FALSE(Has(top.out, "no answer")) << top.out;

  // The exporter's gauge: the time in the call so far.
  const std::string metrics = ExportOnce(dir, live, "60000");
  const std::string line =
      LineWith(metrics, {"gpuwatch_cuda_call_in_progress_seconds{pid=\"" +
                             std::to_string(hung.pid()) + "\",command=\"hung_copy\"",
                         "call=\"cudaMemcpy\"}"});
  ASSERT_FALSE(line.empty()) << metrics;
  EXPECT_GT(std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr), before) << line;
  EXPECT_TRUE(Has(metrics, "# TYPE gpuwatch_cuda_call_in_progress_seconds gauge")) << metrics;
}

TEST_F(Hung, StoppedItIsReadFromItsPage) {
  const std::string running = Until(why, [&](const std::string& o) {
    return Has(o, at) && Has(o, "holds: 512.0 KiB on device 0\n");
  });
  ASSERT_TRUE(Has(running, at)) << running;
  const double before = CallSeconds(running);
  ASSERT_TRUE(StopProcess(hung.pid()));
  // Stopped: the socket does not answer; the page still says where it is,
  // and the call's time goes on.
  const std::string stopped = Until(why, [&](const std::string& o) {
    return Has(o, "[stopped]") && CallSeconds(o) > before + 0.5;
  });
  EXPECT_TRUE(Has(stopped, "pid " + std::to_string(hung.pid()) + ": ")) << stopped;
  EXPECT_TRUE(Has(stopped, "[stopped]")) << stopped;
  EXPECT_TRUE(Has(stopped, at)) << stopped;
  EXPECT_TRUE(Has(stopped, "holds: 512.0 KiB on device 0\n")) << stopped;
  EXPECT_GT(CallSeconds(stopped), before + 0.5) << running << stopped;

  // top: no answer within its 1 s, listed from the page with the call.
  const ProcessResult top = TopOnce(live, "1000");
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_TRUE(Has(top.out, "pid " + std::to_string(hung.pid()) + ": no answer within 1000 ms"))
      << top.out;
  EXPECT_TRUE(Has(top.out, "(no answer: its status page)")) << top.out;
  EXPECT_TRUE(Has(top.out, "         in cudaMemcpy ")) << top.out;
  EXPECT_TRUE(Has(top.out, at + "  (no answer")) << top.out;
  EXPECT_TRUE(Has(top.out, " 512K ")) << top.out;

  // The exporter's gauge, from the page alone.
  const std::string metrics = ExportOnce(dir, live, "1000");
  EXPECT_FALSE(LineWith(metrics, {"gpuwatch_cuda_call_in_progress_seconds{pid=\"" +
                                      std::to_string(hung.pid()) + "\"",
                                  "call=\"cudaMemcpy\"}"})
                   .empty())
      << metrics;
  EXPECT_TRUE(LineWith(metrics, {"gpuwatch_device_memory_live_bytes{pid=\"" +
                                 std::to_string(hung.pid()) + "\""})
                  .empty())
      << metrics;
  EXPECT_TRUE(Has(metrics, "gpuwatch_exporter_processes 0\n")) << metrics;
}

// Real PyTorch hung (tests/e2e/programs/torch_fault.py, its multiplication's
// kernel never finishing: GWSIM_HANG_KERNEL=MulFunctor): the copy back to
// the host waits for ever, and `gpuwatch why` names the script's line.
// Skipped without GPUWATCH_TORCH_PYTHON (tests/e2e/torch_test.cc).
TEST(HungTorch, WhyNamesThePythonLineOfTheHungCall) {
  const char* python = std::getenv("GPUWATCH_TORCH_PYTHON");  // NOLINT(concurrency-mt-unsafe)
  if (python == nullptr || *python == '\0' || access(python, X_OK) != 0) {
    GTEST_SKIP() << "GPUWATCH_TORCH_PYTHON is not set to an executable";
  }
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  const std::string script = kSourceDir + "/tests/e2e/programs/torch_fault.py";
  std::map<std::string, std::string> env =
      PreloadEnv(dir.path() + "/hung.json", {{"GPUWATCH_LIVE_DIR", live}});
  env["PYTHONUNBUFFERED"] = "1";
  env["GWSIM_HANG_KERNEL"] = "MulFunctor";
  RunningProcess child = StartProcess({python, script}, env, dir.path(), {.no_core_dumps = true});
  const bool launched = WaitForOutput(child, "launched\n");
  const std::string at = " at torch_fault.py:" + std::to_string(LineOf(script, "# SURFACES"));
  std::string out;
  if (launched) {
    out = Until([&] { return Why(live, child.pid).out; },
                [&](const std::string& o) { return Has(o, at); });
  }
  kill(child.pid, SIGKILL);
  const ProcessResult ended = FinishProcess(child, 60000);
  ASSERT_TRUE(launched) << ended.out << ended.err;
  EXPECT_TRUE(Has(out, "thread " + std::to_string(child.pid) + ": in cuda")) << out;
  EXPECT_TRUE(Has(out, at)) << out;
}

TEST(Why, AProcessWithoutGpuwatchIsNamedAsSuch) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  ASSERT_EQ(mkdir(live.c_str(), 0700), 0);
  const ProcessResult r = Why(live, getpid());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuwatch why: gpuwatch is not in process " + std::to_string(getpid()) +
                       " (no status page in " + live +
                       "; is GPUWATCH_LIVE off, or is it another user's?)\n");
  // A page that is not one: a clear message, not a crash.
  const std::string fake = StatusPagePath(live, getpid());
  WriteFile(fake, std::string(4096, 'x'));
  const ProcessResult bad = Why(live, getpid());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "gpuwatch why: " + fake + " is not a gpuwatch status page\n");
  WriteFile(fake, "GW");
  const ProcessResult cut = Why(live, getpid());
  EXPECT_EQ(cut.err, "gpuwatch why: " + fake + " is truncated (2 bytes)\n");
}

}  // namespace
}  // namespace gpuwatch::testing
