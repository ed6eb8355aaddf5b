// What `gpuwatch report` says on stderr while it reads and renders a large
// report, so that a terminal does not sit silent for seconds: one line,
// rewritten in place ("reading R.json (512.0 MiB)...", then "rendering..."),
// and erased when the output is written. Only when stderr is a terminal and
// the file is at least kReportProgressMinBytes; never in a pipe or a log.
#ifndef GPUWATCH_TOOLS_COMMANDS_REPORT_PROGRESS_H_
#define GPUWATCH_TOOLS_COMMANDS_REPORT_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace gpuwatch::tools {

inline constexpr uint64_t kReportProgressMinBytes = 16ull << 20;

class ReportProgress {
 public:
  // Says "reading" at once when it is to be shown at all.
  explicit ReportProgress(const std::string& path);
  ~ReportProgress();  // erases the line
  ReportProgress(const ReportProgress&) = delete;
  ReportProgress& operator=(const ReportProgress&) = delete;

  // The report was read: "read ... in S s; rendering ...", or the line
  // erased when the output goes to the same terminal.
  void Rendering(const std::string& format, bool output_is_terminal);
  // Erases the line (before an error is said, or the output written); no more
  // is shown after.
  void Erase();

 private:
  bool shown_ = false;
  std::string name_;
  std::string size_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_REPORT_PROGRESS_H_
