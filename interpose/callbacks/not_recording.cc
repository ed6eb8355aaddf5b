#include "interpose/callbacks/not_recording.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "libgpuwatch/base/fds.h"

namespace gpuwatch {
namespace {

// Plain storage, written once before `g_marked` is published.
char g_why[512];
std::atomic<bool> g_marked{false};
std::atomic<bool> g_claimed{false};

}  // namespace

void MarkNotRecording(const std::string& why, const std::string& run_log) {
  if (g_claimed.exchange(true)) return;
  const size_t n = std::min(why.size(), sizeof(g_why) - 1);
  std::memcpy(g_why, why.data(), n);
  g_why[n] = '\0';
  g_marked.store(true, std::memory_order_release);
  AppendRunLog(run_log, "off", why);
}

void AppendRunLog(const std::string& run_log, const char* kind, const std::string& text) {
  if (run_log.empty()) return;
  const int fd = AboveStdio(open(run_log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0) return;
  std::string clean = text;
  for (char& c : clean) {
    if (c == '\t' || c == '\n') c = ' ';  // the log's separators
  }
  const std::string line =
      std::string(kind) + "\t" + clean + "\t" + std::to_string(getpid()) + "\n";
  (void)!write(fd, line.data(), line.size());  // O_APPEND: one write, one line
  close(fd);
}

bool NotRecordingReason(char* why, size_t size) {
  if (!g_marked.load(std::memory_order_acquire)) return false;
  if (why != nullptr && size > 0) {
    const size_t n = std::min(std::strlen(g_why), size - 1);
    std::memcpy(why, g_why, n);
    why[n] = '\0';
  }
  return true;
}

}  // namespace gpuwatch
