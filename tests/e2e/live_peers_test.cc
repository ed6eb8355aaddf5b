// The live view among peers that misbehave (docs/reliability.md, "The live
// view's limits"): processes of the test's own that answer `gpuwatch top` and
// `gpuwatch exporter` with what no gpuwatch sends, sockets of another uid,
// entries nobody listens on, a name that repeats another's pid; readers that
// send their request a byte at a time, against a process under gpuwatch; a
// command line with terminal controls in it.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/base/live_dir.h"
#include "tests/e2e/common.h"
#include "tests/e2e/peers.h"
#include "tools/live/live_client.h"

namespace gpuwatch::testing {
namespace {

using tools::LiveScan;
using tools::ScanLive;

constexpr int kGuardMs = 60000;  // a hang guard: healthy processes answer at once
const std::string kGuard = std::to_string(kGuardMs);

// A client connected to the Unix socket at `path`, or -1.
int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A child that waits until killed: a pid that exists, to name an entry.
pid_t Waiter() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

// A process of the test's own in the live directory: a waiting child names
// the entry, a thread here answers every reader with `answer`.
class FakePeer {
 public:
  FakePeer(const std::string& live_dir, std::string answer)
      : pid_(Waiter()), path_(LiveSocketPath(live_dir, pid_)), answer_(std::move(answer)) {
    fd_ = ListenUnix(path_);
    EXPECT_GE(fd_, 0) << path_;
    EXPECT_EQ(pipe2(stop_, O_CLOEXEC), 0);
    thread_ = std::thread([this] { AnswerAll(fd_, answer_, stop_[0]); });
  }
  ~FakePeer() {
    EXPECT_EQ(write(stop_[1], "x", 1), 1);
    thread_.join();
    close(fd_);
    close(stop_[0]);
    close(stop_[1]);
    unlink(path_.c_str());
    Reap(pid_);
  }
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
  std::string path_;
  std::string answer_;
  int fd_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

std::string LeakLine() { return ProgramLine("live_steps.cu", "LIVE:leak"); }

uint64_t LeakBytes(const tools::LiveState& state) {
  for (const tools::LiveSite& s : state.sites) {
    if (s.location == LeakLine()) return s.live_bytes;
  }
  return 0;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string MakeLiveDir(const ScopedTempDir& dir) {
  std::string live = dir.path() + "/live";
  std::string problem;
  EXPECT_TRUE(PrepareLiveDir(live, true, &problem)) << problem;
  return live;
}

// live_steps under gpuwatch in `live`, having made `steps` steps; a failure
// when it could not.
std::unique_ptr<LiveSteps> Stepped(const ScopedTempDir& dir, const std::string& live,
                                   const std::string& name, int steps,
                                   const std::vector<std::string>& args = {}) {
  auto p = std::make_unique<LiveSteps>(dir, live, name, std::map<std::string, std::string>{}, args);
  EXPECT_TRUE(ReadyAndStepped(*p, steps));
  return p;
}

// A scan that read no process and has one problem, "pid PID: WHAT".
void ExpectOnlyProblem(const LiveScan& scan, pid_t pid, const std::string& what) {
  EXPECT_TRUE(scan.processes.empty());
  EXPECT_EQ(scan.problems, std::vector<std::string>{"pid " + std::to_string(pid) + ": " + what});
}

// `gpuwatch exporter --textfile DIR/textfile --once` on `live`, waiting for
// healthy processes as long as they take: the file's text.
std::string ExportOnce(const ScopedTempDir& dir, const std::string& live, ProcessResult* r) {
  const std::string out = dir.path() + "/textfile";
  EXPECT_EQ(mkdir(out.c_str(), 0755), 0);
  *r = RunProcess(
      {kCli, "exporter", "--textfile", out, "--once", "--timeout-ms", kGuard, "--dir", live}, {},
      "");
  return ReadFile(out + "/gpuwatch.prom");
}

// Five peers, each wrong in its own way, beside a healthy process: each is
// one problem line, in the scan, in `top --once` and in the exporter, and the
// healthy process is read exactly. Before: `{"schema":1}` aborted the
// exporter and made top exit 2, 200,000 nested arrays crashed both (stack
// overflow), a wrong-typed rank made top exit 2.
TEST(LivePeers, HostileAnswersAreOneProblemEachAndHideNoOne) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const auto healthy = Stepped(dir, live, "healthy", 2);
  ASSERT_FALSE(HasFailure());
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string huge(tools::kMaxLiveAnswerBytes + 1024, 'a');
  std::vector<std::unique_ptr<FakePeer>> peers;
  std::vector<std::string> expected;
  const auto add = [&](const std::string& answer, const std::string& problem) {
    peers.push_back(std::make_unique<FakePeer>(live, answer));
    expected.push_back("pid " + std::to_string(peers.back()->pid()) + ": " + problem);
  };
  add(R"({"schema":1})", "not a gpuwatch live state (12 bytes)");
  add(R"({"error":)" + deep + "}", "nested deeper than 64 levels (at byte 72)");
  add(R"({"schema":"gpuwatch-live","version":1,"rank":5,"device":{"live_bytes":"lots"}})",
      "rank is 5, expected a string");
  add(R"({"schema":"gpuwatch-live","host":")" + huge + R"("})", "an answer of more than 16 MiB");
  add(R"({"error":"\u001b]0;owned\u0007\u001b[2J"})",
      "the process says: \\x1b]0;owned\\x07\\x1b[2J");
  std::sort(expected.begin(), expected.end());

  LiveScan scan = ScanLive(live, 50, kGuardMs);
  std::sort(scan.problems.begin(), scan.problems.end());
  EXPECT_EQ(scan.problems, expected);
  ASSERT_EQ(scan.processes.size(), 1u);
  EXPECT_EQ(scan.processes[0].pid, healthy->pid());
  EXPECT_EQ(LeakBytes(scan.processes[0].state), 2 * kMiB);
  EXPECT_EQ(scan.cleaned, 0u);

  const ProcessResult top =
      RunProcess({kCli, "top", "--once", "--timeout-ms", kGuard, "--width", "200", "--dir", live},
                 {{"LANG", "C"}}, "");
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("  1 process  sort: live"), std::string::npos) << top.out;
  const std::string row =
      LineWith(top.out, {" " + std::to_string(healthy->pid()) + " -    live_steps"});
  ASSERT_NE(row, "") << top.out;
  EXPECT_EQ(row[0], '>');
  for (const std::string& problem : expected) {
    EXPECT_EQ(Count(top.out, problem + "\n"), 1u) << problem << "\n" << top.out;
  }
  EXPECT_EQ(top.out.find('\x1b'), std::string::npos);

  ProcessResult exporter;
  const std::string text = ExportOnce(dir, live, &exporter);
  ASSERT_EQ(exporter.exit_code, 0) << exporter.err;
  for (const std::string& problem : expected) {
    EXPECT_EQ(Count(exporter.err, "gpuwatch exporter: " + problem + "\n"), 1u) << exporter.err;
  }
  EXPECT_NE(text.find("\ngpuwatch_exporter_scrape_problems 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ngpuwatch_exporter_processes 1\n"), std::string::npos) << text;
  const std::string leak = LineWith(
      text,
      {"gpuwatch_site_live_bytes{pid=\"" + std::to_string(healthy->pid()) + "\"", LeakLine()});
  EXPECT_EQ(leak.substr(leak.rfind(' ') + 1), std::to_string(2 * kMiB)) << text;
}

// A socket made by another uid in the user's own directory (root put it
// there, say) is not read: the readers check who listens (SO_PEERCRED).
TEST(LivePeers, ASocketOfAnotherUidIsNotRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to listen as another uid";
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(live.c_str(), 0777), 0);
  const pid_t child = ServeAsAnotherUser(
      65534, live, R"({"schema":"gpuwatch-live","version":1,"command":["fake"]})", false);
  ASSERT_GT(child, 0);
  const LiveScan scan = ScanLive(live, 50, kGuardMs);
  Reap(child);
  ExpectOnlyProblem(scan, child, "served by uid 65534, not by this user (uid 0): not read");
}

// An entry nobody listens on, named after a process that exists (a program
// that exec'ed without gpuwatch, a stray file), is removed once it is
// kStaleEntrySeconds old; a young one is left (its process may be about to
// listen). Before: never removed while the pid existed.
TEST(LivePeers, AnEntryNobodyListensOnIsRemovedOnceStale) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const pid_t young = Waiter();
  const std::string old_socket = LiveSocketPath(live, getpid());
  const std::string old_file = LiveSocketPath(live, getppid());
  const std::string young_socket = LiveSocketPath(live, young);
  close(ListenUnix(old_socket, /*listening=*/false));
  close(ListenUnix(young_socket, /*listening=*/false));
  close(open(old_file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  timespec times[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, old_socket.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  ASSERT_EQ(utimensat(AT_FDCWD, old_file.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  const LiveScan scan = ScanLive(live, 50, kGuardMs);
  EXPECT_EQ(scan.cleaned, 2u);
  EXPECT_TRUE(scan.processes.empty());
  EXPECT_TRUE(scan.problems.empty()) << scan.problems[0];
  EXPECT_EQ(ListLiveSockets(live), std::vector<pid_t>{young});
  Reap(young);
}

// A process that listens but takes no one, its backlog full, is one problem
// line, not left out without a word.
TEST(LivePeers, AProcessWhoseBacklogIsFullIsAProblem) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const pid_t waiter = Waiter();
  const int fd = ListenUnix(LiveSocketPath(live, waiter));
  ASSERT_GE(fd, 0);
  ASSERT_EQ(listen(fd, 0), 0);
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) {
    const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, LiveSocketPath(live, waiter).c_str());
    if (connect(c, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(c);
      break;
    }
    held.push_back(c);
  }
  ASSERT_LT(held.size(), 64u);
  const LiveScan scan = ScanLive(live, 50, kGuardMs);
  for (const int c : held) close(c);
  close(fd);
  Reap(waiter);
  ExpectOnlyProblem(scan, waiter, "cannot connect: Resource temporarily unavailable");
}

// "0<pid>.sock", a link to a process's socket, is not a second process of
// that pid: Prometheus would refuse the scrape that exposes one label set
// twice.
TEST(LivePeers, ANameWithALeadingZeroIsNotASecondProcess) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const auto steps = Stepped(dir, live, "steps", 1);
  ASSERT_FALSE(HasFailure());
  const std::string pid = std::to_string(steps->pid());
  ASSERT_EQ(link(LiveSocketPath(live, steps->pid()).c_str(), (live + "/0" + pid + ".sock").c_str()),
            0);
  const LiveScan scan = ScanLive(live, 50, kGuardMs);
  ASSERT_EQ(scan.processes.size(), 1u);
  ProcessResult r;
  const std::string text = ExportOnce(dir, live, &r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Count(text, "\ngpuwatch_marks_total{pid=\"" + pid + "\""), 1u) << text;
  EXPECT_NE(text.find("\ngpuwatch_exporter_processes 1\n"), std::string::npos) << text;
}

constexpr int kTrickleMs = 150;  // between the bytes of a slow reader

// 60 bytes, 9 s at one each 150 ms; with no newline, all of them fit the
// server's request buffer.
std::string SlowRequest() { return "top 1" + std::string(55, ' '); }

// A reader that trickles its request is cut at the request's deadline (0.2 s
// from its accept) and answered; a reader that came after it is then served.
// Before: the server read as long as each byte came within 0.2 s of the last,
// and answered the slow reader only once it had sent all 60 bytes (9 s),
// the second reader after it.
TEST(LivePeers, ATricklingReaderIsCutAtItsDeadlineAndTheNextIsServed) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const auto steps = Stepped(dir, live, "steps", 2);
  ASSERT_FALSE(HasFailure());
  Trickler slow(ConnectUnix(LiveSocketPath(live, steps->pid())), SlowRequest(), kTrickleMs);
  slow.WaitSent(1);
  const LiveScan scan = ScanLive(live, 50, kGuardMs);
  slow.Join();
  ASSERT_TRUE(slow.connected());
  ASSERT_EQ(scan.processes.size(), 1u);
  EXPECT_EQ(LeakBytes(scan.processes[0].state), 2 * kMiB);
  // The slow one was answered and closed long before it had sent its request.
  EXPECT_TRUE(slow.closed());
  EXPECT_LT(slow.sent(), slow.length());
  tools::LiveState state;
  std::string problem;
  ASSERT_TRUE(tools::ParseLiveAnswer(slow.answer(), &state, &problem)) << problem;
  EXPECT_EQ(LeakBytes(state), 2 * kMiB);
}

// Readers that trickle their requests, each coming when the last is half
// way, do not keep gpuwatch's thread from the report of a SIGTERM: it is
// written and the process dies of the signal. Before: the thread served
// them one after the other, 9 s each, the handler gave up after 10 s, and
// no signal report was written.
TEST(LivePeers, TricklingReadersDoNotCostTheSignalReport) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const auto steps = Stepped(dir, live, "term", 1);
  ASSERT_FALSE(HasFailure());
  const std::string path = LiveSocketPath(live, steps->pid());
  std::vector<std::unique_ptr<Trickler>> slow;
  slow.push_back(std::make_unique<Trickler>(ConnectUnix(path), SlowRequest(), kTrickleMs));
  slow.back()->WaitSent(2);
  ASSERT_EQ(kill(steps->pid(), SIGTERM), 0);
  for (int i = 0; i < 2; ++i) {
    slow.back()->WaitSent(SlowRequest().size() / 2);  // or until it was closed
    slow.push_back(std::make_unique<Trickler>(ConnectUnix(path), SlowRequest(), kTrickleMs));
  }
  const ProcessResult r = steps->Finish();
  EXPECT_TRUE(r.signaled && r.signal == SIGTERM) << r.err;
  const nlohmann::json report = ReadReport(dir.path() + "/term.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["trigger"], "signal");
  EXPECT_EQ(report["label"], "SIGTERM");
  for (auto& t : slow) t->Join();
}

// Terminal controls in a command line are shown as \xNN by `gpuwatch top`:
// no escape reaches the terminal, and a newline does not break the table.
TEST(LivePeers, TopShowsTheControlsOfACommandLine) {
  ScopedTempDir dir;
  const std::string live = MakeLiveDir(dir);
  const auto steps = Stepped(dir, live, "evil", 1, {"1048576\x1b]0;owned\x07\x1b[2J\nX"});
  ASSERT_FALSE(HasFailure());
  const ProcessResult r =
      RunProcess({kCli, "top", "--once", "--timeout-ms", kGuard, "--width", "120", "--dir", live},
                 {{"LANG", "C"}}, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char c : r.out) {
    EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f))
        << static_cast<int>(c) << "\n"
        << r.out;
  }
  const std::string row =
      LineWith(r.out, {" " + std::to_string(steps->pid()) +
                       " -    live_steps 1048576\\x1b]0;owned\\x07\\x1b[2J\\x0aX "});
  ASSERT_NE(row, "") << r.out;
  EXPECT_EQ(row[0], '>');
  EXPECT_NE(row.find(" 1.2M "), std::string::npos) << row;
  EXPECT_EQ(LinesStartingWith(r.out, "X").size(), 0u) << r.out;
}

}  // namespace
}  // namespace gpuwatch::testing
