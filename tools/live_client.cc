#include "tools/live_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "libgpuwatch/base/live_dir.h"

namespace gpuwatch::tools {
namespace {

using json = nlohmann::json;

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

struct Pending {
  pid_t pid = 0;
  std::string path;
  int fd = -1;
  std::string answer;
  bool done = false;
};

// Connects and sends the request; false when nobody listens (fd closed).
bool Ask(Pending& p, size_t top) {
  p.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p.fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, p.path.c_str(), p.path.size() + 1);
  if (connect(p.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(p.fd);
    p.fd = -1;
    return false;
  }
  const std::string request = "top " + std::to_string(top) + "\n";
  (void)!send(p.fd, request.data(), request.size(), MSG_NOSIGNAL);
  return true;
}

}  // namespace

bool ResolveLiveDir(const std::string& dir, std::string* resolved, std::string* problem) {
  *resolved = !dir.empty() ? dir : LiveDirFromEnvironment([](const char* n) {
    return std::getenv(n);  // NOLINT(concurrency-mt-unsafe): read before any thread
  });
  struct stat st {};
  if (lstat(resolved->c_str(), &st) != 0 && errno == ENOENT) return true;
  return PrepareLiveDir(*resolved, /*create=*/false, problem);
}

LiveScan ScanLive(const std::string& dir, size_t top, int timeout_ms) {
  LiveScan scan;
  std::vector<pid_t> pids = ListLiveSockets(dir);
  std::sort(pids.begin(), pids.end());
  std::vector<Pending> pending;
  for (pid_t pid : pids) {
    Pending p;
    p.pid = pid;
    p.path = LiveSocketPath(dir, pid);
    if (p.path.empty()) continue;
    if (!Ask(p, top)) {
      // Nobody listens. A dead process's entry is removed; a live one may be
      // between binding and listening, or not gpuwatch's any more: left.
      if (ProcessGone(pid) && unlink(p.path.c_str()) == 0) ++scan.cleaned;
      continue;
    }
    pending.push_back(std::move(p));
  }
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(std::max(timeout_ms, 0));
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
      char buf[65536];
      const ssize_t r = recv(p.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        p.answer.append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        p.done = true;  // the whole answer, or the process died while answering
      }
    }
  }
  for (Pending& p : pending) {
    close(p.fd);
    if (!p.done) {
      scan.problems.push_back("pid " + std::to_string(p.pid) + ": no answer within " +
                              std::to_string(timeout_ms) + " ms");
      continue;
    }
    json state = json::parse(p.answer, nullptr, /*allow_exceptions=*/false);
    if (state.is_object() && state.value("schema", "") == "gpuwatch-live") {
      scan.processes.push_back({p.pid, std::move(state)});
      continue;
    }
    if (ProcessGone(p.pid)) {
      // Killed while it answered: gone, like one that had already exited.
      if (unlink(p.path.c_str()) == 0) ++scan.cleaned;
      continue;
    }
    std::string what = "not a gpuwatch live state";
    if (state.is_object() && state.contains("error")) what = state["error"].dump();
    scan.problems.push_back("pid " + std::to_string(p.pid) + ": " + what + " (" +
                            std::to_string(p.answer.size()) + " bytes)");
  }
  return scan;
}

}  // namespace gpuwatch::tools
