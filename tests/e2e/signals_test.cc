// Reports when a signal ends the process (SIGTERM, SIGINT, SIGHUP, crashes),
// checkpoints that survive SIGKILL, and a burst of snapshot signals. Each test
// runs tests/e2e/programs/signal_wait on the simulator, once without gpuwatch
// where the outcome is compared, and with it: the process must end the same
// way, with the same output, and leave a complete report.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tests/e2e/subprocess.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

const std::string kProgram = std::string(GPUWATCH_TEST_PROGRAMS_DIR) + "/signal_wait";
const std::string kSource =
    std::string(GPUWATCH_TEST_SOURCE_DIR) + "/tests/e2e/programs/signal_wait.cu";
constexpr uint64_t kLeakBytes = (5u << 20) + 4096;  // kLeakBytes of signal_wait.cu
// Hang guards only: nothing here is expected to take more than a moment.
constexpr int kTimeoutMs = 120000;

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// A running child with pipes on stdin, stdout and stderr. RunProcess waits
// for the end; these tests talk to the child while it runs.
struct Child {
  pid_t pid = -1;
  int in = -1;
  int out = -1;
  int err = -1;
  std::string out_text;
  std::string err_text;
};

struct Ended {
  bool signaled = false;
  int sig = 0;
  int code = -1;
  std::string out;
  std::string err;
};

// Starts `argv` with the environment RunProcess gives (GPUWATCH_*, GWSIM_*,
// LD_PRELOAD and CUDA_INJECTION64_PATH removed, then `env` added). Core
// dumps are off, so that crash tests leave no core file behind.
Child Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& cwd, bool ignore_sigterm = false) {
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  int in_pipe[2];
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (ignore_sigterm) signal(SIGTERM, SIG_IGN);  // inherited through exec, as under nohup
    if (chdir(cwd.c_str()) != 0) _exit(125);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Child child;
  child.pid = pid;
  child.in = in_pipe[1];
  child.out = out_pipe[0];
  child.err = err_pipe[0];
  if (pid < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
  return child;
}

// Reads what the child wrote, waiting at most `timeout_ms`. False when both
// pipes are closed.
bool Pump(Child& c, int timeout_ms) {
  pollfd fds[2] = {{c.out, POLLIN, 0}, {c.err, POLLIN, 0}};
  if (c.out < 0 && c.err < 0) return false;
  const int n = poll(fds, 2, timeout_ms);
  if (n <= 0) return true;
  int* ends[2] = {&c.out, &c.err};
  std::string* sinks[2] = {&c.out_text, &c.err_text};
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    char buf[4096];
    const ssize_t r = read(fds[i].fd, buf, sizeof(buf));
    if (r > 0) {
      sinks[i]->append(buf, static_cast<size_t>(r));
    } else if (r == 0 || errno != EINTR) {
      close(*ends[i]);
      *ends[i] = -1;
    }
  }
  return true;
}

// Waits until the child has printed `text` on stdout.
bool WaitForOutput(Child& c, const std::string& text) {
  const int64_t deadline = NowMs() + kTimeoutMs;
  while (c.out_text.find(text) == std::string::npos) {
    if (NowMs() >= deadline || !Pump(c, 100)) return false;
  }
  return true;
}

// Closes stdin, reads everything and reaps the child (SIGKILL after the hang
// guard, which then fails the test).
Ended Finish(Child& c) {
  if (c.in >= 0) close(c.in);
  c.in = -1;
  const int64_t deadline = NowMs() + kTimeoutMs;
  while (Pump(c, 100)) {
    if (NowMs() >= deadline) {
      ADD_FAILURE() << "the child did not end; killing it";
      kill(c.pid, SIGKILL);
      break;
    }
  }
  Ended e;
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  e.signaled = WIFSIGNALED(status);
  if (e.signaled) e.sig = WTERMSIG(status);
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  e.out = c.out_text;
  e.err = c.err_text;
  return e;
}

// Starts the program, waits for "ready", sends `sig`, and waits for the end.
Ended ReadyThenSignal(const std::string& mode, const std::map<std::string, std::string>& env,
                      const std::string& cwd, int sig) {
  Child c = Spawn({kProgram, mode}, env, cwd);
  EXPECT_TRUE(WaitForOutput(c, "ready\n")) << c.err_text;
  EXPECT_EQ(kill(c.pid, sig), 0);
  return Finish(c);
}

std::map<std::string, std::string> Plain() { return {{"LD_LIBRARY_PATH", kSimDir}}; }

// Summary off: with it, the only difference on stderr would be gpuwatch's
// own summary lines.
std::map<std::string, std::string> Preload(const std::string& out) {
  return {{"LD_LIBRARY_PATH", kSimDir},
          {"LD_PRELOAD", kLib},
          {"GPUWATCH_OUTPUT", out},
          {"GPUWATCH_SUMMARY", "0"}};
}

std::string LeakLocation() {
  std::ifstream in(kSource);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find("// LEAK:signal") != std::string::npos) {
      return "signal_wait.cu:" + std::to_string(n);
    }
  }
  return "LEAK:signal marker not found";
}

// The report holds the program's one leak, at its line, with exact bytes.
void ExpectTheLeak(const json& report) {
  ASSERT_TRUE(report.is_object());
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], kLeakBytes) << device.dump(1);
  ASSERT_EQ(device["sites"].size(), 1u) << device.dump(1);
  EXPECT_EQ(device["sites"][0]["location"], LeakLocation());
  EXPECT_EQ(device["sites"][0]["bytes"], kLeakBytes);
  EXPECT_EQ(device["sites"][0]["count"], 1);
}

class StopSignal : public ::testing::TestWithParam<int> {};

TEST_P(StopSignal, ReportIsWrittenThenTheProcessDiesOfTheSameSignal) {
  const int sig = GetParam();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const Ended base = ReadyThenSignal("wait", Plain(), dir.path(), sig);
  ASSERT_TRUE(base.signaled) << base.err;
  ASSERT_EQ(base.sig, sig);
  const Ended r = ReadyThenSignal("wait", Preload(out), dir.path(), sig);
  ASSERT_TRUE(r.signaled) << "exit status " << r.code << "\n" << r.err;
  EXPECT_EQ(r.sig, sig);
  EXPECT_EQ(r.out, base.out);
  EXPECT_EQ(r.err, base.err);
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << dir.List().size() << " files; stderr: " << r.err;
  EXPECT_EQ(report["trigger"], "signal");
  EXPECT_EQ(report["label"], std::string("SIG") + sigabbrev_np(sig));
  ExpectTheLeak(report);
}

INSTANTIATE_TEST_SUITE_P(Signals, StopSignal, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string("SIG") + sigabbrev_np(info.param);
                         });

// The program installs its own SIGTERM handler after gpuwatch attached: that
// handler replaces gpuwatch's and runs as it would without it; its exit()
// writes the exit report.
TEST(Signals, ProgramsOwnHandlerRunsAsBeforeAndTheExitReportIsWritten) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const Ended base = ReadyThenSignal("own", Plain(), dir.path(), SIGTERM);
  ASSERT_FALSE(base.signaled);
  ASSERT_EQ(base.code, 7);
  ASSERT_EQ(base.out, "ready\nown handler: SIGTERM\n");
  const Ended r = ReadyThenSignal("own", Preload(out), dir.path(), SIGTERM);
  EXPECT_FALSE(r.signaled) << "signal " << r.sig;
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.out, base.out);
  EXPECT_EQ(r.err, base.err);
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "exit");
  ExpectTheLeak(report);
}

// A handler installed before gpuwatch attached (here: attached through
// CUDA_INJECTION64_PATH at the first CUDA call) is chained: gpuwatch writes its
// report first, then calls the handler with its siginfo, honouring
// SA_RESETHAND; the handler's exit(7) then writes the exit report over it.
TEST(Signals, HandlerInstalledBeforeAttachIsChainedWithItsFlags) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const std::string log = dir.path() + "/run.log";
  std::ofstream(log).close();  // the library appends to it, never creates it
  const Ended base = ReadyThenSignal("chain", Plain(), dir.path(), SIGTERM);
  ASSERT_FALSE(base.signaled);
  ASSERT_EQ(base.code, 7);
  ASSERT_EQ(base.out, "ready\nchained handler: SIGTERM from kill\nSIGTERM is SIG_DFL again\n");
  const Ended r = ReadyThenSignal("chain",
                                  {{"LD_LIBRARY_PATH", kSimDir},
                                   {"CUDA_INJECTION64_PATH", kLib},
                                   {"GPUWATCH_OUTPUT", out},
                                   {"GPUWATCH_SUMMARY", "0"},
                                   {"GPUWATCH_CHECKPOINT_SECONDS", "0"},
                                   {"GPUWATCH_RUN_LOG", log}},
                                  dir.path(), SIGTERM);
  EXPECT_FALSE(r.signaled) << "signal " << r.sig;
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.out, base.out);
  EXPECT_EQ(r.err, base.err);
  // The signal's report came first, then the exit report replaced it (after
  // the line saying the process uses CUDA); each line ends with the pid.
  std::string logged;
  for (const std::string& line : LinesStartingWith(ReadFile(log), "")) {
    logged += line.substr(0, line.rfind('\t')) + "\n";
  }
  EXPECT_EQ(logged, "cuda\t\nsignal\t" + out + "\nexit\t" + out + "\n");
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "exit");
  ExpectTheLeak(report);
}

// SIGTERM ignored when the program starts (nohup, a parent's choice) stays
// ignored.
TEST(Signals, IgnoredSigtermStaysIgnored) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  Child c = Spawn({kProgram, "stdin"}, Preload(out), dir.path(), /*ignore_sigterm=*/true);
  ASSERT_TRUE(WaitForOutput(c, "ready\n")) << c.err_text;
  // An ignored signal is discarded when it is sent: once kill returns it is gone.
  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  ASSERT_EQ(write(c.in, "go\n", 3), 3);
  const Ended r = Finish(c);
  EXPECT_FALSE(r.signaled) << "signal " << r.sig;
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "ready\nstill running\n");
  EXPECT_EQ(r.err, "");
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "exit");
  ExpectTheLeak(report);
}

// A crash: a best-effort report, then the same signal with its default action
// (a core dump where the limits allow one; the tests turn core files off, so
// only the signal is checked, not WCOREDUMP).
class Crash : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(Crash, ReportIsWrittenThenTheProcessDiesOfTheSameSignal) {
#ifdef GPUWATCH_TEST_SANITIZER_RUNTIME
  GTEST_SKIP() << "the sanitizer runtime owns the crash signals (handle_segv, handle_abort)";
#endif
  const auto [mode, sig] = GetParam();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  Child base_child = Spawn({kProgram, mode}, Plain(), dir.path());
  const Ended base = Finish(base_child);
  ASSERT_TRUE(base.signaled) << base.err;
  ASSERT_EQ(base.sig, sig);
  Child child = Spawn({kProgram, mode}, Preload(out), dir.path());
  const Ended r = Finish(child);
  ASSERT_TRUE(r.signaled) << "exit status " << r.code << "\n" << r.err;
  EXPECT_EQ(r.sig, sig);
  EXPECT_EQ(r.out, base.out);
  EXPECT_EQ(r.err, base.err);
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  EXPECT_EQ(report["trigger"], "signal");
  EXPECT_EQ(report["label"], std::string("SIG") + sigabbrev_np(sig));
  ExpectTheLeak(report);
}

INSTANTIATE_TEST_SUITE_P(Signals, Crash,
                         ::testing::Values(std::make_pair("segv", SIGSEGV),
                                           std::make_pair("bus", SIGBUS),
                                           std::make_pair("fpe", SIGFPE),
                                           std::make_pair("ill", SIGILL),
                                           std::make_pair("abort", SIGABRT)),
                         [](const auto& info) { return std::string(info.param.first); });

// SIGKILL cannot be caught: what is left is the last checkpoint, a complete
// report at the main path, refreshed every GPUWATCH_CHECKPOINT_SECONDS.
TEST(Signals, CheckpointSurvivesSigkill) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = Preload(out);
  env["GPUWATCH_CHECKPOINT_SECONDS"] = "1";
  Child c = Spawn({kProgram, "wait"}, env, dir.path());
  ASSERT_TRUE(WaitForOutput(c, "ready\n")) << c.err_text;
  // Poll for the checkpoint holding the leak (hang guard only).
  const int64_t deadline = NowMs() + kTimeoutMs;
  json checkpoint;
  for (;;) {
    checkpoint = ReadJson(out);
    if (checkpoint.is_object() && checkpoint["leaks"]["device"]["bytes"] == kLeakBytes) break;
    if (NowMs() >= deadline) break;
    Pump(c, 20);
  }
  ASSERT_TRUE(checkpoint.is_object()) << "no checkpoint appeared; stderr: " << c.err_text;
  EXPECT_EQ(checkpoint["trigger"], "checkpoint");
  ASSERT_EQ(kill(c.pid, SIGKILL), 0);
  const Ended r = Finish(c);
  ASSERT_TRUE(r.signaled);
  EXPECT_EQ(r.sig, SIGKILL);
  EXPECT_EQ(r.out, "ready\n");
  EXPECT_EQ(r.err, "");
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "checkpoint");
  ExpectTheLeak(report);
}

// The exit report replaces the checkpoints of a process that exits normally.
TEST(Signals, ExitReportReplacesTheCheckpoint) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  auto env = Preload(out);
  env["GPUWATCH_CHECKPOINT_SECONDS"] = "1";
  Child c = Spawn({kProgram, "stdin"}, env, dir.path());
  ASSERT_TRUE(WaitForOutput(c, "ready\n")) << c.err_text;
  const int64_t deadline = NowMs() + kTimeoutMs;
  json checkpoint = ReadJson(out);
  while (!checkpoint.is_object() && NowMs() < deadline) {
    Pump(c, 20);
    checkpoint = ReadJson(out);
  }
  ASSERT_TRUE(checkpoint.is_object()) << "no checkpoint appeared; stderr: " << c.err_text;
  EXPECT_EQ(checkpoint["trigger"], "checkpoint");
  ASSERT_EQ(write(c.in, "go\n", 3), 3);
  const Ended r = Finish(c);
  EXPECT_EQ(r.code, 0);
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "exit");
  ExpectTheLeak(report);
}

// 1,000 snapshot signals (SIGUSR2) while 4 threads allocate and free: no
// deadlock, exact totals, and every snapshot written is a complete report
// (signals that arrive during a snapshot are folded into the next one).
TEST(Signals, ThousandSnapshotSignalsDuringABusyLoop) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  Child c = Spawn({kProgram, "busy"}, Preload(out), dir.path());
  ASSERT_TRUE(WaitForOutput(c, "ready\n")) << c.err_text;
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(kill(c.pid, SIGUSR2), 0) << i;
  ASSERT_EQ(write(c.in, "stop\n", 5), 5);
  const Ended r = Finish(c);
  ASSERT_FALSE(r.signaled) << "signal " << r.sig << "\n" << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("pairs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const uint64_t pairs = std::stoull(r.out.substr(at + 6));
  ASSERT_GT(pairs, 0u);
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "exit");
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], pairs + 1);
  EXPECT_EQ(device["frees"], pairs);
  EXPECT_EQ(device["current_bytes"], kLeakBytes);
  ExpectTheLeak(report);
  int snapshots = 0;
  for (const std::string& name : dir.List()) {
    if (name.find(".snapshot-") == std::string::npos || name.find(".tmp.") != std::string::npos) {
      continue;
    }
    const json snap = ReadJson(dir.path() + "/" + name);
    ASSERT_TRUE(snap.is_object()) << name;
    EXPECT_EQ(snap["trigger"], "snapshot") << name;
    EXPECT_EQ(snap["label"], "signal") << name;
    EXPECT_LE(snap["totals"]["kinds"]["device"]["allocs"].get<uint64_t>(), pairs + 1) << name;
    ++snapshots;
  }
  EXPECT_GE(snapshots, 1);
}

}  // namespace
}  // namespace gpuwatch::testing
