// End-to-end tests of the holders that do nothing (docs/live.md): a process
// under gpuwatch that holds device memory while it is stopped (SIGSTOP),
// orphaned (its launcher was killed) or idle (no CUDA call for the idle
// threshold), as `gpuwatch top --once` and `gpuwatch exporter --textfile`
// show it. Each waits for what it can observe, polling with a generous
// deadline, never on a sleep.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/base/proc_stat.h"
#include "libgpuwatch/base/status_page.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tools/live/live_client.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

// Calls `done` until it is true or `timeout_ms` passed, 200 ms apart.
bool PollUntil(const std::function<bool()>& done, int timeout_ms = 60000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// `gpuwatch top --once` of `pid`, 120 columns.
ProcessResult Top(const std::string& live_dir, pid_t pid, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kCli,  "top",   "--once",           "--dir", live_dir, "--width",
                                   "120", "--pid", std::to_string(pid)};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, {{"LANG", "C"}}, "");
}

// The row of `pid` in a frame: " PID RANK COMMAND STATE LIVE ...".
std::string Row(const std::string& frame, pid_t pid) {
  return LineWith(frame, {" " + std::to_string(pid) + " -    "});
}

// `gpuwatch exporter --textfile DIR --once`'s file.
std::string Textfile(const ScopedTempDir& dir, const std::string& live_dir,
                     const std::vector<std::string>& args) {
  const std::string out = dir.path() + "/textfile";
  std::filesystem::create_directories(out);
  std::vector<std::string> argv = {kCli,     "exporter", "--textfile", out,
                                   "--once", "--dir",    live_dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = RunProcess(argv, {}, "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ReadFile(out + "/gpuwatch.prom");
}

// The value of the textfile's series `name` of `pid` with `more` in its
// labels (`state="idle"`), or "" when there is none.
std::string Series(const std::string& text, const std::string& name, pid_t pid,
                   const std::string& more = "") {
  for (const std::string& line : LinesStartingWith(text, name + "{")) {
    if (line.find("pid=\"" + std::to_string(pid) + "\"") == std::string::npos) continue;
    if (!more.empty() && line.find(more) == std::string::npos) continue;
    return line.substr(line.rfind(' ') + 1);
  }
  return "";
}

// sh starts live_steps in the background, says its pid, and waits for it.
const std::vector<std::string> kLauncher = {
    "/bin/sh", "-c", "exec 3<&0; \"$@\" <&3 3<&- & echo \"launched $!\"; wait", "sh"};

// The pid of live_steps, as kLauncher said it; 0 when it did not.
pid_t LaunchedPid(const LiveSteps& launched) {
  const size_t at = launched.out().find("launched ");
  return at == std::string::npos ? 0 : std::atoi(launched.out().c_str() + at + 9);
}

TEST(Holders, AStoppedProcessIsShownStoppedWithWhatItsCheckpointSaysItHolds) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  LiveSteps steps(dir, live, "stopped", {{"GPUWATCH_CHECKPOINT_SECONDS", "1"}});
  ASSERT_TRUE(ReadyAndStepped(steps, 2));
  // Its checkpoint once it has the two steps: 2 MiB kept and 256 KiB of
  // staging.
  const std::string checkpoint = dir.path() + "/stopped.json";
  const uint64_t held = 2 * kMiB + 256 * kKiB;
  ASSERT_TRUE(PollUntil([&] {
    const json r = ReadJson(checkpoint);
    return r.is_object() && r["totals"]["device_current_bytes"] == held;
  }));
  ASSERT_TRUE(StopProcess(steps.pid()));
  const ProcessResult r = Top(live, steps.pid(), {"--timeout-ms", "500"});
  const std::string metrics = Textfile(dir, live, {"--timeout-ms", "500"});
  kill(steps.pid(), SIGCONT);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string row = Row(r.out, steps.pid());
  ASSERT_NE(row, "") << r.out;
  EXPECT_NE(row.find(" live_steps "), std::string::npos) << r.out;
  EXPECT_NE(row.find(" stopped "), std::string::npos) << r.out;
  EXPECT_NE(row.find(" ~2.2M "), std::string::npos) << r.out;  // as of its checkpoint
  EXPECT_NE(
      LineWith(r.out, {"stopped (SIGSTOP): no answer; as of its checkpoint " + checkpoint, " ago"}),
      "")
      << r.out;
  EXPECT_NE(LineWith(r.out, {"pid " + std::to_string(steps.pid()), "2.2M live in 3"}), "") << r.out;
  // The exporter: stopped, holding what the checkpoint says.
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", steps.pid(), "state=\"stopped\""), "1")
      << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", steps.pid(), "state=\"running\""), "0")
      << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_device_memory_bytes", steps.pid()),
            std::to_string(held))
      << metrics;
  EXPECT_NE(Series(metrics, "gpuwatch_process_known_age_seconds", steps.pid()), "") << metrics;
}

TEST(Holders, AProcessWhoseLauncherWasKilledIsShownOrphaned) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  LiveSteps launched(dir, live, "orphan", {}, {}, kLauncher);
  ASSERT_TRUE(ReadyAndStepped(launched, 1)) << launched.out();
  const pid_t pid = LaunchedPid(launched);
  ASSERT_GT(pid, 0) << launched.out();
  const std::vector<std::string> args = {"--timeout-ms", "60000"};
  // While its launcher lives: running.
  ProcessResult r = Top(live, pid, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Row(r.out, pid).find(" running "), std::string::npos) << r.out;
  ASSERT_EQ(kill(launched.pid(), SIGKILL), 0);
  ASSERT_TRUE(PollUntil([&] {
    r = Top(live, pid, args);
    return Row(r.out, pid).find(" orphaned ") != std::string::npos;
  })) << r.out;
  EXPECT_NE(Row(r.out, pid).find(" 1.2M "), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, {"orphaned, parent " + std::to_string(launched.pid()) + " gone (now "}),
            "")
      << r.out;
  const std::string metrics = Textfile(dir, live, args);
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", pid, "state=\"orphaned\""), "1") << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", pid, "state=\"running\""), "1") << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_device_memory_bytes", pid),
            std::to_string(kMiB + 256 * kKiB))
      << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_known_age_seconds", pid), "0") << metrics;
  // It still runs: closing its input ends it.
  ASSERT_TRUE(launched.Send("step 1", "live_steps: steps 2\n")) << launched.err();
}

// A process that no reader ever got an answer from (stopped once its
// launcher had died): its parent at attach comes from its status page.
TEST(Holders, AStoppedOrphanThatNeverAnsweredIsShownStoppedAndOrphaned) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  LiveSteps launched(dir, live, "stopped-orphan", {}, {}, kLauncher);
  ASSERT_TRUE(ReadyAndStepped(launched, 1)) << launched.out();
  const pid_t pid = LaunchedPid(launched);
  ASSERT_GT(pid, 0) << launched.out();
  ASSERT_EQ(kill(launched.pid(), SIGKILL), 0);
  // Reparented first, then stopped (a stopped member of a group that is
  // orphaned would get SIGHUP).
  ASSERT_TRUE(PollUntil([&] { return ReadProcStat(pid).ppid != launched.pid(); }));
  ASSERT_TRUE(StopProcess(pid));
  const std::vector<std::string> args = {"--timeout-ms", "500"};
  const ProcessResult r = Top(live, pid, args);
  const std::string metrics = Textfile(dir, live, args);
  kill(pid, SIGCONT);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Row(r.out, pid).find(" stop+orph "), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, {"stopped+orphaned (SIGSTOP), parent " +
                             std::to_string(launched.pid()) + " gone (now "}),
            "")
      << r.out;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", pid, "state=\"orphaned\""), "1") << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", pid, "state=\"stopped\""), "1") << metrics;
  // It still runs: closing its input ends it.
  ASSERT_TRUE(launched.Send("step 1", "live_steps: steps 2\n")) << launched.err();
}

TEST(Holders, AProcessWithoutACudaCallForTheIdleThresholdIsShownIdle) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  LiveSteps steps(dir, live, "idle");
  ASSERT_TRUE(ReadyAndStepped(steps, 1));
  // An hour's threshold: running.
  ProcessResult r = Top(live, steps.pid(), {"--timeout-ms", "60000", "--idle-after", "3600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Row(r.out, steps.pid()).find(" running "), std::string::npos) << r.out;
  // Two seconds: idle, once two seconds have passed without a call.
  const std::vector<std::string> args = {"--timeout-ms", "60000", "--idle-after", "2"};
  ASSERT_TRUE(PollUntil([&] {
    r = Top(live, steps.pid(), args);
    return Row(r.out, steps.pid()).find(" idle ") != std::string::npos;
  })) << r.out;
  EXPECT_NE(Row(r.out, steps.pid()).find(" 1.2M "), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, {"idle, last CUDA activity ", " ago"}), "") << r.out;
  const std::string metrics = Textfile(dir, live, args);
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", steps.pid(), "state=\"idle\""), "1")
      << metrics;
  EXPECT_EQ(Series(metrics, "gpuwatch_process_state", steps.pid(), "state=\"running\""), "0")
      << metrics;
  EXPECT_GE(std::atof(Series(metrics, "gpuwatch_process_idle_seconds", steps.pid()).c_str()), 2.0)
      << metrics;
  // The same variable for both readers: GPUWATCH_IDLE_SECONDS.
  const ProcessResult env_top =
      RunProcess({kCli, "top", "--once", "--dir", live, "--timeout-ms", "60000"},
                 {{"LANG", "C"}, {"GPUWATCH_IDLE_SECONDS", "2"}}, "");
  EXPECT_NE(Row(env_top.out, steps.pid()).find(" idle "), std::string::npos) << env_top.out;
  // A CUDA call is activity: its time moves on (the background thread sees
  // it within a second).
  const auto last_activity = [&]() -> uint64_t {
    const tools::LiveScan scan = tools::ScanLive(live, 1, 60000);
    if (scan.processes.size() != 1) return 0;
    return scan.processes[0].state.last_activity_unix_ms.value_or(0);
  };
  const uint64_t before = last_activity();
  ASSERT_GT(before, 0u);
  ASSERT_TRUE(steps.Step(1));
  uint64_t after = 0;
  EXPECT_TRUE(PollUntil([&] { return (after = last_activity()) > before; })) << after;
}

// A process that idles after its work writes its checkpoint once, not once
// per GPUWATCH_CHECKPOINT_SECONDS: nothing changed since (no allocation,
// free, copy or launch), so the one on disk stands (docs/configuration.md);
// one more step makes the next. The writes are counted in `gpuwatch run`'s
// log (GPUWATCH_RUN_LOG: one line per report written); that gpuwatch's
// thread went on looking is read from the status page, which the same loop
// writes each second: the checkpoint's due check runs after that write, so
// a page written 2 s after the checkpoint, and then another, mean that at
// least one check passed the 1 s interval.
TEST(Holders, AnIdleProcessWritesItsCheckpointOnceNotOncePerPeriod) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  const std::string log = dir.path() + "/run.log";
  std::ofstream(log).close();  // `gpuwatch run` makes it; gpuwatch only appends
  LiveSteps steps(dir, live, "idle",
                  {{"GPUWATCH_CHECKPOINT_SECONDS", "1"}, {"GPUWATCH_RUN_LOG", log}});
  ASSERT_TRUE(ReadyAndStepped(steps, 2));
  const std::string checkpoint = dir.path() + "/idle.json";
  // A checkpoint of `n` whole steps: 1 MiB kept by each, 256 KiB of
  // staging, and each step's copy (its last counted event) made.
  const auto of_steps = [&](int n) {
    const json r = ReadJson(checkpoint);
    return r.is_object() &&
           r["totals"]["device_current_bytes"] == static_cast<uint64_t>(n) * kMiB + 256 * kKiB &&
           r["totals"]["copies"]["h2d"]["count"] == n;
  };
  const auto written = [&] { return LinesStartingWith(ReadFile(log), "checkpoint\t").size(); };
  const std::string page = StatusPagePath(live, steps.pid());
  const auto status = [&] {
    StatusView view;
    std::string problem;
    EXPECT_TRUE(ReadStatusPage(page, &view, &problem)) << problem;
    return view;
  };
  // The checkpoint of the two steps, and the page written after it.
  ASSERT_TRUE(PollUntil([&] { return of_steps(2); }));
  ASSERT_TRUE(PollUntil([&] { return status().checkpoint_ns != 0; }));
  // Then gpuwatch's thread looks for more than 2 s (two periods) and writes
  // nothing. One more checkpoint may come first, of events its snapshot did
  // not hold (one made while the last step was still counted); it remembers
  // its snapshot's own event count (EventCountOf), so it never writes the
  // same totals again. Each new checkpoint starts the wait over; one written
  // every period never lets it end.
  size_t before = 0;
  uint64_t at = 0;
  uint64_t seen = 0;
  ASSERT_TRUE(PollUntil([&] {
    const StatusView v = status();
    if (v.checkpoint_ns != at) {
      at = v.checkpoint_ns;
      before = written();
      seen = 0;
      return false;
    }
    if (seen == 0 && v.updated_ns >= at + 2000000000ULL) seen = v.updated_ns;
    return seen != 0 && v.updated_ns > seen;
  }));
  EXPECT_EQ(written(), before) << ReadFile(log);
  EXPECT_EQ(status().checkpoint_ns, at);
  // Something changed: the next check writes it (once, or twice when one
  // fell in the middle of the step).
  ASSERT_TRUE(steps.Step(1));
  EXPECT_TRUE(PollUntil([&] { return of_steps(3); }));
  EXPECT_GE(written(), before + 1) << ReadFile(log);
  EXPECT_LE(written(), before + 2) << ReadFile(log);
}

}  // namespace
}  // namespace gpuwatch::testing
