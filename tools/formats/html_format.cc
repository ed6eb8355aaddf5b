#include "tools/formats/html_format.h"

#include <cstddef>
#include <string_view>
#include <utility>

#include "tools/report_html.h"  // generated from tools/html/report.html

namespace gpuwatch::tools {

namespace {

// What the template holds in place of the report (the page parses it as JSON
// when opened as is, which helps when working on the template).
constexpr std::string_view kPlaceholder = R"({"gpuwatch_report_placeholder":true})";

// The sections the page shows. The others (allocation sites, kernels, the
// trace) can be large and would only make the file bigger.
namespace key = report_key;
constexpr const char* kSections[] = {
    key::kSchema,  key::kVersion,   key::kTrigger,     key::kLabel,     key::kGpuwatch,
    key::kProcess, key::kProcesses, key::kTotals,      key::kLeaks,     key::kPeak,
    key::kGrowth,  key::kTimeline,  key::kTransfers,   key::kOom,       key::kMergedFrom,
    key::kPhases,  key::kRegions,   key::kTorchBlocks, key::kCudaErrors};

// Ranges drawn under the chart at most: the newest.
constexpr size_t kMaxPhaseSpans = 5000;

// The trace's phase events alone ({"paths", "spans": [[start, end, thread,
// index into paths]]}), for the bands under the chart; null when none.
json PhaseSpans(const ReportTrace& trace) {
  json spans = json::array();
  size_t phase_events = 0;
  for (const ReportTraceEvent& e : trace.events) phase_events += e.type == TraceEventType::kPhase;
  size_t skip = phase_events > kMaxPhaseSpans ? phase_events - kMaxPhaseSpans : 0;
  for (const ReportTraceEvent& e : trace.events) {
    if (e.type != TraceEventType::kPhase) continue;
    if (skip != 0) {  // the oldest
      --skip;
      continue;
    }
    spans.push_back(json::array({e.time_ns, e.end_ns, e.stream, e.ref}));
  }
  if (spans.empty()) return nullptr;
  return {{"paths", trace.phases}, {"spans", std::move(spans)}};  // not a report key: the page's
}

}  // namespace

std::string ScriptSafeJson(const json& doc) {
  // Invalid UTF-8 in a string becomes U+FFFD rather than an exception.
  const std::string text = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  // These characters only occur inside JSON strings, where \uXXXX means the
  // same character to JSON.parse.
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string HtmlReport(const Report& report) {
  const json doc = ReportDocument(report.model);
  const ReportTrace* trace = report.model.trace ? &*report.model.trace : nullptr;
  json data = json::object();
  for (const char* key : kSections) {
    const auto it = doc.find(key);
    if (it != doc.end()) data[key] = *it;
  }
  if (trace != nullptr) {
    if (json spans = PhaseSpans(*trace); !spans.is_null()) data["phase_spans"] = std::move(spans);
  }
  const std::string_view page(kReportHtmlTemplate);
  const size_t at = page.find(kPlaceholder);
  std::string out;
  if (at == std::string_view::npos) return out;  // cannot happen: tested
  out.reserve(page.size() + 4096);
  out.append(page.substr(0, at));
  out += ScriptSafeJson(data);
  out.append(page.substr(at + kPlaceholder.size()));
  return out;
}

}  // namespace gpuwatch::tools
