// Reading gpuwatch report files for the `gpuwatch` subcommands, and the
// small helpers they share: figures and sites out of a report, sizes on the
// command line.
//
// A report is untrusted input: ReadReport validates the schema name, the
// version and every field the typed model reads (ReadReportModel), and the
// subcommands read the model only, never the JSON.
#ifndef GPUWATCH_TOOLS_READING_REPORT_READER_H_
#define GPUWATCH_TOOLS_READING_REPORT_READER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libgpuwatch/analysis/suppressions.h"
#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"
#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

using nlohmann::json;

// A report as the subcommands read it: the typed model only
// (libgpuwatch/report/report_model.h), every site with its `frames`.
struct Report {
  std::string path;
  ReportModel model;
};

// The report as a document again (`--format json`, the HTML page's data):
// ReportModel::ToJson with each site's `frames` and no frame table, and
// without the trace's events.
json ReportDocument(const ReportModel& model);

// Reads and validates a report. On failure returns false and sets `error` to
// one line that names the file and the problem: unreadable, empty, truncated
// JSON, not JSON, not a gpuwatch report (foreign schema), a newer version,
// or a missing section.
//
// The event trace (`trace`, up to a million events: most of a large
// report's bytes) is read only when asked for (`--format json`, `perfetto`,
// `html`), into `model.trace`, its events straight from the text into their
// structs; without it, a report is read in little more memory than its text
// (docs/reliability.md, "Reading large reports").
enum class TraceSection { kSkip, kKeep };
bool ReadReport(const std::string& path, Report* out, std::string* error,
                TraceSection trace = TraceSection::kSkip);

// What a checkpoint report is, for the header of `report` and the rule of
// `check`: "a checkpoint taken 2.1 s after attach (its file written
// 2026-12-06 22:30:05 UTC), not an exit report: the process had not exited
// then (killed with SIGKILL, or still running)". The file's time is its
// modification time (a report is written whole, then renamed), left out when
// it cannot be read.
std::string CheckpointTaken(const Report& report);

// The command line of a report's process: its arguments joined by spaces.
std::string CommandLine(const ReportProcess& process);

// In a merged report, the process whose peak a phase's `peak_bytes` is:
// "rank R" (its rank when it had one) or "pid P"; "" in a process's own
// report.
std::string PhasePeakProcess(const PhasePath& path);

// Whether a key of totals.kinds names host memory (pinned_host,
// registered_host); every other kind is device memory.
bool IsHostKind(std::string_view kind);

// Allocations, bytes allocated and frees of totals.kinds, device kinds or
// host kinds apart.
struct KindSums {
  uint64_t allocs = 0;
  uint64_t alloc_bytes = 0;
  uint64_t frees = 0;
};
KindSums SumKinds(const ReportTotals& totals, bool host);

// The function of the frame a site's location names (frame 0 unless a
// Python frame further in is named), or "".
std::string FunctionOf(const ReportSite& site);

// "LOCATION (FUNCTION)" or "LOCATION".
std::string Describe(const ReportSite& site);

// A key naming a site the same way across runs and processes (site ids do
// not): its frames' functions and file:lines (module where there is no line),
// or its location when it has no frames.
std::string SiteKey(const ReportSite& site);

// Views of a site's frames for suppression and category matching; they point
// into `site`, which must outlive them.
std::vector<FrameView> FrameViewsOf(const ReportSite& site);

// A leaks section split into what counts as leaked, what is suppressed and
// what libraries keep on purpose, by the schema's rule (LeakSplitFigures). A
// site is suppressed when the report marks it so ("suppressed", from the
// library's GPUWATCH_SUPPRESSIONS) or when a `leak:` rule of `extra` (may be
// null) matches its frames; it is in a category when the report says so
// ("category") or its frames fall in a built-in one. Categorized sites count
// as leaked when `include_categories`. Sites the report omitted (beyond its
// 1,000-site limit) count as leaked bytes; leaked_count counts the listed
// sites only. The site pointers point into `section`.
struct LeakSplit {
  LeakSplitFigures figures;  // of the listed sites
  uint64_t leaked_bytes = 0;
  uint64_t leaked_count = 0;
  uint64_t suppressed_bytes = 0;
  uint64_t categorized_bytes = 0;
  uint64_t omitted_bytes = 0;
  std::vector<const LeakSite*> leaked;      // largest first
  std::vector<const LeakSite*> suppressed;  // with suppressed_by[i]
  std::vector<std::string> suppressed_by;
  std::vector<const LeakSite*> categorized;  // with category_of[i]
  std::vector<std::string> category_of;
};
LeakSplit SplitLeaks(const LeakList& section, const Suppressions* extra, bool include_categories);

// The category of a site: its "category" field (an empty one means none:
// gpuwatch turned the category off in that process), else the built-in one
// of its frames, else "".
std::string CategoryOfSite(const ReportSite& site);

// The rule that suppresses `site` for `kind`: its "suppressed" field, else
// the first matching rule of `extra` (may be null), else "".
std::string SuppressionOfSite(const ReportSite& site, SuppressionKind kind,
                              const Suppressions* extra);

// A growth suspect's window: "marks 1-16" or "3.0-12.0 s".
std::string GrowthWindow(const GrowthSite& suspect);

// Parses a byte count: digits with an optional fraction and an optional unit
// B, KiB, MiB, GiB or TiB (case-insensitive, an optional space before it),
// e.g. "0", "4096", "1.5GiB", "512 MiB". False when malformed or too large.
bool ParseBytes(std::string_view text, uint64_t* out);

// "1.5 MiB" (gpuwatch::FormatBytes) with a sign: "+1.5 MiB", "-512 B", "0 B".
std::string SignedBytes(int64_t delta);

// "+12.5%", "-3.0%", or "new" when `base` is 0 and `now` is not.
std::string PercentChange(uint64_t base, uint64_t now);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_READING_REPORT_READER_H_
