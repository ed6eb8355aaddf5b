// The report schema in one place (docs/report-format.md): its name and
// version, the key names every writer and reader shares, and the pieces both
// sides need, so that the library's writer, `gpuwatch merge`, the tools'
// reader and their validator cannot drift apart (report_model.h has the
// report's typed sections and their one JSON reader and writer):
//   - the frame table: written from a report's distinct frames, inlined back
//     into each site's `frames` by readers;
//   - the split of a leaks section into leaked, suppressed and categorized;
//   - the text form of a report (DumpReport).
// Pure C++ and JSON: no CUDA header, nothing of the running process, so the
// tools link it (through gpuwatch_core) as the library does.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SCHEMA_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SCHEMA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json_fwd.hpp"

namespace gpuwatch {

struct Frame;

// `schema` of every report.
inline constexpr std::string_view kReportSchemaName = "gpuwatch-report";
// The version every writer writes and the newest every reader reads.
// 2: sites refer to a frame table (`stack`) instead of listing `frames`.
inline constexpr int kReportSchemaVersion = 2;

// Key names shared by writers and readers.
namespace report_key {
// Top level.
inline constexpr char kSchema[] = "schema";
inline constexpr char kVersion[] = "version";
inline constexpr char kTrigger[] = "trigger";
inline constexpr char kLabel[] = "label";
inline constexpr char kGpuwatch[] = "gpuwatch";
inline constexpr char kProcess[] = "process";
inline constexpr char kProcesses[] = "processes";     // merge only
inline constexpr char kMergedFrom[] = "merged_from";  // merge only
inline constexpr char kTotals[] = "totals";
inline constexpr char kStackDepth[] = "stack_depth";
inline constexpr char kLeaks[] = "leaks";
inline constexpr char kPeak[] = "peak";
inline constexpr char kSites[] = "sites";
inline constexpr char kGrowth[] = "growth";
inline constexpr char kTimeline[] = "timeline";
inline constexpr char kTransfers[] = "transfers";
inline constexpr char kKernels[] = "kernels";
inline constexpr char kLifecycle[] = "lifecycle";
inline constexpr char kPhases[] = "phases";
inline constexpr char kRegions[] = "regions";
inline constexpr char kTorchBlocks[] = "torch_blocks";
inline constexpr char kSegments[] = "segments";  // regions.segments
inline constexpr char kHeaps[] = "heaps";        // regions.heaps
inline constexpr char kTrace[] = "trace";
inline constexpr char kEvents[] = "events";  // trace.events
inline constexpr char kOom[] = "oom";
inline constexpr char kCudaErrors[] = "cuda_errors";
inline constexpr char kLiveWhenFailed[] = "live_when_failed";  // leaks', with cuda_errors
inline constexpr char kFrameTable[] = "frame_table";
// leaks.device, leaks.host and leaks.ipc_imported.
inline constexpr char kDevice[] = "device";
inline constexpr char kHost[] = "host";
inline constexpr char kIpcImported[] = "ipc_imported";
// A site list's other name (growth.suspects).
inline constexpr char kSuspects[] = "suspects";
// A leaks section's figures.
inline constexpr char kBytes[] = "bytes";
inline constexpr char kCount[] = "count";
inline constexpr char kOmittedSites[] = "omitted_sites";
inline constexpr char kOmittedBytes[] = "omitted_bytes";
inline constexpr char kLeakedBytes[] = "leaked_bytes";
inline constexpr char kLeakedCount[] = "leaked_count";
inline constexpr char kSuppressedBytes[] = "suppressed_bytes";
inline constexpr char kCategorizedBytes[] = "categorized_bytes";
inline constexpr char kCategories[] = "categories";
// A site's.
inline constexpr char kSite[] = "site";
inline constexpr char kLocation[] = "location";
inline constexpr char kStack[] = "stack";    // version 2: indices into frame_table
inline constexpr char kFrames[] = "frames";  // version 1, and after InlineFrameTable
inline constexpr char kCategory[] = "category";
inline constexpr char kSuppressed[] = "suppressed";
inline constexpr char kSizes[] = "sizes";  // sites[]: allocations by size bucket
// A frame's.
inline constexpr char kFunction[] = "function";
inline constexpr char kFile[] = "file";
inline constexpr char kLine[] = "line";
inline constexpr char kModule[] = "module";
inline constexpr char kInlined[] = "inlined";
}  // namespace report_key

// The order of the phases section's paths: by text, '/' before any other
// character, so that each path comes right after the one it is nested in
// ("a", "a/b", "a b").
bool PhasePathBefore(std::string_view a, std::string_view b);

// Calls `fn` on every site object of a report that may carry a stack: the
// site lists of leaks.*, peak, sites, growth (suspects), transfers and
// timeline, regions (sites, segments, heaps), the oom request, and
// cuda_errors (calls, sticky errors and the kernels before them). Entries that are not objects are
// skipped.
void ForEachReportSite(nlohmann::json* doc, const std::function<void(nlohmann::json&)>& fn);

// The report's `frame_table` from the frames a SiteResolver indexed.
nlohmann::json FrameTableJson(const std::vector<const Frame*>& table);

// Version 2 lists each distinct frame once, in `frame_table`, and a site
// names its frames by index (`stack`). Gives every site its `frames` back, as
// version 1 wrote them, and drops the table, so that readers see one shape.
// Call it on a document the tools' validator accepted (an index past the
// table is skipped).
void InlineFrameTable(nlohmann::json* doc);

// The split of a leaks section (leaks.device or leaks.host) into what counts
// as leaked, what a suppression rule covers and what libraries keep on
// purpose (built-in categories), site by site. A site both suppressed and in
// a category counts as suppressed. Sites a section omits (beyond its site
// limit) are not added; they count as leaked (LeakedBytesOf, WriteTo).
enum class LeakVerdict { kLeaked, kSuppressed, kCategorized };

struct LeakSplitFigures {
  uint64_t leaked_bytes = 0;  // of the sites added
  uint64_t leaked_count = 0;
  uint64_t suppressed_bytes = 0;
  uint64_t suppressed_count = 0;
  uint64_t categorized_bytes = 0;
  uint64_t categorized_count = 0;
  std::map<std::string, uint64_t, std::less<>> categories;  // bytes per category

  // Adds one site. `category` empty: none. With `categories_leak`, a
  // categorized site counts as leaked (`gpuwatch check --include-categories`).
  LeakVerdict Add(uint64_t bytes, uint64_t count, bool suppressed, std::string_view category,
                  bool categories_leak = false);

  // What counts as leaked in a section of `section_bytes` in all.
  uint64_t LeakedBytesOf(uint64_t section_bytes) const {
    return section_bytes - suppressed_bytes - categorized_bytes;
  }

  // Writes leaked_bytes, leaked_count, suppressed_bytes, categorized_bytes
  // and categories into `section`, whose `bytes` and `count` hold the
  // section's totals.
  void WriteTo(nlohmann::json* section) const;
};

// A report as text, indented like json::dump(2) and ending with a newline,
// except where that would print one line per number or per field: a site's
// `stack` is on one line, and the frame table and then the trace section
// come last, one frame and one event per line. Pretty-printed, those would
// be most of a report's bytes and lines. Bytes that are not UTF-8 are
// written as U+FFFD.
//
// `trace_events`, when given, are the trace's events in place of the
// document's (ReportModel::Dump: a million events are not made a document
// to be printed): how many, and what appends event i's line.
// `frame`, when set, writes the frame table's `frames` rows in place of the
// document's, and `trace_sites` the trace's "sites" value (the document's
// trace has none): a checkpoint's kept text (checkpoint_text.h).
struct TraceEventLines {
  size_t count = 0;
  std::function<void(size_t, std::string*)> append;
  size_t frames = 0;
  std::function<void(size_t, std::string*)> frame;
  std::function<void(std::string*)> trace_sites;
  // Called on the head's text before anything is written (a checkpoint's
  // kept site rows put in); false: DumpReport returns "" and writes nothing.
  std::function<bool(std::string*)> head;
  // When set, called before event i's text with `at`, that text's offset in
  // the report (the head's first byte is 0), and once after the last event
  // (i == count, `at` where its text ends): appends the text of events i to
  // i+n-1 as the list prints them (kTraceEventSeparator between them) and
  // returns n, or returns 0 for `append` to write event i. A checkpoint's
  // lines of events its last one wrote (checkpoint_trace.h).
  std::function<size_t(size_t i, uint64_t at, std::string* out)> reuse;
};
// What DumpReport writes between two events of the trace.
inline constexpr std::string_view kTraceEventSeparator = ",\n      ";
// `flush`, when given, streams the frame table and the trace as they are
// made: whenever the text not yet handed over passes `chunk` bytes at the
// end of a frame or an event, `take` is given it to write (the head first,
// whole; it may change it first, as the exit report's teardown slot does),
// and it is emptied. DumpReport returns the rest. The same bytes, in pieces.
struct TextFlush {
  size_t chunk = 0;
  std::function<void(std::string*)> take;
};
// A site's `stack` on one line in `text` (json::dump(2)'s), as DumpReport
// prints it.
std::string OneLineStacks(const std::string& text);

std::string DumpReport(nlohmann::json report, const TraceEventLines* trace_events = nullptr,
                       const TextFlush* flush = nullptr);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SCHEMA_H_
