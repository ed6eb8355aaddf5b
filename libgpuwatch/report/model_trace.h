// The report's event trace as types (docs/report-format.md, "The event
// trace"): up to a million events, most of a large report's bytes, so an
// event is a 48-byte struct and not a JSON array (about 200 bytes as a
// parsed document, more for a copy). Its strings are each kept once: kernel
// names and phase paths in the tables the report gives (`names`, `phases`),
// the site an event names as an index into `sites`, and the event's own
// strings (a copy's direction and host memory kind, an OOM's memory kind, a
// mark's label) in `words` and `labels`.
//
// The library's writer fills it (trace_json.h), ReportModel::ToJson and
// ReportModel::Dump write it (Dump writes the events from the structs, never
// as a document), ReadReportModel reads it from a document, and the tools'
// reader reads its events straight from the report's text (TraceEventReader,
// one event at a time), so that no reader holds the events as JSON.
//
// Part of report_model.h, whose idioms (CountField, GPUWATCH_COUNTS) it
// uses: include that.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TRACE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TRACE_H_

#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_
#error "model_trace.h is part of report_model.h: include that"
#endif

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuwatch {

class ReportFieldReader;

// An event's type, its first element ("mem", "copy", ...).
enum class TraceEventType : uint8_t { kMem, kCopy, kKernel, kMark, kPeak, kOom, kPhase };
inline constexpr size_t kNumTraceEventTypes = 7;

// "mem", "copy", ...
const char* TraceEventTypeName(TraceEventType type);

// One event; which members it uses depends on its type (the elements after
// the type, in order):
//   mem:    time_ns, device, value (device bytes live on it), ref (the site
//           that allocated or freed; only when has_ref: older reports lack it)
//   copy:   time_ns, end_ns, device, stream, value (bytes), word[0]
//           (direction), word[1] (host memory kind), ref (site)
//   kernel: time_ns, end_ns, device, stream, ref (its name)
//   mark:   time_ns, value (the mark's ordinal), ref (its label)
//   peak:   time_ns, value (device bytes of all devices)
//   oom:    time_ns, device, value (bytes requested), word[0] (memory
//           kind), ref (site)
//   phase:  time_ns, end_ns, stream (the thread), ref (its path)
// ref is an index into `sites`, `names`, `labels` or `phases` by type, word
// an index into `words`. The members an event does not use are 0.
struct ReportTraceEvent {
  uint64_t time_ns = 0;  // a slice's start
  uint64_t end_ns = 0;
  uint64_t value = 0;
  uint64_t stream = 0;
  int32_t device = 0;
  uint32_t ref = 0;
  uint16_t word[2] = {0, 0};
  TraceEventType type = TraceEventType::kMem;
  bool has_ref = false;  // a mem event: ref names its site

  bool operator==(const ReportTraceEvent&) const = default;
};
static_assert(sizeof(ReportTraceEvent) == 48, "a million events are 48 MB");

// trace.devices[]: a device that held device memory.
// clang-format off
#define GPUWATCH_TRACE_DEVICE_COUNTS(X) X(live_bytes, kSum) X(peak_bytes, kMax)
// clang-format on
struct ReportTraceDevice {
  GPUWATCH_COUNTS(ReportTraceDevice, GPUWATCH_TRACE_DEVICE_COUNTS)
  int64_t device = 0;
  // Which physical GPU the ordinal is, when gpuwatch knew it before the
  // report (libgpuwatch/base/device_identity.h): "" and -1 when not (the
  // keys are then absent).
  std::string uuid;
  std::string pci_bus_id;
  int64_t gpu = -1;  // NVML's index on the node

  bool operator==(const ReportTraceDevice&) const = default;
};

// trace.sites[]: a site the events name (no stack: `leaks` and the other
// site lists have them).
struct ReportTraceSite {
  uint32_t site = 0;
  std::string location;

  bool operator==(const ReportTraceSite&) const = default;
};

// The trace section. Its counts are the ring's: `gpuwatch merge` does not
// carry traces (a timeline is one process's).
// clang-format off
#define GPUWATCH_TRACE_COUNTS(X) X(capacity, kMax) X(recorded, kSum) X(dropped, kSum)
// clang-format on
struct ReportTrace {
  GPUWATCH_COUNTS(ReportTrace, GPUWATCH_TRACE_COUNTS)
  std::vector<ReportTraceDevice> devices;
  std::vector<ReportTraceSite> sites;
  std::vector<std::string> names;        // demangled kernel names
  std::vector<std::string> phases;       // phase paths
  std::vector<ReportTraceEvent> events;  // oldest first
  // The events' own strings, each once, in order of first use.
  std::vector<std::string> words;   // directions, host memory kinds, memory kinds
  std::vector<std::string> labels;  // marks' labels

  // What an event's ref and words name.
  const ReportTraceSite& SiteOf(const ReportTraceEvent& e) const { return sites[e.ref]; }
  const std::string& NameOf(const ReportTraceEvent& e) const { return names[e.ref]; }
  const std::string& PhaseOf(const ReportTraceEvent& e) const { return phases[e.ref]; }
  const std::string& LabelOf(const ReportTraceEvent& e) const { return labels[e.ref]; }
  const std::string& WordOf(const ReportTraceEvent& e, int i) const { return words[e.word[i]]; }

  bool operator==(const ReportTrace&) const = default;
};

// Builds a trace's `words` and `labels`, each string once (the library's
// writer and the readers).
class TraceTexts {
 public:
  explicit TraceTexts(ReportTrace* trace) : trace_(trace) {}
  // The index of `text` in `words`; false when it would be the 65,537th.
  bool Word(std::string_view text, uint16_t* index);
  uint32_t Label(std::string_view text);

 private:
  ReportTrace* trace_;
  std::unordered_map<std::string, uint16_t> words_;
  std::unordered_map<std::string, uint32_t> labels_;
};

// Reads `trace.events`, one event at a time, into a trace's events: from a
// parsed array (ReadReportModel) or from a parser that hands over each event
// as it reads it (the tools' reader), so that the events are never a
// document all at once. An event of a type this build does not know is
// skipped (readers ignore what they do not know), as are elements past
// those of its type; a missing or mistyped element fails the read, naming
// it (`trace.events[12][3] is "x", expected a count (an integer)`). Sites
// and indices are checked by Resolve, once the tables are read: the section
// may list them after its events.
class TraceEventReader {
 public:
  TraceEventReader(ReportTrace* trace, ReportFieldReader* reader)
      : trace_(trace), reader_(reader), texts_(trace) {}
  // trace.events[i], i counting from 0 over the calls.
  void Read(const nlohmann::json& event);
  // Moves the events read, with their words and labels, into `trace`, whose
  // tables Resolve checks them against (the reader parses the events before
  // the model reads the tables).
  void MoveTo(ReportTrace* trace);
  // Every event's site becomes its row in `sites` (a site the table does
  // not list is a problem), and indices into `names` and `phases` are
  // checked against them.
  void Resolve();

 private:
  ReportTrace* trace_;
  ReportFieldReader* reader_;
  TraceTexts texts_;
  size_t index_ = 0;
  std::vector<size_t> skipped_;  // places of the events of unknown types
};

// The trace section as the report writes it, with its events or without
// (ReportModel::Dump writes them as text).
nlohmann::json ReportTraceJson(const ReportTrace& trace, bool with_events = true,
                               bool with_sites = true);

// Reads the trace section `trace` (an object), events included, into `out`;
// false on the first problem (the reader's).
bool ReadReportTrace(const nlohmann::json& trace, ReportTrace* out, ReportFieldReader* r);

// Writes events as JSON text, each string escaped once (not UTF-8: U+FFFD).
class TraceEventText {
 public:
  explicit TraceEventText(const ReportTrace& trace);
  // As the report prints one, on one line: `["mem",41873512,0,1048576]`.
  void Append(const ReportTraceEvent& e, std::string* out) const { Append(e, "[", ",", "]", out); }
  // With other punctuation around and between the elements (json::dump(2)'s
  // at some depth: "[\n    ", ",\n    ", "\n  ]").
  void Append(const ReportTraceEvent& e, std::string_view open, std::string_view separator,
              std::string_view close, std::string* out) const;

 private:
  const ReportTrace& trace_;
  std::vector<std::string> words_;  // as JSON text
  std::vector<std::string> labels_;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TRACE_H_
