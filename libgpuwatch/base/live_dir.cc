#include "libgpuwatch/base/live_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gpuwatch {

std::string LiveDirFromEnvironment(const EnvLookup& lookup) {
  if (const char* dir = lookup("GPUWATCH_LIVE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* runtime = lookup("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime == '/') {
    return std::string(runtime) + "/gpuwatch";
  }
  return "/tmp/gpuwatch-" + std::to_string(geteuid());
}

bool PrepareLiveDir(const std::string& dir, bool create, std::string* problem, bool group_read) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) {
      *problem = dir + ": " + std::strerror(errno);
      return false;
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      *problem = "cannot make " + dir + ": " + std::strerror(errno);
      return false;
    }
    if (lstat(dir.c_str(), &st) != 0) {
      *problem = dir + ": " + std::strerror(errno);
      return false;
    }
  }
  if (S_ISLNK(st.st_mode)) {
    *problem = dir + " is a symbolic link";
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *problem = dir + " is not a directory";
    return false;
  }
  if (st.st_uid != geteuid()) {
    *problem = dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
               std::to_string(geteuid()) + ")";
    return false;
  }
  const mode_t loose = group_read ? 027 : 077;
  if ((st.st_mode & loose) != 0 && chmod(dir.c_str(), group_read ? 0750 : 0700) != 0) {
    *problem = "cannot make " + dir + " private (mode 0700): " + std::strerror(errno);
    return false;
  }
  return true;
}

std::string NodeDirFromEnvironment(const EnvLookup& lookup) {
  if (const char* dir = lookup("GPUWATCH_NODE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return "/run/gpuwatch";
}

bool CheckNodeRoot(const std::string& root, const struct stat& st, std::string* problem) {
  if (!S_ISDIR(st.st_mode)) {
    *problem = "the node root " + root + " is not a directory";
    return false;
  }
  // Others make their directories in it: without the sticky bit one user
  // could rename another's away and put its own in its place.
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0) {
    *problem = "the node root " + root + " may be written by others and is not sticky (chmod +t)";
    return false;
  }
  return true;
}

namespace {

// False with *problem unless the directory open at `fd` is this user's and
// no one else may write in it; made mode `mode` (0750 or 0700).
bool CheckOwnDir(int fd, const std::string& dir, mode_t mode, std::string* problem) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *problem = dir + ": " + std::strerror(errno);
    return false;
  }
  if (st.st_uid != geteuid()) {
    *problem = dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
               std::to_string(geteuid()) + ")";
    return false;
  }
  if ((st.st_mode & 0777) != mode && fchmod(fd, mode) != 0) {
    *problem = "cannot make " + dir + " mode 0" + (mode == 0750 ? "750" : "700") + ": " +
               std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

bool PrepareNodeUserDir(const std::string& root, std::string* dir, NodeReader* reader, bool* absent,
                        std::string* problem) {
  *absent = false;
  const int root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0) {
    *absent = errno == ENOENT;
    *problem = "the node root " + root + ": " +
               (errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link?)"
                                                   : std::strerror(errno));
    return false;
  }
  struct stat st {};
  bool ok = fstat(root_fd, &st) == 0;
  if (!ok) *problem = "the node root " + root + ": " + std::strerror(errno);
  ok = ok && CheckNodeRoot(root, st, problem);
  const std::string name = std::to_string(geteuid());
  *dir = root + "/" + name;
  // The root's setgid bit gives a new directory the root's group: the
  // exporter's, which may then read it (and no other user).
  const bool inherit = (st.st_mode & S_ISGID) != 0;
  if (ok && mkdirat(root_fd, name.c_str(), inherit ? 0750 : 0700) != 0 && errno != EEXIST) {
    *problem = "cannot make " + *dir + ": " + std::strerror(errno);
    ok = false;
  }
  const int fd =
      ok ? openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  close(root_fd);
  if (!ok) return false;
  if (fd < 0) {
    *problem = *dir + ": " +
               (errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link?)"
                                                   : std::strerror(errno));
    return false;
  }
  struct stat sub {};
  const bool group = inherit && fstat(fd, &sub) == 0 && sub.st_gid == st.st_gid;
  ok = CheckOwnDir(fd, *dir, group ? 0750 : 0700, problem);
  close(fd);
  *reader = {st.st_uid, st.st_gid, group};
  return ok;
}

std::string LiveSocketPath(const std::string& dir, pid_t pid) {
  std::string path = dir + "/" + std::to_string(pid) + ".sock";
  return path.size() < sizeof(sockaddr_un::sun_path) ? path : std::string();
}

std::vector<pid_t> ListLiveSockets(const std::string& dir) {
  std::vector<pid_t> pids;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return pids;
  while (const dirent* e = readdir(d)) {
    const char* name = e->d_name;
    size_t digits = 0;
    while (name[digits] >= '0' && name[digits] <= '9') ++digits;
    // Only the name LiveSocketPath gives a pid: "0123.sock" would be a second
    // entry of pid 123.
    if (digits == 0 || digits > 9 || name[0] == '0' || std::strcmp(name + digits, ".sock") != 0) {
      continue;
    }
    pids.push_back(static_cast<pid_t>(std::strtol(name, nullptr, 10)));
  }
  closedir(d);
  return pids;
}

}  // namespace gpuwatch
