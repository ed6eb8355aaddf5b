#include "libgpuwatch/base/log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace gpuwatch {

namespace {

void WriteAll(const char* data, size_t len) {
  const int saved_errno = errno;  // the host may be inspecting errno around us
  while (len > 0) {
    const ssize_t n = write(STDERR_FILENO, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data += n;
    len -= static_cast<size_t>(n);
  }
  errno = saved_errno;
}

}  // namespace

void Warn(const char* fmt, ...) {
  char buf[1024];
  constexpr char kPrefix[] = "gpuwatch: ";
  constexpr size_t kPrefixLen = sizeof(kPrefix) - 1;
  std::memcpy(buf, kPrefix, kPrefixLen);
  va_list args;
  va_start(args, fmt);
  // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start above
  const int n = std::vsnprintf(buf + kPrefixLen, sizeof(buf) - kPrefixLen - 1, fmt, args);
  va_end(args);
  size_t len = kPrefixLen;
  if (n > 0) len += std::min(static_cast<size_t>(n), sizeof(buf) - kPrefixLen - 2);
  buf[len++] = '\n';
  WriteAll(buf, len);
}

void WriteStderr(const char* text) { WriteAll(text, std::strlen(text)); }

}  // namespace gpuwatch
