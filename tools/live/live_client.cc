#include "tools/live/live_client.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "libgpuwatch/base/live_dir.h"
#include "libgpuwatch/base/status_page.h"
#include "tools/live/live_status.h"

namespace gpuwatch::tools {
namespace {

// A task (/proc/.../stat) that is a zombie or exiting (PF_EXITING), or
// reaped meanwhile.
bool TaskEnding(const std::string& stat_path) {
  const ProcStat task = ReadProcStatFile(stat_path.c_str());
  if (!task.known) return task.missing;
  constexpr unsigned long kExiting = 0x4;  // PF_EXITING
  return task.state == 'Z' || task.state == 'X' || (task.flags & kExiting) != 0;
}

// Gone, or going: a process that no longer exists, or whose every thread is
// a zombie or exiting. A process's sockets close while it exits, a moment
// before it is a zombie: a reader that found its socket closed must not
// find it still there. (A main thread that ended alone leaves a zombie
// leader beside threads that run on: that process is not gone.)
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (tasks == nullptr) return false;
  bool ending = true;
  size_t seen = 0;
  while (const dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    ++seen;
    if (!TaskEnding(dir + "/" + e->d_name + "/stat")) {
      ending = false;
      break;
    }
  }
  closedir(tasks);
  if (seen == 0) return kill(pid, 0) != 0 && errno == ESRCH;  // reaped meanwhile
  return ending;
}

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// A name nobody listens on that has been there kStaleEntrySeconds or more.
bool Stale(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec - st.st_mtim.tv_sec >= kStaleEntrySeconds;
}

struct Pending {
  pid_t pid = 0;
  pid_t entry = 0;  // the name's: "<entry>.sock", "<entry>.status"
  uid_t uid = 0;    // the server's
  std::string path;
  int fd = -1;
  std::string answer;
  bool done = false;
  bool too_long = false;
};

// Connects and sends the request; false when nobody listens (fd closed,
// errno from connect).
bool Ask(Pending& p, size_t top) {
  p.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p.fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, p.path.c_str(), p.path.size() + 1);
  if (connect(p.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(p.fd);
    p.fd = -1;
    errno = err;
    return false;
  }
  const std::string request = "top " + std::to_string(top) + "\n";
  (void)!send(p.fd, request.data(), request.size(), MSG_NOSIGNAL);
  return true;
}

// The process that made the socket `fd` is connected to (its pid and uid),
// by the kernel; ours when the kernel cannot say.
ucred Server(int fd) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) return {getpid(), geteuid(), 0};
  return peer;
}

// A uid's user name, or the uid when it has none.
std::string UserName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return pw.pw_name;
  }
  return std::to_string(uid);
}

// Reads what the processes answer until each has closed its end, or sent
// more than any answer can be, or `deadline` (NowMs) passed.
void ReadAnswers(std::vector<Pending>& pending, uint64_t deadline) {
  std::vector<char> buf(65536);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].done) continue;
      fds.push_back({pending[i].fd, POLLIN, 0});
      which.push_back(i);
    }
    const uint64_t now = NowMs();
    if (fds.empty() || now >= deadline) break;
    const int n = poll(fds.data(), fds.size(), static_cast<int>(deadline - now));
    if (n < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Pending& p = pending[which[k]];
      const ssize_t r = recv(p.fd, buf.data(), buf.size(), 0);
      if (r > 0) {
        p.answer.append(buf.data(), static_cast<size_t>(r));
        if (p.answer.size() > kMaxLiveAnswerBytes) p.done = p.too_long = true;
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        p.done = true;  // the whole answer, or the process died while answering
      }
    }
  }
}

// A user's directory in the node root: a reader leaves it readable by the
// exporter's group (mode 0750, live_dir.h).
bool InNodeRoot(const std::string& dir) {
  return dir == NodeRoot() + "/" + std::to_string(geteuid());
}

}  // namespace

LiveState StateFromStatusPage(pid_t pid, const StatusView& view) {
  LiveState state;
  for (const auto& [device, bytes] : view.device_bytes) {
    LiveDevice d;
    d.device = static_cast<uint64_t>(device);
    d.live_bytes = bytes;
    state.devices.push_back(d);
    state.live_bytes += bytes;
  }
  state.command = ProcessCommand(pid);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) state.host = host;
  return state;
}

bool ResolveLiveDir(const std::string& dir, std::string* resolved, std::string* problem) {
  const auto env = [](const char* n) {
    return std::getenv(n);  // NOLINT(concurrency-mt-unsafe): read before any thread
  };
  *resolved = !dir.empty() ? dir : LiveDirFromEnvironment(env);
  struct stat st {};
  // Where the node root has this user's directory, the user's processes
  // serve there (live_dir.h).
  if (const char* set = env("GPUWATCH_LIVE_DIR"); dir.empty() && (set == nullptr || *set == '\0')) {
    const std::string mine = NodeRoot() + "/" + std::to_string(geteuid());
    if (lstat(mine.c_str(), &st) == 0) *resolved = mine;
  }
  if (lstat(resolved->c_str(), &st) != 0 && errno == ENOENT) return true;
  return PrepareLiveDir(*resolved, /*create=*/false, problem, InNodeRoot(*resolved));
}

LiveScan ScanLive(const std::string& dir, size_t top, int timeout_ms) {
  LiveScan scan;
  // Again at each scan: the directory may have been made since the reader
  // started, by anyone.
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 && errno == ENOENT) return scan;
  if (std::string problem; !PrepareLiveDir(dir, /*create=*/false, &problem, InNodeRoot(dir))) {
    scan.problems.push_back(Printable(problem));
    return scan;
  }
  return ScanSockets(dir, {geteuid(), false}, top, timeout_ms);
}

LiveScan ScanSockets(const std::string& dir, const SocketOwner& owner, size_t top, int timeout_ms) {
  LiveScan scan;
  std::vector<pid_t> pids = ListLiveSockets(dir);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  std::vector<Pending> pending;
  for (pid_t pid : pids) {
    Pending p;
    p.pid = p.entry = pid;
    p.path = LiveSocketPath(dir, pid);
    if (p.path.empty()) continue;
    if (!Ask(p, top)) {
      // Nobody listens. A dead process's entry is removed, and so is one
      // nobody has listened on for long; a live process may be between
      // binding and listening. One that listens but takes no one (its
      // backlog full) is a problem.
      const int err = errno;
      const bool refused = err == ECONNREFUSED;
      // In the node root a name's pid may be of another pid namespace
      // (a container's): only the name's age says it is gone.
      if ((!owner.node && ProcessGone(pid)) || (refused && Stale(p.path))) {
        if (unlink(p.path.c_str()) == 0) ++scan.cleaned;
        unlink(StatusPagePath(dir, pid).c_str());
      } else if (!refused && err != ENOENT) {
        scan.problems.push_back("pid " + std::to_string(pid) +
                                ": cannot connect: " + std::strerror(err));
      }
      continue;
    }
    const ucred server = Server(p.fd);
    if (server.uid != owner.uid) {
      scan.problems.push_back(
          "pid " + std::to_string(pid) + ": served by uid " + std::to_string(server.uid) +
          (owner.node ? ", not by the directory's owner (uid " : ", not by this user (uid ") +
          std::to_string(owner.uid) + "): not read");
      close(p.fd);
      continue;
    }
    if (owner.node) {
      p.pid = server.pid;  // the kernel's word, in this reader's pid namespace
      p.uid = server.uid;
    }
    pending.push_back(std::move(p));
  }
  ReadAnswers(pending, NowMs() + static_cast<uint64_t>(std::max(timeout_ms, 0)));
  for (Pending& p : pending) {
    close(p.fd);
    const std::string who = "pid " + std::to_string(p.pid) + ": ";
    LiveProcess process;
    process.pid = p.pid;
    if (owner.node) process.user = UserName(p.uid);
    process.proc = ReadProcStat(p.pid);
    if (process.proc.known) {
      const ProcStat parent = ReadProcStat(process.proc.ppid);
      process.parent_start_ticks = parent.known ? parent.start_ticks : 0;
    }
    if (!p.done) {
      scan.problems.push_back(who + "no answer within " + std::to_string(timeout_ms) + " ms");
      process.answered = false;
      std::string no_page;  // none: what else is known of it is used (live_known.h)
      if (StatusView view; ReadStatusPage(StatusPagePath(dir, p.entry), &view, &no_page)) {
        process.status = std::move(view);
      }
      scan.silent.push_back(std::move(process));
      continue;
    }
    std::string problem;
    if (p.too_long) {
      problem = "an answer of more than " + std::to_string(kMaxLiveAnswerBytes >> 20) + " MiB";
    } else if (ParseLiveAnswer(p.answer, &process.state, &problem)) {
      if (StatusView view; ReadStatusPage(StatusPagePath(dir, p.entry), &view, &problem)) {
        process.status = std::move(view);
      }
      scan.processes.push_back(std::move(process));
      continue;
    }
    if (ProcessGone(p.pid)) {
      // Killed while it answered: gone, like one that had already exited.
      if (unlink(p.path.c_str()) == 0) ++scan.cleaned;
      unlink(StatusPagePath(dir, p.entry).c_str());
      continue;
    }
    scan.problems.push_back(who + problem);
  }
  std::sort(scan.processes.begin(), scan.processes.end(),
            [](const LiveProcess& a, const LiveProcess& b) { return a.pid < b.pid; });
  return scan;
}

}  // namespace gpuwatch::tools
