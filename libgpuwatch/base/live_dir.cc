#include "libgpuwatch/base/live_dir.h"

#include <dirent.h>
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

bool PrepareLiveDir(const std::string& dir, bool create, std::string* problem) {
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
  if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0) {
    *problem = "cannot make " + dir + " private (mode 0700): " + std::strerror(errno);
    return false;
  }
  return true;
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
