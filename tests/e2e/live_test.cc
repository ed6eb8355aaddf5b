// End-to-end tests of the live view: a process under gpuwatch serves its live
// state on a socket in the live directory while it runs (interpose/agent/live.cc),
// read by the client `gpuwatch top` and `gpuwatch exporter` share
// (tools/live/live_client.cc) and by `gpuwatch top --once`. Exact bytes of a
// training loop that leaks per step; the directory's permission checks;
// entries of dead processes; a process killed or stopped while it is read;
// twenty processes at once; a forked child; which physical GPU each device
// is, in the exit report.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/base/cgroup.h"
#include "libgpuwatch/base/live_dir.h"
#include "libgpuwatch/base/read_file.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tools/live/live_client.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;
using tools::LiveScan;
using tools::ScanLive;

constexpr int kScanMs = 10000;  // a hang guard: a healthy process answers at once

using Stepper = LiveSteps;

const tools::LiveProcess* Find(const LiveScan& scan, pid_t pid) {
  for (const tools::LiveProcess& p : scan.processes) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

json SiteAtLocation(const json& state, const std::string& location) {
  for (const json& s : state["sites"]) {
    if (s["location"] == location) return s;
  }
  return nullptr;
}

// The site of a state read by the client at `location`; one with no bytes
// when there is none.
tools::LiveSite LiveSiteAt(const tools::LiveState& state, const std::string& location) {
  for (const tools::LiveSite& s : state.sites) {
    if (s.location == location) return s;
  }
  return {};
}

// The answer of process `pid` as it sends it: the protocol itself.
std::string RawAnswer(const std::string& live_dir, pid_t pid, size_t top) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, LiveSocketPath(live_dir, pid).c_str());
  timeval guard{60, 0};  // a hang guard: a healthy process answers at once
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  std::string answer;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "top " + std::to_string(top) + "\n";
    // A server that refuses the reader may close before it is sent.
    (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
  }
  close(fd);
  return answer;
}

json RawState(const std::string& live_dir, pid_t pid, size_t top) {
  return json::parse(RawAnswer(live_dir, pid, top), nullptr, false);
}

std::string LeakLine() { return ProgramLine("live_steps.cu", "LIVE:leak"); }

// `gpuwatch top --once`, waiting for healthy processes as long as they take
// (a hang guard of 60 s): the tests do not depend on how fast a busy machine
// lets them answer.
ProcessResult Top(const std::string& live_dir, const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {kCli,    "top",   "--once", "--timeout-ms",
                                   "60000", "--dir", live_dir};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, {{"LANG", "C"}}, "");
}

TEST(Live, TheStateOfATrainingLoopIsExact) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live, "loop");
  ASSERT_TRUE(ReadyAndStepped(steps, 3));
  const json st = RawState(live, steps.pid(), 50);
  EXPECT_EQ(st["schema"], "gpuwatch-live");
  EXPECT_EQ(st["version"], 1);
  EXPECT_EQ(st["pid"], steps.pid());
  EXPECT_EQ(st["command"][0], kPrograms + "/live_steps");
  // 256 KiB of staging and 1 MiB kept per step; each step's 4 MiB scratch
  // buffer is freed.
  EXPECT_EQ(st["device"]["live_bytes"], 3 * kMiB + 256 * kKiB);
  EXPECT_EQ(st["device"]["live_count"], 4);
  // The peak: the third step's scratch buffer, before it kept its 1 MiB.
  EXPECT_EQ(st["device"]["peak_bytes"], 256 * kKiB + 2 * kMiB + 4 * kMiB);
  EXPECT_EQ(st["kinds"]["device"]["allocs"], 7);
  EXPECT_EQ(st["kinds"]["device"]["alloc_bytes"], 256 * kKiB + 3 * (5 * kMiB));
  EXPECT_EQ(st["counters"]["frees"], 3);
  EXPECT_EQ(st["counters"]["ooms"], 0);
  EXPECT_EQ(st["marks"], 3);
  ASSERT_EQ(st["devices"].size(), 1u);
  EXPECT_EQ(st["devices"][0]["device"], 0);
  EXPECT_TRUE(st["devices"][0]["total_bytes"].is_number_unsigned()) << st["devices"].dump();
  // Which GPU it is: the simulator's device 0 ("gwsim-device-00"), on bus 1, NVML's index 0.
  EXPECT_EQ(st["devices"][0]["uuid"], "GPU-67777369-6d2d-6465-7669-63652d303000");
  EXPECT_EQ(st["devices"][0]["pci_bus_id"], "00000000:01:00.0");
  EXPECT_EQ(st["devices"][0]["gpu"], 0);
  // Its cgroup, as the parser reads the process's own file.
  std::string cgroup_text;
  std::string problem;
  ASSERT_TRUE(ReadRegularFile("/proc/" + std::to_string(steps.pid()) + "/cgroup", 1 << 16,
                              &cgroup_text, &problem))
      << problem;
  CgroupLabels cgroup = ParseCgroup(cgroup_text);
  AddPodEnvironment([](const char* n) { return std::getenv(n); }, &cgroup);  // inherited
  EXPECT_EQ(st["cgroup"], json({{"container_id", cgroup.container_id},
                                {"systemd_unit", cgroup.systemd_unit},
                                {"pod_uid", cgroup.pod_uid},
                                {"namespace", cgroup.pod_namespace},
                                {"pod", cgroup.pod_name}}));
  ASSERT_EQ(st["transfers"].size(), 1u) << st["transfers"].dump();
  EXPECT_EQ(st["transfers"][0]["direction"], "h2d");
  EXPECT_EQ(st["transfers"][0]["host"], "pageable");
  EXPECT_EQ(st["transfers"][0]["count"], 3);
  EXPECT_EQ(st["transfers"][0]["bytes"], 768 * kKiB);  // 3 copies of 256 KiB
  const json leak = SiteAtLocation(st, LeakLine());
  ASSERT_TRUE(leak.is_object()) << st["sites"].dump(1);
  EXPECT_EQ(leak["live_bytes"], 3 * kMiB);
  EXPECT_EQ(leak["function"], "main");
  EXPECT_EQ(leak["growth_per_mark"], kMiB);
  const json staging = SiteAtLocation(st, ProgramLine("live_steps.cu", "LIVE:staging"));
  ASSERT_TRUE(staging.is_object());
  EXPECT_EQ(staging["live_bytes"], 256 * kKiB);
  EXPECT_EQ(staging["growth_per_mark"], 0);
  EXPECT_EQ(st["other_sites"]["count"], 0);

  // The same, as the readers' client types it.
  const LiveScan scan = ScanLive(live, 50, kScanMs);
  EXPECT_TRUE(scan.problems.empty()) << scan.problems[0];
  const tools::LiveProcess* p = Find(scan, steps.pid());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state.command, std::vector<std::string>{kPrograms + "/live_steps"});
  EXPECT_EQ(p->state.live_bytes, 3 * kMiB + 256 * kKiB);
  EXPECT_EQ(p->state.peak_bytes, 256 * kKiB + 2 * kMiB + 4 * kMiB);
  EXPECT_EQ(p->state.marks, 3u);
  EXPECT_EQ(LiveSiteAt(p->state, LeakLine()).live_bytes, 3 * kMiB);
  EXPECT_EQ(LiveSiteAt(p->state, LeakLine()).growth_per_mark, static_cast<double>(kMiB));

  // Asked for one site: the rest is counted, not listed.
  const LiveScan one = ScanLive(live, 1, kScanMs);
  ASSERT_EQ(one.processes.size(), 1u);
  ASSERT_EQ(one.processes[0].state.sites.size(), 1u);
  EXPECT_EQ(one.processes[0].state.sites[0].location, LeakLine());
  EXPECT_EQ(one.processes[0].state.other_count, 1u);
  EXPECT_EQ(one.processes[0].state.other_bytes, 256 * kKiB);

  // More steps are seen at the next read.
  ASSERT_TRUE(steps.Step(2));
  const LiveScan later = ScanLive(live, 50, kScanMs);
  ASSERT_EQ(later.processes.size(), 1u);
  EXPECT_EQ(LiveSiteAt(later.processes[0].state, LeakLine()).live_bytes, 5 * kMiB);
  EXPECT_EQ(later.processes[0].state.marks, 5u);

  // The entry goes with the process.
  const ProcessResult r = steps.Finish();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ListLiveSockets(live).empty());
  EXPECT_TRUE(ScanLive(live, 50, kScanMs).processes.empty());
}

TEST(Live, TopOnceShowsTheProcessesAndTheSelectedOnesSites) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper small(dir, live, "small", {{"RANK", "1"}});
  Stepper big(dir, live, "big", {{"RANK", "0"}});
  ASSERT_TRUE(small.ready() && big.ready()) << small.err() << big.err();
  ASSERT_TRUE(small.Step(1));
  ASSERT_TRUE(big.Step(4));
  const ProcessResult r = Top(live);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = LinesStartingWith(r.out, "");
  ASSERT_GE(lines.size(), 8u) << r.out;
  for (const std::string& line : lines) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_NE(lines[0].find("2 processes  sort: live"), std::string::npos) << r.out;
  // Sorted by device memory live: the big one first, selected.
  const std::string big_row = LineWith(r.out, {std::to_string(big.pid()) + " 0    live_steps"});
  const std::string small_row = LineWith(r.out, {std::to_string(small.pid()) + " 1    live_steps"});
  ASSERT_FALSE(big_row.empty()) << r.out;
  ASSERT_FALSE(small_row.empty()) << r.out;
  EXPECT_EQ(big_row[0], '>');
  EXPECT_EQ(small_row[0], ' ');
  EXPECT_LT(r.out.find(big_row), r.out.find(small_row));
  // 4 MiB + 256 KiB live; at the peak 7.2 MiB (the last scratch buffer and
  // what three steps kept).
  EXPECT_NE(big_row.find(" 4.2M    7.2M "), std::string::npos) << big_row;
  EXPECT_NE(LineWith(r.out, {"pid " + std::to_string(big.pid()), "4.2M live in 5", "4 marks"}), "")
      << r.out;
  const std::string site = LineWith(r.out, {LeakLine() + " (main)"});
  EXPECT_NE(site.find("   4.0M "), std::string::npos) << site;
  EXPECT_NE(site.find("   +1.0M  "), std::string::npos) << site;

  // --pid selects the other one; its sites are listed.
  const ProcessResult other = Top(live, {"--pid", std::to_string(small.pid())});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(LineWith(other.out, {std::to_string(small.pid()) + " 1    live_steps"})[0], '>');
  EXPECT_NE(LineWith(other.out, {LeakLine() + " (main)"}).find("   1.0M "), std::string::npos)
      << other.out;
}

TEST(Live, TwentyProcessesAtOnce) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  std::vector<std::unique_ptr<Stepper>> all;
  all.reserve(20);
  for (int i = 0; i < 20; ++i) {
    all.push_back(std::make_unique<Stepper>(dir, live, "p" + std::to_string(i)));
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(all[i]->ready()) << all[i]->err();
    ASSERT_TRUE(all[i]->Step(i + 1));
  }
  const LiveScan scan = ScanLive(live, 50, kScanMs);
  EXPECT_TRUE(scan.problems.empty());
  ASSERT_EQ(scan.processes.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    const tools::LiveProcess* p = Find(scan, all[i]->pid());
    ASSERT_NE(p, nullptr) << i;
    EXPECT_EQ(LiveSiteAt(p->state, LeakLine()).live_bytes, (i + 1) * kMiB) << i;
  }
  const ProcessResult r = Top(live, {"--sort", "pid"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("20 processes  sort: pid"), std::string::npos) << r.out;
  for (const auto& s : all) {
    EXPECT_NE(LineWith(r.out, {" " + std::to_string(s->pid()) + " -    live_steps"}), "") << r.out;
  }
}

TEST(Live, DeadProcessesAreCleanedAndAStoppedOneDoesNotHoldTheRest) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper killed(dir, live, "killed");
  Stepper stopped(dir, live, "stopped");
  Stepper healthy(dir, live, "healthy");
  ASSERT_TRUE(killed.ready() && stopped.ready() && healthy.ready());
  ASSERT_TRUE(healthy.Step(2));
  const pid_t killed_pid = killed.pid();
  killed.Kill();  // kill -9 leaves its entry behind
  ASSERT_EQ(ListLiveSockets(live).size(), 3u);
  ASSERT_TRUE(StopProcess(stopped.pid()));
  LiveScan scan = ScanLive(live, 50, 1000);
  EXPECT_EQ(scan.cleaned, 1u);  // the killed one's entry, at once
  // The stopped process never answers within the scan's 1 s. The healthy one
  // does unless the machine is too busy for it to answer that fast: then the
  // scan is repeated until it has (a hang guard of 60 scans).
  for (int i = 0; i < 60 && Find(scan, healthy.pid()) == nullptr; ++i) {
    scan = ScanLive(live, 50, 1000);
  }
  kill(stopped.pid(), SIGCONT);
  ASSERT_EQ(scan.processes.size(), 1u);
  EXPECT_EQ(scan.processes[0].pid, healthy.pid());
  EXPECT_EQ(LiveSiteAt(scan.processes[0].state, LeakLine()).live_bytes, 2 * kMiB);
  ASSERT_EQ(scan.problems.size(), 1u);
  EXPECT_EQ(scan.problems[0],
            "pid " + std::to_string(stopped.pid()) + ": no answer within 1000 ms");
  const std::vector<pid_t> left = ListLiveSockets(live);
  EXPECT_EQ(std::count(left.begin(), left.end(), killed_pid), 0);
  // Stopped and killed while top waits for its answer: top lists the rest.
  ASSERT_TRUE(StopProcess(stopped.pid()));
  RunningProcess top = StartProcess({kCli, "top", "--once", "--timeout-ms", "60000", "--dir", live},
                                    {{"LANG", "C"}}, "");
  stopped.Kill();
  const ProcessResult r = FinishProcess(top, 60000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 process  sort"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no answer"), std::string::npos) << r.out;
  EXPECT_EQ(ListLiveSockets(live), std::vector<pid_t>{healthy.pid()}) << r.out;
}

// SIGTERM ends the process after gpuwatch's signal report: its entry goes
// with it, as at exit.
TEST(Live, AProcessEndedBySigtermTakesItsEntry) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live, "term");
  ASSERT_TRUE(ReadyAndStepped(steps, 1));
  ASSERT_EQ(ListLiveSockets(live), std::vector<pid_t>{steps.pid()});
  ASSERT_EQ(kill(steps.pid(), SIGTERM), 0);
  const ProcessResult r = steps.Finish();
  EXPECT_TRUE(r.signaled && r.signal == SIGTERM) << r.err;
  EXPECT_TRUE(ListLiveSockets(live).empty());
  EXPECT_EQ(ReadReport(dir.path() + "/term.json")["trigger"], "signal");
}

// A reader's side of a process that dies in the middle of its answer, or
// answers with something else: a server of the test's own, named by a
// child's pid.
TEST(Live, AnAnswerCutShortByDeathIsAProcessGone) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  std::string problem;
  ASSERT_TRUE(PrepareLiveDir(live, true, &problem)) << problem;
  for (const bool dies : {true, false}) {
    const pid_t child = fork();
    if (child == 0) {
      pause();
      _exit(0);
    }
    const std::string path = LiveSocketPath(live, child);
    const int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(bind(server, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(server, 4), 0);
    std::thread answer([&] {
      const int fd = accept(server, nullptr, nullptr);
      char request[64];
      EXPECT_GT(read(fd, request, sizeof(request)), 0);
      const std::string half = "{\"schema\":\"gpuwatch-live\",\"pid\":";
      EXPECT_EQ(write(fd, half.data(), half.size()), static_cast<ssize_t>(half.size()));
      if (dies) {
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
      }
      close(fd);
    });
    const LiveScan scan = ScanLive(live, 50, kScanMs);
    answer.join();
    close(server);
    EXPECT_TRUE(scan.processes.empty());
    if (dies) {
      EXPECT_TRUE(scan.problems.empty()) << scan.problems[0];
      EXPECT_EQ(scan.cleaned, 1u);
      EXPECT_TRUE(ListLiveSockets(live).empty());
    } else {
      ASSERT_EQ(scan.problems.size(), 1u);
      EXPECT_EQ(scan.problems[0],
                "pid " + std::to_string(child) + ": not a gpuwatch live state (32 bytes)");
      EXPECT_EQ(scan.cleaned, 0u);
      unlink(path.c_str());
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    }
  }
}

// GPUWATCH_LIVE_DIR names something the process must not use: it says so in
// one line and runs as without the live view; `top` refuses it too.
void ExpectRefused(const std::string& live, const std::string& why) {
  ScopedTempDir dir;
  Stepper steps(dir, live, "refused");
  ASSERT_TRUE(ReadyAndStepped(steps, 1));
  const ProcessResult r = steps.Finish();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("gpuwatch: no live view (gpuwatch top, gpuwatch exporter): " + live + why),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(ReadReport(dir.path() + "/refused.json").is_object());
  const ProcessResult top = Top(live);
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_EQ(top.err, "gpuwatch top: " + live + why + "\n");
}

TEST(Live, ASymlinkPlantedAsTheDirectoryIsRefused) {
  ScopedTempDir dir;
  const std::string target = dir.path() + "/elsewhere";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  const std::string link = dir.path() + "/live";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ExpectRefused(link, " is a symbolic link");
  EXPECT_TRUE(std::filesystem::is_empty(target));
}

TEST(Live, AnotherUsersDirectoryIsRefused) {
  ScopedTempDir dir;
  std::string theirs = "/";  // root's, when the test is not root
  uid_t owner = 0;
  if (geteuid() == 0) {
    theirs = dir.path() + "/theirs";
    owner = 65534;
    ASSERT_EQ(mkdir(theirs.c_str(), 0700), 0);
    ASSERT_EQ(chown(theirs.c_str(), owner, owner), 0);
  }
  ExpectRefused(theirs, " is owned by uid " + std::to_string(owner) + ", not by this user (uid " +
                            std::to_string(geteuid()) + ")");
}

TEST(Live, TheDirectoryIsMadePrivate) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  ASSERT_EQ(mkdir(live.c_str(), 0755), 0);
  Stepper steps(dir, live, "private");
  ASSERT_TRUE(steps.ready()) << steps.err();
  struct stat st {};
  ASSERT_EQ(stat(live.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(ListLiveSockets(live), std::vector<pid_t>{steps.pid()});
}

// The server answers its own user only, even when the directory and the
// socket are opened to everyone.
TEST(Live, AReaderOfAnotherUidGetsNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to read as another uid";
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live, "peer");
  ASSERT_TRUE(steps.ready()) << steps.err();
  const std::string path = LiveSocketPath(live, steps.pid());
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(live.c_str(), 0777), 0);
  ASSERT_EQ(chmod(path.c_str(), 0777), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t reader = fork();
  if (reader == 0) {
    close(pipe_fds[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    // The server says nothing to it; its own reader refuses the directory.
    LiveScan scan = ScanLive(live, 50, kScanMs);
    const std::string what = std::to_string(RawAnswer(live, steps.pid(), 50).size()) + " bytes; " +
                             std::to_string(scan.processes.size()) + " " +
                             std::to_string(scan.problems.size()) + " " +
                             (scan.problems.empty() ? "" : scan.problems[0]);
    (void)!write(pipe_fds[1], what.data(), what.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  char buf[512] = {};
  const ssize_t n = read(pipe_fds[0], buf, sizeof(buf) - 1);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(reader, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf),
            "0 bytes; 0 1 " + live + " is owned by uid 0, not by this user (uid 65534)");
  // Its own user still reads it.
  EXPECT_EQ(ScanLive(live, 50, kScanMs).processes.size(), 1u);
}

// On a node of four GPUs under CUDA_VISIBLE_DEVICES=2,3, the process's
// devices 0 and 1 are the node's GPUs 2 and 3: the exit report's
// trace.devices[] names each by the UUID, PCI bus id and node index the
// background thread learnt while it ran (a live reader's question makes sure
// it has asked), and the report, written at exit, asked nothing itself.
TEST(Live, TheReportNamesEachDevicesPhysicalGpuUnderCudaVisibleDevices) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live, "visible",
                {{"GWSIM_DEVICE_COUNT", "4"}, {"CUDA_VISIBLE_DEVICES", "2,3"}});
  ASSERT_TRUE(ReadyAndStepped(steps, 1));  // device 0: staging and 1 MiB kept
  ASSERT_TRUE(steps.Send("device 1", "live_steps: device 1\n")) << steps.err();
  ASSERT_TRUE(steps.Step(1)) << steps.err();                            // device 1: 1 MiB kept
  const std::string gpu2 = "GPU-67777369-6d2d-6465-7669-63652d303200";  // "gwsim-device-02"
  const std::string gpu3 = "GPU-67777369-6d2d-6465-7669-63652d303300";
  const json state = RawState(live, steps.pid(), 10);
  ASSERT_EQ(state["devices"].size(), 2u) << state.dump();
  EXPECT_EQ(state["devices"][1]["uuid"], gpu3) << state.dump();
  ASSERT_EQ(steps.Finish().exit_code, 0) << steps.err();

  const json report = ReadJson(dir.path() + "/visible.json");
  const json& devices = report["trace"]["devices"];
  ASSERT_EQ(devices.size(), 2u) << report["trace"].dump();
  EXPECT_EQ(devices[0]["device"], 0);
  EXPECT_EQ(devices[0]["live_bytes"], (1 << 20) + (256 << 10));
  EXPECT_EQ(devices[0]["uuid"], gpu2);
  EXPECT_EQ(devices[0]["gpu"], 2);
  EXPECT_EQ(devices[0]["pci_bus_id"], "00000000:03:00.0");
  EXPECT_EQ(devices[1]["device"], 1);
  EXPECT_EQ(devices[1]["live_bytes"], 1 << 20);
  EXPECT_EQ(devices[1]["uuid"], gpu3);
  EXPECT_EQ(devices[1]["gpu"], 3);
  EXPECT_EQ(devices[1]["pci_bus_id"], "00000000:04:00.0");
}

// A forked child (a DataLoader worker) serves a state of its own, from its
// own start, and its exit removes its entry alone.
TEST(Live, AForkedChildServesItsOwnState) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper parent(dir, live, "parent");
  ASSERT_TRUE(ReadyAndStepped(parent, 2));
  ASSERT_TRUE(parent.Send("fork", "live_steps: child "));
  const size_t at = parent.out().find("live_steps: child ");
  const pid_t child = static_cast<pid_t>(std::stol(parent.out().substr(at + 18)));
  const LiveScan scan = ScanLive(live, 50, kScanMs);
  EXPECT_TRUE(scan.problems.empty()) << scan.problems[0];
  ASSERT_EQ(scan.processes.size(), 2u);
  const tools::LiveProcess* p = Find(scan, parent.pid());
  const tools::LiveProcess* c = Find(scan, child);
  ASSERT_TRUE(p != nullptr && c != nullptr);
  EXPECT_EQ(p->state.live_bytes, 2 * kMiB + 256 * kKiB);
  EXPECT_EQ(RawState(live, child, 50)["pid"], child);
  EXPECT_EQ(c->state.live_bytes, 0u);
  EXPECT_EQ(c->state.allocs, 0u);
  EXPECT_TRUE(c->state.sites.empty());
  ASSERT_EQ(kill(child, SIGUSR1), 0);
  // The child is the parent's to reap; its entry is gone once it exited.
  const auto listed = [&] {
    const std::vector<pid_t> pids = ListLiveSockets(live);
    return std::count(pids.begin(), pids.end(), child) != 0;
  };
  for (int i = 0; i < 6000 && listed(); ++i) {
    usleep(10000);  // polling the directory, with a hang guard of 60 s
  }
  EXPECT_EQ(ListLiveSockets(live), std::vector<pid_t>{parent.pid()});
  ASSERT_TRUE(parent.Step(1));
  EXPECT_EQ(ScanLive(live, 50, kScanMs).processes.size(), 1u);
}

TEST(Live, OffWhenAskedAndUnderDisable) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  {
    Stepper steps(dir, live, "off", {{"GPUWATCH_LIVE", "0"}});
    ASSERT_TRUE(steps.ready()) << steps.err();
    EXPECT_TRUE(ListLiveSockets(live).empty());
  }
  {
    Stepper steps(dir, live, "disabled", {{"GPUWATCH_DISABLE", "1"}});
    ASSERT_TRUE(steps.ready()) << steps.err();
    EXPECT_TRUE(ListLiveSockets(live).empty());
  }
}

}  // namespace
}  // namespace gpuwatch::testing
