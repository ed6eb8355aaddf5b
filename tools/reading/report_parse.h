// Parsing a report's text with its event trace read straight into the typed
// trace (TraceSection::kKeep): the trace's events, a million at most and
// most of a large report's bytes, are read one at a time into their structs
// (model_trace.h) as the parser meets them, never held as a document.
// Everything else is parsed into the document as json::parse would.
#ifndef GPUWATCH_TOOLS_READING_REPORT_PARSE_H_
#define GPUWATCH_TOOLS_READING_REPORT_PARSE_H_

#include <string>

#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

class TraceEventsParser {
 public:
  TraceEventsParser() = default;
  TraceEventsParser(const TraceEventsParser&) = delete;
  TraceEventsParser& operator=(const TraceEventsParser&) = delete;

  // Parses `text` into `doc`, throwing as json::parse does; the top-level
  // trace's "events" is left an empty array, its events read apart.
  void Parse(const std::string& text, nlohmann::json* doc);

  // Moves the events read into `trace` (the model's, its tables read from
  // the document) and checks what they refer to. False on the first problem
  // of an event, `problem()`.
  bool MoveTo(ReportTrace* trace);
  const std::string& problem() const { return reader_.problem(); }

 private:
  ReportTrace events_;  // its events, words and labels
  ReportFieldReader reader_;
  TraceEventReader event_reader_{&events_, &reader_};
};

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_READING_REPORT_PARSE_H_
