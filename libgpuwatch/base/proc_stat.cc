#include "libgpuwatch/base/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpuwatch {

ProcStat ReadProcStat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", static_cast<long>(pid));
  return ReadProcStatFile(path);
}

ProcStat ReadProcStatFile(const char* path) {
  ProcStat out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.missing = errno == ENOENT || errno == ESRCH;
    return out;
  }
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return out;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime stime cutime cstime priority nice num_threads
  // itrealvalue starttime ...": comm may hold anything, spaces and
  // parentheses too, so the fields are counted from its last parenthesis.
  const char* fields = std::strrchr(buf, ')');
  if (fields == nullptr) return out;
  char state = 0;
  long ppid = 0;
  unsigned long flags = 0;
  unsigned long long start = 0;
  if (std::sscanf(
          fields + 1,
          " %c %ld %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
          &state, &ppid, &flags, &start) != 4) {
    return out;
  }
  out.known = true;
  out.state = state;
  out.ppid = static_cast<pid_t>(ppid);
  out.flags = flags;
  out.start_ticks = start;
  return out;
}

}  // namespace gpuwatch
