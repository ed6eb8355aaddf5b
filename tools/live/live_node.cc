// The node root (libgpuwatch/base/live_dir.h): every user's live directory
// in it, read for `gpuwatch exporter --node` (live_client.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "libgpuwatch/base/live_dir.h"
#include "tools/live/live_client.h"

namespace gpuwatch::tools {
namespace {

// The uids named by the root's entries: digits, without a leading zero.
std::vector<uid_t> UserEntries(int root_fd) {
  std::vector<uid_t> uids;
  const int fd = dup(root_fd);
  DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
  if (d == nullptr) {
    if (fd >= 0) close(fd);
    return uids;
  }
  while (const dirent* e = readdir(d)) {
    const char* name = e->d_name;
    const size_t n = std::strlen(name);
    if (n == 0 || n > 10 || std::strspn(name, "0123456789") != n || (name[0] == '0' && n > 1)) {
      continue;
    }
    const unsigned long long uid = std::strtoull(name, nullptr, 10);
    if (uid < 0xffffffffULL) uids.push_back(static_cast<uid_t>(uid));
  }
  closedir(d);
  std::sort(uids.begin(), uids.end());
  return uids;
}

// One user's directory, open at `fd`: its processes into *scan when it is a
// directory of `uid`'s that no one else may write; else one problem.
void ScanUser(int fd, const std::string& path, uid_t uid, size_t top, int timeout_ms,
              LiveScan* scan) {
  struct stat st {};
  std::string problem;
  if (fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (st.st_uid != uid) {
    problem = "owned by uid " + std::to_string(st.st_uid) + ", not by uid " + std::to_string(uid);
  } else if ((st.st_mode & 022) != 0) {
    problem = "others may write in it";
  }
  if (!problem.empty()) {
    scan->problems.push_back(Printable(path + ": " + problem + ": not read"));
    return;
  }
  // Through the descriptor: what is read is the directory checked.
  LiveScan one = ScanSockets("/proc/self/fd/" + std::to_string(fd), {uid, true}, top, timeout_ms);
  for (LiveProcess& p : one.processes) scan->processes.push_back(std::move(p));
  for (LiveProcess& p : one.silent) scan->silent.push_back(std::move(p));
  for (const std::string& p : one.problems) scan->problems.push_back(Printable(path) + ": " + p);
  scan->cleaned += one.cleaned;
}

}  // namespace

std::string NodeRoot() {
  return NodeDirFromEnvironment([](const char* n) {
    return std::getenv(n);  // NOLINT(concurrency-mt-unsafe): read before any thread
  });
}

LiveScan ScanNode(const std::string& root, size_t top, int timeout_ms) {
  LiveScan scan;
  const int root_fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0) {
    // One that does not exist yet: no process has registered.
    if (errno != ENOENT) {
      scan.problems.push_back(Printable("the node root " + root + ": " + std::strerror(errno)));
    }
    return scan;
  }
  struct stat st {};
  std::string problem;
  if (fstat(root_fd, &st) != 0) {
    problem = "the node root " + root + ": " + std::strerror(errno);
  } else if (CheckNodeRoot(root, st, &problem) && st.st_uid != 0 && st.st_uid != geteuid()) {
    problem = "the node root " + root + " is owned by uid " + std::to_string(st.st_uid) +
              ", not by root or this user (uid " + std::to_string(geteuid()) + ")";
  }
  if (!problem.empty()) {
    close(root_fd);
    scan.problems.push_back(Printable(problem));
    return scan;
  }
  for (const uid_t uid : UserEntries(root_fd)) {
    const std::string name = std::to_string(uid);
    std::string path = root;
    path += "/";
    path += name;
    const int fd = openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      scan.problems.push_back(
          Printable(path + ": " +
                    (errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link?)"
                                                        : std::strerror(errno)) +
                    ": not read"));
      continue;
    }
    ScanUser(fd, path, uid, top, timeout_ms, &scan);
    close(fd);
  }
  close(root_fd);
  std::sort(scan.processes.begin(), scan.processes.end(),
            [](const LiveProcess& a, const LiveProcess& b) { return a.pid < b.pid; });
  return scan;
}

}  // namespace gpuwatch::tools
