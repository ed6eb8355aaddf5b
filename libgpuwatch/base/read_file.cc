#include "libgpuwatch/base/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "libgpuwatch/base/fds.h"

namespace gpuwatch {

namespace {

const char* NotRegular(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory, not a file";
  if (S_ISFIFO(mode)) return "a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "a socket, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device, not a regular file";
  return "not a regular file";
}

}  // namespace

bool ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string* text,
                     std::string* error) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  const int fd = AboveStdio(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  struct stat st {};
  bool ok = fstat(fd, &st) == 0;
  if (!ok) {
    *error = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    *error = NotRegular(st.st_mode);
    ok = false;
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *error = std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(max_bytes);
    ok = false;
  }
  if (ok) {
    std::string out;
    out.reserve(static_cast<size_t>(st.st_size));
    char buf[65536];
    // A file that grows while it is read stops at the limit too.
    while (out.size() <= max_bytes) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        *error = std::strerror(errno);
        ok = false;
      }
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    if (ok && out.size() > max_bytes) {
      *error = "over the limit of " + std::to_string(max_bytes) + " bytes";
      ok = false;
    }
    if (ok) *text = std::move(out);
  }
  close(fd);
  return ok;
}

}  // namespace gpuwatch
