// Holders that do nothing, without a process: the last CUDA activity the
// background thread derives from the counters (LiveActivity), the live
// state's "parent" and "activity" read back, the states a reader gives a
// process (tools/live/live_holders.h), top's STATE column and line, and
// their metrics (tools/live/live_metrics.h); /proc read of this process.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/proc_stat.h"
#include "libgpuwatch/report/live_state.h"
#include "nlohmann/json.hpp"
#include "tools/commands/top_command.h"
#include "tools/live/live_holders.h"
#include "tools/live/live_metrics.h"

namespace gpuwatch {
namespace {

using json = nlohmann::json;
using tools::HolderState;
using tools::HolderStateOf;
using tools::LiveProcess;

constexpr uint64_t kSecond = 1000000000ULL;
constexpr uint64_t kMiB = 1 << 20;

TEST(ProcStat, ThisProcessRunsUnderItsParent) {
  const ProcStat self = ReadProcStat(getpid());
  ASSERT_TRUE(self.known);
  EXPECT_EQ(self.state, 'R');  // reading its own stat
  EXPECT_EQ(self.ppid, getppid());
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_FALSE(Stopped(self));
  EXPECT_GE(self.start_ticks, ReadProcStat(getppid()).start_ticks);
  EXPECT_FALSE(ReadProcStat(-5).known);
}

TEST(LiveActivity, AnyCounterThatMovesIsActivityAtThatTick) {
  LiveActivity activity;
  activity.Reset(100 * kSecond, 1700000000000);
  TrackerSnapshot totals;
  activity.Tick(totals, 101 * kSecond, 1700000001000);  // nothing yet
  EXPECT_EQ(activity.last_unix_ms(), 1700000000000u);
  EXPECT_EQ(activity.IdleNs(101 * kSecond), 1 * kSecond);
  totals.kinds[static_cast<int>(MemKind::kDevice)].allocs = 1;
  activity.Tick(totals, 102 * kSecond, 1700000002000);
  EXPECT_EQ(activity.last_unix_ms(), 1700000002000u);
  activity.Tick(totals, 110 * kSecond, 1700000010000);  // the same: idle
  EXPECT_EQ(activity.IdleNs(130 * kSecond), 28 * kSecond);
  // A copy, a launch, a free: each moves it.
  totals.copies[static_cast<int>(CopyKind::kDeviceToHost)].count = 1;
  activity.Tick(totals, 131 * kSecond, 1700000031000);
  EXPECT_EQ(activity.IdleNs(131 * kSecond), 0u);
  totals.launches = 5;
  activity.Tick(totals, 140 * kSecond, 1700000040000);
  EXPECT_EQ(activity.last_unix_ms(), 1700000040000u);
  totals.kinds[static_cast<int>(MemKind::kDevice)].frees = 1;
  activity.Tick(totals, 150 * kSecond, 1700000050000);
  EXPECT_EQ(activity.last_unix_ms(), 1700000050000u);
}

// The state's "parent" and "activity", as built and as a reader reads them.
TEST(LiveState, TheParentAndTheLastActivityAreRead) {
  TrackerSnapshot totals;
  LiveInputs in;
  in.pid = 9;
  in.totals = &totals;
  in.parent_pid = 8;
  in.parent_start_ticks = 12345;
  LiveActivity activity;
  activity.Reset(10 * kSecond, 1700000000000);
  in.activity = &activity;
  in.now_ns = 100 * kSecond;
  SiteResolver sites(nullptr);
  const json st = json::parse(BuildLiveState(in, &sites));
  EXPECT_EQ(st["parent"], json({{"pid", 8}, {"start_ticks", 12345}}));
  EXPECT_EQ(st["activity"], json({{"last_unix_ms", 1700000000000}, {"idle_ns", 90 * kSecond}}));
  tools::LiveState read;
  std::string problem;
  ASSERT_TRUE(tools::ReadLiveState(st, &read, &problem)) << problem;
  ASSERT_TRUE(read.parent.has_value());
  EXPECT_EQ(read.parent->pid, 8u);
  EXPECT_EQ(read.parent->start_ticks, 12345u);
  EXPECT_EQ(read.idle_ns, 90 * kSecond);
  EXPECT_EQ(read.last_activity_unix_ms, 1700000000000u);
  // Unknown parent: null, read as none. A mistyped one refuses the answer.
  in.parent_pid = 0;
  const json unknown = json::parse(BuildLiveState(in, &sites));
  EXPECT_TRUE(unknown["parent"].is_null());
  tools::LiveState none;
  ASSERT_TRUE(tools::ReadLiveState(unknown, &none, &problem)) << problem;
  EXPECT_FALSE(none.parent.has_value());
  json bad = st;
  bad["parent"]["pid"] = "x";
  EXPECT_FALSE(tools::ReadLiveState(bad, &none, &problem));
  EXPECT_EQ(problem, "parent.pid is \"x\", expected a count (an integer)");
}

// What /proc says of a process: known, in `state`, under `ppid`.
ProcStat Proc(char state, pid_t ppid, uint64_t start_ticks) {
  ProcStat p;
  std::tie(p.known, p.state, p.ppid, p.start_ticks) =
      std::make_tuple(true, state, ppid, start_ticks);
  return p;
}

// A process of pid 100 started under parent 50 (start time 500), holding
// 3 MiB, idle for `idle_s`.
LiveProcess Holder(uint64_t idle_s) {
  LiveProcess p;
  p.pid = 100;
  p.state.command = {"/x/serve.py"};
  p.state.host = "n1";
  p.state.live_bytes = 3 * kMiB;
  p.state.parent = tools::LiveState::Parent{50, 500};
  p.state.idle_ns = idle_s * kSecond;
  p.proc = Proc('S', 50, 900);
  p.parent_start_ticks = 500;
  return p;
}

TEST(Holders, StoppedOrphanedAndIdleAreToldApart) {
  const uint64_t ten_minutes = 600 * kSecond;
  HolderState s = HolderStateOf(Holder(10), ten_minutes);
  EXPECT_EQ(tools::HolderStateName(s), "running");
  EXPECT_EQ(s.idle_ns, 10 * kSecond);
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(Holder(600), ten_minutes)), "idle");
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(Holder(599), ten_minutes)), "running");

  LiveProcess stopped = Holder(700);
  stopped.proc.state = 'T';
  s = HolderStateOf(stopped, ten_minutes);
  EXPECT_EQ(tools::HolderStateName(s), "stopped");  // not idle too: it does nothing anyway
  stopped.proc.state = 't';                         // by a debugger
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(stopped, ten_minutes)), "stopped");

  // Reparented to init, or to a subreaper; or its parent's pid now names
  // another process (another start time).
  LiveProcess orphan = Holder(10);
  orphan.proc.ppid = 1;
  orphan.parent_start_ticks = 1;
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(orphan, ten_minutes)), "orphaned");
  orphan.proc.ppid = 50;
  orphan.parent_start_ticks = 7000;
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(orphan, ten_minutes)), "orphaned");
  orphan.proc.ppid = 1;
  orphan.proc.state = 'T';
  s = HolderStateOf(orphan, ten_minutes);
  EXPECT_EQ(tools::HolderStateName(s), "stopped+orphaned");
  EXPECT_EQ(tools::HolderStateShort(s), "stop+orph");
  orphan.proc.state = 'S';
  orphan.state.idle_ns = 3600 * kSecond;
  s = HolderStateOf(orphan, ten_minutes);
  EXPECT_EQ(tools::HolderStateName(s), "idle+orphaned");
  EXPECT_EQ(tools::HolderStateShort(s), "idle+orph");

  // Its parent was already init at attach: not an orphan of gpuwatch's
  // making. No parent known, or no /proc: nothing said.
  LiveProcess daemon = Holder(10);
  daemon.state.parent = tools::LiveState::Parent{1, 1};
  daemon.proc.ppid = 1;
  daemon.parent_start_ticks = 1;
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(daemon, ten_minutes)), "running");
  daemon.state.parent.reset();
  daemon.proc.ppid = 77;
  EXPECT_EQ(tools::HolderStateName(HolderStateOf(daemon, ten_minutes)), "running");

  // A process that did not answer: its earlier answer's idle time, aged
  // since; nothing known, no idle time.
  LiveProcess silent = Holder(500);
  silent.answered = false;
  silent.known_from = "answer";
  silent.known_age_ms = 120000;
  s = HolderStateOf(silent, ten_minutes);
  EXPECT_EQ(s.idle_ns, 620 * kSecond);
  EXPECT_TRUE(s.idle);
  silent.known_from = "";
  EXPECT_FALSE(HolderStateOf(silent, ten_minutes).idle_ns.has_value());
}

// Holder(answered_idle_s) answered; 101 stopped, known `from` (idle 30 s
// then, when its answer), `age_ms` old; 102 stopped, nothing known.
tools::LiveScan Scan(uint64_t answered_idle_s, const std::string& from, uint64_t age_ms) {
  tools::LiveScan scan;
  scan.processes.push_back(Holder(answered_idle_s));
  LiveProcess stopped = Holder(30);
  stopped.pid = 101;
  stopped.proc.state = 'T';
  stopped.answered = false;
  stopped.known_from = from;
  stopped.known_age_ms = age_ms;
  if (from != "answer") stopped.state.idle_ns.reset();  // a checkpoint does not say
  scan.silent.push_back(stopped);
  LiveProcess unknown;
  unknown.pid = 102;
  unknown.answered = false;
  unknown.proc = Proc('T', 1, 5);
  scan.silent.push_back(unknown);
  return scan;
}

TEST(Holders, TopShowsTheStateAndWhatIsKnownOfASilentProcess) {
  tools::LiveScan scan = Scan(5, "answer", 42000);
  scan.silent[0].proc.ppid = 1;  // and orphaned
  scan.problems.push_back("pid 101: no answer within 500 ms");
  scan.problems.push_back("pid 102: no answer within 500 ms");
  tools::TopView view;
  view.width = 80;
  view.selected = 101;
  view.idle_after_ns = 600 * kSecond;
  std::vector<std::string> lines = tools::RenderTopFrame(scan, view);
  for (const std::string& l : lines) EXPECT_LE(l.size(), 80u) << l;
  const auto line = [&](const std::string& text) {
    for (const std::string& l : lines) {
      if (l.find(text) != std::string::npos) return l;
    }
    return std::string();
  };
  EXPECT_NE(lines[0].find("3 processes"), std::string::npos) << lines[0];
  EXPECT_EQ(line("STATE").substr(0, 45), "     PID RANK COMMAND       STATE        LIVE")
      << line("STATE");
  EXPECT_EQ(line("    100 ").substr(0, 45), "     100 -    serve.py      running      3.0M");
  EXPECT_EQ(line("    101 ").substr(0, 45), ">    101 -    serve.py      stop+orph   ~3.0M");
  EXPECT_EQ(line("    102 ").substr(0, 45), "     102 -    (no answer)   stopped         ?");
  // The line under the selected process's figures, whole at 160 columns.
  view.width = 160;
  lines = tools::RenderTopFrame(scan, view);
  // Of 102 nothing is known: its pid, and no figures.
  view.selected = 102;
  const std::vector<std::string> unknown_lines = tools::RenderTopFrame(scan, view);
  EXPECT_NE(std::find(unknown_lines.begin(), unknown_lines.end(), "pid 102"), unknown_lines.end())
      << ::testing::PrintToString(unknown_lines);
  EXPECT_NE(std::find(unknown_lines.begin(), unknown_lines.end(),
                      "stopped (SIGSTOP): no answer; nothing known of what it holds"),
            unknown_lines.end())
      << ::testing::PrintToString(unknown_lines);
  view.selected = 101;
  EXPECT_EQ(line("stopped+orphaned"),
            "stopped+orphaned (SIGSTOP), parent 50 gone (now 1), last CUDA activity 1m12s ago: no "
            "answer; as of its last answer, 0m42s ago")
      << ::testing::PrintToString(lines);
}

// At 80 columns the line under the selected process keeps what it is and
// where its figures come from: the details go first, then the start of a
// checkpoint's path, each with an ellipsis (in ASCII without UTF-8).
TEST(Holders, TopFitsTheStateLineIn80ColumnsWithAnEllipsis) {
  tools::LiveScan scan = Scan(5, "answer", 42000);
  scan.silent[0].proc.ppid = 1;  // and orphaned
  tools::TopView view;
  view.width = 80;
  view.selected = 101;
  view.utf8 = true;
  const auto state_line = [&] {
    for (const std::string& l : tools::RenderTopFrame(scan, view)) {
      if (l.starts_with("stopped")) return l;
    }
    return std::string();
  };
  EXPECT_EQ(state_line(),
            "stopped+orphaned (SIGSTOP)\u2026: no answer; as of its last answer, 0m42s ago");
  scan.silent[0].known_from = "checkpoint /var/tmp/jobs/2026-12-07/a-long-job-name/serve-0.json";
  scan.silent[0].state.idle_ns.reset();
  scan.silent[0].proc.ppid = 50;  // its parent lives: stopped alone
  EXPECT_EQ(state_line(),
            "stopped (SIGSTOP): no answer; as of its checkpoint \u2026/serve-0.json, 0m42s ago");
  view.utf8 = false;
  EXPECT_EQ(state_line(),
            "stopped (SIGSTOP): no answer; as of its checkpoint .../serve-0.json, 0m42s ago");
}

TEST(Holders, EveryProcessHasItsStateAsMetrics) {
  const tools::LiveScan scan = Scan(700, "checkpoint /x/serve.json", 4500);
  const auto families = tools::LiveMetrics(scan, {.top = 5, .idle_after_ns = 600 * kSecond});
  const auto family = [&](const std::string& name) -> const prometheus::MetricFamily* {
    for (const auto& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  const auto value = [&](const std::string& name, const std::string& pid,
                         const std::string& state = "") -> double {
    const prometheus::MetricFamily* f = family(name);
    if (f == nullptr) return -1;
    for (const prometheus::ClientMetric& m : f->metric) {
      bool pid_matches = false;
      bool state_matches = state.empty();
      for (const auto& l : m.label) {
        pid_matches |= l.name == "pid" && l.value == pid;
        state_matches |= l.name == "state" && l.value == state;
      }
      if (pid_matches && state_matches) return m.gauge.value;
    }
    return -1;
  };
  ASSERT_NE(family("gpuwatch_process_state"), nullptr);
  EXPECT_EQ(family("gpuwatch_process_state")->metric.size(), 12u);  // 4 states x 3 processes
  EXPECT_EQ(value("gpuwatch_process_state", "100", "idle"), 1);
  EXPECT_EQ(value("gpuwatch_process_state", "100", "running"), 0);
  EXPECT_EQ(value("gpuwatch_process_state", "100", "stopped"), 0);
  EXPECT_EQ(value("gpuwatch_process_state", "100", "orphaned"), 0);
  EXPECT_EQ(value("gpuwatch_process_idle_seconds", "100"), 700);
  EXPECT_EQ(value("gpuwatch_process_device_memory_bytes", "100"), 3 * kMiB);
  EXPECT_EQ(value("gpuwatch_process_known_age_seconds", "100"), 0);
  EXPECT_EQ(value("gpuwatch_process_state", "101", "stopped"), 1);
  EXPECT_EQ(value("gpuwatch_process_state", "101", "idle"), 0);
  EXPECT_EQ(value("gpuwatch_process_device_memory_bytes", "101"), 3 * kMiB);
  EXPECT_EQ(value("gpuwatch_process_known_age_seconds", "101"), 4.5);
  // Of the checkpoint, no idle time; of 102, nothing but its state.
  EXPECT_EQ(value("gpuwatch_process_idle_seconds", "101"), -1);
  EXPECT_EQ(value("gpuwatch_process_state", "102", "stopped"), 1);
  EXPECT_EQ(value("gpuwatch_process_device_memory_bytes", "102"), -1);
  // The silent ones have no other series.
  const prometheus::MetricFamily* live = family("gpuwatch_site_live_bytes");
  ASSERT_NE(live, nullptr);
  EXPECT_EQ(live->metric.size(), 1u);  // the answered one's "other"
}

}  // namespace
}  // namespace gpuwatch
