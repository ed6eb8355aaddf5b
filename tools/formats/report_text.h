// `gpuwatch report`'s text form: the printer every section is written with,
// and its transfers, phases and PyTorch blocks sections.
// For report_command.cc; report_text.cc holds the sections.
#ifndef GPUWATCH_TOOLS_FORMATS_REPORT_TEXT_H_
#define GPUWATCH_TOOLS_FORMATS_REPORT_TEXT_H_

#include <algorithm>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "libgpuwatch/report/format.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

// "function (file:line)", "function (module)" or "module".
std::string FrameText(const ReportFrame& f);

// libc's frames below main: never worth a line.
bool IsStartupFrame(const ReportFrame& f);

class Printer {
 public:
  Printer(FILE* out, int top) : out_(out), top_(static_cast<size_t>(std::max(top, 1))) {}

  void Line(const std::string& text) { std::fprintf(out_, "%s\n", text.c_str()); }
  void Blank() { std::fputc('\n', out_); }
  size_t top() const { return top_; }

  // "   2.0 MiB       8  leaky_loop.cu:37  AllocateHistory()" and, below it,
  // up to two callers.
  void Site(const std::string& bytes, const std::string& count, const ReportSite& site,
            const std::string& tag = "") {
    std::string text = "  " + Pad(bytes, 10) + "  " + Pad(count, 7) + "  ";
    if (!tag.empty()) text += "[" + tag + "] ";
    text += Describe(site);
    Line(text);
    const std::vector<ReportFrame>& frames = site.frames;
    for (size_t i = 1, shown = 0; i < frames.size() && shown < 2; ++i) {
      if (IsStartupFrame(frames[i])) break;
      Line(std::string(25, ' ') + "<- " + FrameText(frames[i]));
      ++shown;
    }
  }

  void More(size_t shown, size_t total, const char* what) {
    if (total > shown) {
      Line("  ... and " + std::to_string(total - shown) + " more " + what +
           " (--top to show more)");
    }
  }

  static std::string Pad(const std::string& s, size_t width) {
    return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
  }

 private:
  FILE* out_;
  size_t top_;
};

// Notes on a section's counters: "N <one or many><says>" for each that is not
// 0, `second` (when not null) counted with `count`.
template <typename T>
struct CounterNote {
  uint64_t T::*count;
  uint64_t T::*second;
  const char* one;
  const char* many;
  const char* says;
};
template <typename T>
std::vector<std::string> CounterNotes(const T& counters, std::span<const CounterNote<T>> notes) {
  std::vector<std::string> out;
  for (const CounterNote<T>& note : notes) {
    const uint64_t n = counters.*note.count + (note.second != nullptr ? counters.*note.second : 0);
    if (n != 0) out.push_back(CountOf(n, note.one, note.many) + note.says);
  }
  return out;
}

// One row of a site table: the site, the bytes and count it is listed by,
// and its tag ("" for none).
struct SiteRow {
  const ReportSite* site = nullptr;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string tag;
};

// A site table, at most p->top() locations: rows that read the same
// (Describe: one helper's line reached from many call paths) are one row,
// their call paths under it (the first frame where their stacks differ,
// site_groups.h), then a row for the locations not shown. `counted`: the
// count column is shown. `after(i)` (may be null) prints what follows row
// i's line.
void PrintSiteRows(const std::vector<SiteRow>& rows, bool counted,
                   const std::function<void(size_t)>& after, Printer* p);

// Leak sites as PrintSiteRows prints them; `tags[i]` (may be empty) is row
// i's tag, `after(site)` (may be null) prints what follows a site's row.
void PrintLeakRows(const std::vector<const LeakSite*>& sites, const std::vector<std::string>& tags,
                   const std::function<void(const LeakSite&)>& after, Printer* p);

// Copies by direction, host memory and site, and the findings.
void PrintTransfers(const ReportModel& m, Printer* p);
// The CUDA errors (cuda_errors): a run that failed leads with its sticky
// error, the call where it surfaced and the kernels launched before it.
void PrintCudaErrors(const ReportModel& m, Printer* p);

// Memory by phase, as a tree: each path under the one it is nested in.
void PrintPhases(const ReportModel& m, Printer* p);

// PyTorch's segments by the gpuwatch site that made them, reserved against
// allocated, each block with its Python line (torch_blocks_text.cc).
void PrintTorchBlocks(const ReportModel& m, Printer* p);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_FORMATS_REPORT_TEXT_H_
