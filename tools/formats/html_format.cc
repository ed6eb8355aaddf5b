#include "tools/formats/html_format.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "libgpuwatch/report/report_schema.h"
#include "tools/report_html.h"  // generated from tools/html/report.html

namespace gpuwatch::tools {

namespace {

// What the template holds in place of the report (the page parses it as JSON
// when opened as is, which helps when working on the template).
constexpr std::string_view kPlaceholder = R"({"gpuwatch_report_placeholder":true})";

// The sections the page shows. The others (allocation sites, kernels, the
// trace) can be large and would only make the file bigger: the page takes
// what it needs of them (the memory events, each listed site's allocation
// sizes) in a compact form of its own.
namespace key = report_key;
constexpr const char* kSections[] = {
    key::kSchema,  key::kVersion,   key::kTrigger,     key::kLabel,     key::kGpuwatch,
    key::kProcess, key::kProcesses, key::kTotals,      key::kLeaks,     key::kPeak,
    key::kGrowth,  key::kTimeline,  key::kTransfers,   key::kOom,       key::kMergedFrom,
    key::kPhases,  key::kRegions,   key::kTorchBlocks, key::kCudaErrors};

// The process's findings in the words of the text report and the summary
// ([[type, text]]); null when none.
json Findings(const ReportModel& model) {
  if (!model.lifecycle.has_value() || model.lifecycle->findings.empty()) return nullptr;
  json out = json::array();
  for (const LifecycleFinding& f : model.lifecycle->findings) {
    if (std::string text = FindingText(f); !text.empty()) {
      out.push_back(json::array({f.type, std::move(text)}));
    }
  }
  return out;
}

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

// The trace's memory events, for the chart's exact steps: {"recorded",
// "dropped", "sites": [[site id, location]], "events": [time, device, bytes
// live on it, row of sites or -1, ...] flat}; null when the trace has none.
json MemorySteps(const ReportTrace& trace) {
  json events = json::array();
  for (const ReportTraceEvent& e : trace.events) {
    if (e.type != TraceEventType::kMem) continue;
    events.push_back(e.time_ns);
    events.push_back(e.device);
    events.push_back(e.value);
    events.push_back(e.has_ref ? static_cast<int64_t>(e.ref) : -1);
  }
  if (events.empty()) return nullptr;
  json sites = json::array();
  for (const ReportTraceSite& site : trace.sites) sites.push_back({site.site, site.location});
  json out = {{key::kSites, std::move(sites)}, {key::kEvents, std::move(events)}};
  out["recorded"] = trace.recorded;  // not a report key: the page's, as trace.recorded
  out["dropped"] = trace.dropped;    // not a report key: the page's, as trace.dropped
  return out;
}

// Each distinct frame once: the sites' `frames` become `stack`, indices into
// the returned table (as in the report file), so that 1,000 sites through one
// helper do not repeat its frames 1,000 times in the page.
json ShareFrames(json* data) {
  json table = json::array();
  std::unordered_map<std::string, size_t> index;
  ForEachReportSite(data, [&](json& site) {
    const auto frames = site.find(report_key::kFrames);
    if (frames == site.end() || !frames->is_array()) return;
    json stack = json::array();
    for (const json& f : *frames) {
      const auto [it, added] = index.try_emplace(f.dump(), table.size());
      if (added) table.push_back(f);
      stack.push_back(it->second);
    }
    site.erase(frames);
    site[report_key::kStack] = std::move(stack);
  });
  return table;
}

// What the page shows of each listed site's allocations: {site id: [allocs,
// bytes, largest, sizes...]} for the sites the page's lists name.
json SiteAllocations(const ReportModel& model, json* data) {
  std::unordered_map<uint64_t, const AllocSite*> by_id;
  for (const AllocSite& s : model.sites) by_id.emplace(s.site, &s);
  json out = json::object();
  ForEachReportSite(data, [&](json& site) {
    const auto id = site.find(report_key::kSite);
    if (id == site.end() || !id->is_number_unsigned()) return;
    const auto it = by_id.find(id->get<uint64_t>());
    if (it == by_id.end() || it->second->sizes.empty()) return;
    const AllocSite& a = *it->second;
    json row = json::array({a.allocs, a.alloc_bytes, a.largest});
    for (const uint64_t n : a.sizes) row.push_back(n);
    out[std::to_string(a.site)] = std::move(row);
  });
  return out;
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
  // Not report keys: the page's own.
  data[key::kFrameTable] = ShareFrames(&data);
  data["site_allocations"] = SiteAllocations(report.model, &data);
  if (json findings = Findings(report.model); !findings.is_null()) {
    data["page_findings"] = std::move(findings);
  }
  if (trace != nullptr) {
    if (json spans = PhaseSpans(*trace); !spans.is_null()) data["phase_spans"] = std::move(spans);
    if (json steps = MemorySteps(*trace); !steps.is_null()) data["memory_steps"] = std::move(steps);
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
