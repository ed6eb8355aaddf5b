#include "tools/commands/report_progress.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace gpuwatch::tools {

ReportProgress::ReportProgress(const std::string& path) : name_(path) {
  struct stat st {};
  if (isatty(STDERR_FILENO) == 0 || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) < kReportProgressMinBytes) {
    return;
  }
  shown_ = true;
  start_ = std::chrono::steady_clock::now();
  char size[32];
  std::snprintf(size, sizeof(size), "%.1f MiB", static_cast<double>(st.st_size) / (1 << 20));
  size_ = size;
  std::fprintf(stderr, "\rgpuwatch report: reading %s (%s)...\033[K", name_.c_str(), size_.c_str());
  std::fflush(stderr);
}

void ReportProgress::Rendering(const std::string& format, bool output_is_terminal) {
  if (!shown_) return;
  if (output_is_terminal) {
    Erase();
    return;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\rgpuwatch report: read %s (%s) in %.1f s; rendering %s...\033[K",
               name_.c_str(), size_.c_str(), s, format.c_str());
  std::fflush(stderr);
}

void ReportProgress::Erase() {
  if (!shown_) return;
  shown_ = false;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

ReportProgress::~ReportProgress() { Erase(); }

}  // namespace gpuwatch::tools
