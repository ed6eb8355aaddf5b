// End-to-end test of `gpuwatch exporter --node` (issue 34): processes of two
// local users, and of two cgroups, serve their live state in their users'
// directories of a node root; one exporter, run as root, reads them all, and
// a real Prometheus server scrapes it beside a dcgm-exporter-like target.
// Each user's and each cgroup's series are exact and apart, a third user
// can reach neither the directories nor the sockets, a socket planted in one
// user's directory by another is refused with one line, and the join with
// dcgm-exporter's series by UUID gives the expected rows. Needs root (CI and
// the development container are); the users are the system's `daemon`,
// `bin` and `nobody`; the cgroups part needs a writable cgroup v2 mount and
// is skipped with one line where there is none.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "libgpuwatch/base/live_dir.h"
#include "tests/e2e/peers.h"
#include "tests/e2e/scrape.h"

namespace gpuwatch::testing {
namespace {

struct User {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

std::optional<User> SystemUser(const char* name) {
  const passwd* pw = getpwnam(name);  // NOLINT(concurrency-mt-unsafe): the test's thread alone
  if (pw == nullptr) return std::nullopt;
  return User{pw->pw_uid, pw->pw_gid, pw->pw_name};
}

// Where cgroup v2 is mounted (/sys/fs/cgroup, or .../unified on a hybrid
// system), or "".
std::string Cgroup2Mount() {
  std::istringstream in(ReadFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    return field;  // the fifth: the mount point
  }
  return "";
}

// A cgroup of the test's own, named like a container's scope (so that its
// processes' container_id label is `id`), removed when the test ends.
class ScopedCgroup {
 public:
  ScopedCgroup(const std::string& mount, const std::string& id) : id_(id) {
    if (mount.empty()) {
      problem_ = "no cgroup v2 mount";
      return;
    }
    path_ = mount + "/docker-" + id + ".scope";
    if (mkdir(path_.c_str(), 0755) != 0) {
      problem_ = "cannot make " + path_ + ": " + std::strerror(errno);
      path_.clear();
    }
  }
  ~ScopedCgroup() {
    if (!path_.empty()) rmdir(path_.c_str());
  }
  ScopedCgroup(const ScopedCgroup&) = delete;
  ScopedCgroup& operator=(const ScopedCgroup&) = delete;

  bool made() const { return !path_.empty(); }
  std::string procs() const { return path_ + "/cgroup.procs"; }
  const std::string& id() const { return id_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string id_;
  std::string path_;
  std::string problem_;
};

// A container id of 64 hex digits, this test process's own.
std::string ContainerId(char fill) {
  char pid[9];
  std::snprintf(pid, sizeof(pid), "%08x", static_cast<unsigned>(getpid()));
  return std::string(56, fill) + pid;
}

// The launcher of live_steps as `user` (setpriv), first moved into the
// cgroup whose cgroup.procs is `procs` when it is not "". The preload is
// given to live_steps alone (env), and GPUWATCH_LIVE_DIR is taken away so
// that it serves in the node root.
std::vector<std::string> AsUser(const User& user, const std::string& procs,
                                const std::string& preload) {
  std::vector<std::string> argv;
  if (!procs.empty()) argv = {"/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", procs};
  const std::vector<std::string> rest = {"setpriv",
                                         "--reuid=" + std::to_string(user.uid),
                                         "--regid=" + std::to_string(user.gid),
                                         "--clear-groups",
                                         "--",
                                         "/usr/bin/env",
                                         "-u",
                                         "GPUWATCH_LIVE_DIR",
                                         "LD_PRELOAD=" + preload};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

// What `user` gets trying to list the node root, open a user's directory in
// it and connect to a socket there: the three errnos (0: it could).
std::string TryAs(const User& user, const std::string& root, const std::string& dir,
                  const std::string& socket_path) {
  int out[2];
  if (pipe(out) != 0) return "no pipe";
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0) _exit(3);
    int errs[3] = {0, 0, 0};
    if (DIR* d = opendir(root.c_str())) {
      closedir(d);
    } else {
      errs[0] = errno;
    }
    if (const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY); fd >= 0) {
      close(fd);
    } else {
      errs[1] = errno;
    }
    const int s = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
    if (connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) errs[2] = errno;
    char text[64];
    const int n = std::snprintf(text, sizeof(text), "%d %d %d", errs[0], errs[1], errs[2]);
    (void)!write(out[1], text, static_cast<size_t>(n));
    _exit(0);
  }
  close(out[1]);
  std::string text;
  char buf[64];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  close(out[0]);
  waitpid(child, nullptr, 0);
  return text;
}

// A dcgm-exporter of the test's own: a loopback HTTP server that answers
// every request with `metrics`, on a thread, until destroyed.
class StaticTarget {
 public:
  explicit StaticTarget(std::string metrics) : metrics_(std::move(metrics)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 16) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
      thread_ = std::thread([this] { Serve(); });
    }
  }
  ~StaticTarget() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);  // wakes the accept
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  StaticTarget(const StaticTarget&) = delete;
  StaticTarget& operator=(const StaticTarget&) = delete;

  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR) continue;
        return;
      }
      // The request's headers, up to their blank line (a hang guard of 5 s).
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        pollfd p{c, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) break;
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      const std::string answer =
          "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
          std::to_string(metrics_.size()) + "\r\n\r\n" + metrics_;
      (void)!send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      close(c);
    }
  }

  std::string metrics_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The series of an instant query's result by the value of `label`.
std::map<std::string, double> ByLabel(const json& result, const std::string& label) {
  std::map<std::string, double> out;
  if (!result.is_array()) return out;
  for (const json& r : result) {
    out[r["metric"].value(label, "")] = std::stod(r["value"][1].get<std::string>());
  }
  return out;
}

// The line of /metrics that starts with `prefix`, or "".
std::string MetricLine(const std::string& body, const std::string& prefix) {
  const std::vector<std::string> lines = LinesStartingWith(body, prefix);
  return lines.size() == 1 ? lines[0] : "";
}

constexpr double kMiB = 1024.0 * 1024.0;
const std::string kGpu2 = "GPU-67777369-6d2d-6465-7669-63652d303200";  // "gwsim-device-02"
const std::string kGpu3 = "GPU-67777369-6d2d-6465-7669-63652d303300";

TEST(Node, OneExporterReadsEveryUsersAndCgroupsProcessesApartAndRefusesTheRest) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run processes as other users";
  SKIP_WITHOUT(kPrometheus);
  SKIP_WITHOUT(std::string("/usr/bin/setpriv"));
  const std::optional<User> a = SystemUser("daemon");
  const std::optional<User> b = SystemUser("bin");
  const std::optional<User> third = SystemUser("nobody");
  if (!a || !b || !third) GTEST_SKIP() << "needs the users daemon, bin and nobody";
  ScopedTempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);  // the users' reports go there
  // The node root as an operator makes it (docs/prometheus.md): root's,
  // others may make their directories in it but not list it, sticky.
  const std::string root = dir.path() + "/node";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(chmod(root.c_str(), 01733), 0);

  const std::string mount = Cgroup2Mount();
  const ScopedCgroup x(mount, ContainerId('a'));
  const ScopedCgroup y(mount, ContainerId('b'));
  const bool cgroups = x.made() && y.made();
  if (!cgroups) {
    std::printf("[  SKIPPED ] the cgroups' part: %s\n",
                (!x.made() ? x.problem() : y.problem()).c_str());
  }
  const std::string preload = PreloadEnv("", {})["LD_PRELOAD"];
  const auto env = [&](const char* devices) {
    return std::map<std::string, std::string>{{"LD_PRELOAD", ""},
                                              {"GPUWATCH_NODE_DIR", root},
                                              {"GWSIM_DEVICE_COUNT", "4"},
                                              {"CUDA_VISIBLE_DEVICES", devices}};
  };
  const std::string unused = dir.path() + "/per-user";  // GPUWATCH_LIVE_DIR, taken away
  // User a: 1.25 MiB on GPU 2 (cgroup x) and 2.25 MiB on GPU 3 (cgroup y);
  // user b: 3.25 MiB on GPU 2 (0.25 MiB at start and 1 MiB a step).
  LiveSteps a1(dir, unused, "a1", env("2"), {}, AsUser(*a, cgroups ? x.procs() : "", preload));
  LiveSteps a2(dir, unused, "a2", env("3"), {}, AsUser(*a, cgroups ? y.procs() : "", preload));
  LiveSteps b1(dir, unused, "b1", env("2"), {}, AsUser(*b, "", preload));
  ASSERT_TRUE(ReadyAndStepped(a1, 1));
  ASSERT_TRUE(ReadyAndStepped(a2, 2));
  ASSERT_TRUE(ReadyAndStepped(b1, 3));
  const std::string a_dir = root + "/" + std::to_string(a->uid);
  struct stat st {};
  ASSERT_EQ(lstat(a_dir.c_str(), &st), 0) << a1.err();
  EXPECT_EQ(st.st_uid, a->uid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const std::string a1_socket = LiveSocketPath(a_dir, a1.pid());
  EXPECT_EQ(access(a1_socket.c_str(), F_OK), 0);
  EXPECT_NE(access(LiveSocketPath(unused, a1.pid()).c_str(), F_OK), 0);

  // User b's process, its socket moved into a's directory (as only root or a
  // could): read, it would say it is "planted".
  const pid_t planted =
      ServeAsAnotherUser(b->uid, dir.path() + "/b-own",
                         R"({"schema":"gpuwatch-live","version":1,"command":["planted"],"marks":7})"
                         "\n",
                         /*make_dir=*/true);
  ASSERT_GT(planted, 0);
  ASSERT_EQ(rename(LiveSocketPath(dir.path() + "/b-own", planted).c_str(),
                   LiveSocketPath(a_dir, planted).c_str()),
            0);

  // The third user reaches nothing: not the root's list, not a's directory,
  // not a's socket.
  EXPECT_EQ(TryAs(*third, root, a_dir, a1_socket),
            std::to_string(EACCES) + " " + std::to_string(EACCES) + " " + std::to_string(EACCES));

  // User a's `gpuwatch top` reads a's directory in the node root: a's two
  // processes, and not b's.
  const ProcessResult top = RunProcess(
      {"setpriv", "--reuid=" + std::to_string(a->uid), "--regid=" + std::to_string(a->gid),
       "--clear-groups", "--", kCli, "top", "--once", "--timeout-ms", "60000"},
      {{"LANG", "C"}, {"GPUWATCH_NODE_DIR", root}}, "");
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("2 processes  sort"), std::string::npos) << top.out << top.err;

  Exporter exporter(root, {"--node", "--timeout-ms", "60000"});
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  const HttpResponse r = HttpGet(exporter.port(), "/metrics", 90000);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_processes 3\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_scrape_problems 1\n"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("planted"), std::string::npos) << r.body;
  const auto expect_process = [&](const LiveSteps& p, const User& user, const ScopedCgroup* cg,
                                  double bytes) {
    const std::string line = MetricLine(
        r.body, "gpuwatch_process_device_memory_bytes{pid=\"" + std::to_string(p.pid()) + "\",");
    EXPECT_NE(line.find(",user=\"" + user.name + "\""), std::string::npos) << r.body;
    if (cg != nullptr) {
      EXPECT_NE(line.find(",container_id=\"" + cg->id() + "\""), std::string::npos) << r.body;
    } else {
      EXPECT_EQ(line.find("container_id="), std::string::npos) << r.body;
    }
    std::ostringstream value;
    value << " " << static_cast<uint64_t>(bytes);
    EXPECT_TRUE(line.size() > value.str().size() &&
                line.compare(line.size() - value.str().size(), std::string::npos, value.str()) == 0)
        << line;
  };
  expect_process(a1, *a, cgroups ? &x : nullptr, 1.25 * kMiB);
  expect_process(a2, *a, cgroups ? &y : nullptr, 2.25 * kMiB);
  expect_process(b1, *b, nullptr, 3.25 * kMiB);

  // dcgm-exporter's framebuffer use of the GPUs (in MiB, as it reports it).
  const std::string dcgm_labels = R"(,Hostname="node1",modelName="gwsim-)";
  StaticTarget dcgm(
      "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
      "DCGM_FI_DEV_FB_USED{gpu=\"2\",UUID=\"" +
      kGpu2 + "\",device=\"nvidia2\",pci_bus_id=\"00000000:03:00.0\"" + dcgm_labels +
      "2\"} 8\n"
      "DCGM_FI_DEV_FB_USED{gpu=\"3\",UUID=\"" +
      kGpu3 + "\",device=\"nvidia3\",pci_bus_id=\"00000000:04:00.0\"" + dcgm_labels + "3\"} 4\n");
  ASSERT_NE(dcgm.port(), 0);
  Prometheus prom(dir, exporter.port(), kSourceDir + "/examples/prometheus/gpuwatch-rules.yml",
                  {dcgm.port()});
  ASSERT_TRUE(prom.ready()) << prom.log();
  std::map<std::string, double> by_user;
  EXPECT_TRUE(PollUntil(
      [&] {
        by_user =
            ByLabel(prom.Query("sum by (user) (gpuwatch_process_device_memory_bytes)"), "user");
        return by_user.size() == 2;
      },
      90000))
      << prom.log();
  EXPECT_EQ(by_user,
            (std::map<std::string, double>{{a->name, 3.5 * kMiB}, {b->name, 3.25 * kMiB}}));
  if (cgroups) {
    std::map<std::string, double> by_container;
    EXPECT_TRUE(PollUntil(
        [&] {
          by_container =
              ByLabel(prom.Query("sum by (container_id) (gpuwatch_process_device_memory_bytes)"),
                      "container_id");
          return by_container.size() == 3;
        },
        90000));
    EXPECT_EQ(by_container, (std::map<std::string, double>{
                                {x.id(), 1.25 * kMiB}, {y.id(), 2.25 * kMiB}, {"", 3.25 * kMiB}}));
  }
  // Each user's share of what dcgm-exporter says each GPU's framebuffer
  // holds, joined by UUID.
  json joined;
  EXPECT_TRUE(PollUntil(
      [&] {
        joined = prom.Query(
            "sum by (UUID, user) (gpuwatch_device_memory_live_bytes) / on (UUID) "
            "group_left (modelName) (DCGM_FI_DEV_FB_USED * 1048576)");
        return joined.is_array() && joined.size() == 3;
      },
      90000))
      << joined.dump();
  std::map<std::string, double> rows;
  for (const json& row : joined) {
    rows[row["metric"].value("UUID", "") + " " + row["metric"].value("user", "") + " " +
         row["metric"].value("modelName", "")] = std::stod(row["value"][1].get<std::string>());
  }
  EXPECT_EQ(rows, (std::map<std::string, double>{{kGpu2 + " " + a->name + " gwsim-2", 0.15625},
                                                 {kGpu2 + " " + b->name + " gwsim-2", 0.40625},
                                                 {kGpu3 + " " + a->name + " gwsim-3", 0.5625}}))
      << joined.dump();

  Reap(planted);
  const ProcessResult stopped = exporter.Stop();
  EXPECT_EQ(stopped.exit_code, 0);
  const std::string refused = "gpuwatch exporter: " + a_dir + ": pid " + std::to_string(planted) +
                              ": served by uid " + std::to_string(b->uid) +
                              ", not by the directory's owner (uid " + std::to_string(a->uid) +
                              "): not read\n";
  EXPECT_NE(stopped.err.find(refused), std::string::npos) << stopped.err;
  EXPECT_EQ(stopped.err.find(refused), stopped.err.rfind(refused)) << stopped.err;
}

// The exporter as a user of its own (the systemd unit's, the DaemonSet's): the
// node root is that user's and group's, mode 3753 (docs/prometheus.md), and a
// process of another user under umask 077 (its directory's chmod to 0750 then
// drops the setgid bit it inherited, so its socket gets the user's group) is
// still read: 1.25 MiB, user "daemon", no problem.
TEST(Node, AnExporterOfItsOwnUserReadsAProcessStartedUnderUmask077) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run processes as other users";
  SKIP_WITHOUT(std::string("/usr/bin/setpriv"));
  const std::optional<User> a = SystemUser("daemon");
  const std::optional<User> exporter = SystemUser("games");
  if (!a || !exporter) GTEST_SKIP() << "needs the users daemon and games";
  ScopedTempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);  // the users' reports and the textfile go there
  const std::string root = dir.path() + "/node";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(chown(root.c_str(), exporter->uid, exporter->gid), 0);
  ASSERT_EQ(chmod(root.c_str(), 03753), 0);
  const std::string preload = PreloadEnv("", {})["LD_PRELOAD"];
  std::vector<std::string> launcher = {"/bin/sh", "-c", "umask 077 && exec \"$@\"", "sh"};
  const std::vector<std::string> as_a = AsUser(*a, "", preload);
  launcher.insert(launcher.end(), as_a.begin(), as_a.end());
  LiveSteps a1(dir, dir.path() + "/per-user", "a1",
               {{"LD_PRELOAD", ""}, {"GPUWATCH_NODE_DIR", root}}, {}, launcher);
  ASSERT_TRUE(ReadyAndStepped(a1, 1));
  struct stat st {};
  const std::string a_dir = root + "/" + std::to_string(a->uid);
  ASSERT_EQ(lstat(a_dir.c_str(), &st), 0) << a1.err();
  EXPECT_EQ(st.st_gid, exporter->gid);   // from the root's setgid bit
  EXPECT_EQ(st.st_mode & 07777, 0750u);  // umask 077's 0700 made 0750, the setgid bit gone

  const std::string textfile = dir.path() + "/textfile";
  ASSERT_EQ(mkdir(textfile.c_str(), 0777), 0);
  ASSERT_EQ(chmod(textfile.c_str(), 0777), 0);
  const ProcessResult r =
      RunProcess({"setpriv", "--reuid=" + std::to_string(exporter->uid),
                  "--regid=" + std::to_string(exporter->gid), "--clear-groups", "--", kCli,
                  "exporter", "--node", "--dir", root, "--textfile", textfile, "--once"},
                 {}, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string body = ReadFile(textfile + "/gpuwatch.prom");
  EXPECT_NE(body.find("\ngpuwatch_exporter_processes 1\n"), std::string::npos) << body << r.err;
  EXPECT_NE(body.find("\ngpuwatch_exporter_scrape_problems 0\n"), std::string::npos)
      << body << r.err;
  const std::string memory = MetricLine(body, "gpuwatch_process_device_memory_bytes{");
  EXPECT_NE(memory.find("user=\"daemon\""), std::string::npos) << memory;
  EXPECT_EQ(memory.substr(memory.rfind(' ') + 1), std::to_string(1280 * kKiB)) << memory;
  EXPECT_EQ(a1.Finish().exit_code, 0);
}

}  // namespace
}  // namespace gpuwatch::testing
