#include "tools/reading/report_reader.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "libgpuwatch/base/read_file.h"
#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/report_schema.h"
#include "libgpuwatch/symbolize/symbolizer.h"
#include "tools/reading/report_parse.h"
#include "tools/reading/report_validate.h"

namespace gpuwatch::tools {

namespace {

// The largest report the tools read: GPUWATCH_REPORT_MAX_BYTES (a size such
// as 4GiB), else 1 GiB. A report of a million live allocations over ten
// thousand sites is tens of MiB.
uint64_t MaxReportBytes() {
  constexpr uint64_t kDefault = uint64_t{1} << 30;
  const char* text = std::getenv("GPUWATCH_REPORT_MAX_BYTES");  // NOLINT(concurrency-mt-unsafe)
  if (text == nullptr || *text == '\0') return kDefault;
  uint64_t bytes = 0;
  if (ParseBytes(text, &bytes) && bytes > 0) return bytes;
  std::fprintf(stderr,
               "gpuwatch: ignoring GPUWATCH_REPORT_MAX_BYTES='%s' (expected a size such as "
               "4GiB); using 1 GiB\n",
               text);
  return kDefault;
}

bool ReadWholeFile(const std::string& path, std::string* text, std::string* error) {
  const uint64_t limit = MaxReportBytes();
  std::string why;
  if (ReadRegularFile(path, limit, text, &why)) return true;
  *error = path + ": cannot read: " + why;
  if (why.find("over the limit") != std::string::npos) {
    *error += " (GPUWATCH_REPORT_MAX_BYTES raises it)";
  }
  return false;
}

}  // namespace

bool ReadReport(const std::string& path, Report* out, std::string* error, TraceSection trace) {
  std::string text;
  if (!ReadWholeFile(path, &text, error)) return false;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    *error = path + ": empty file (was the process killed before it wrote its report?)";
    return false;
  }
  if (const std::string deep = CheckNesting(text); !deep.empty()) {
    *error = path + ": not a gpuwatch report: " + deep;
    return false;
  }
  // Returning false for the top-level key "trace" drops it with its value as
  // it is parsed: the parser reads past it and keeps nothing. Kept, its
  // events go straight into their structs, one at a time (report_parse.h).
  json doc;
  TraceEventsParser trace_events;
  try {
    if (trace == TraceSection::kSkip) {
      doc = json::parse(text, [](int depth, json::parse_event_t event, const json& parsed) {
        return depth != 1 || event != json::parse_event_t::key || parsed != report_key::kTrace;
      });
    } else {
      trace_events.Parse(text, &doc);
    }
    std::string().swap(text);
  } catch (const json::out_of_range& e) {
    // A number beyond a double's range, e.g. 1e999 (out_of_range.406).
    std::string what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string::npos) what.erase(0, tag + 2);
    if (what.size() > 80) what = what.substr(0, 77) + "...";
    *error = path + ": not a gpuwatch report: a number is out of range (" + what + ")";
    return false;
  } catch (const json::parse_error& e) {
    // The parser read past the last byte: the text stops mid-document.
    const bool at_end =
        e.byte > text.size() || std::strstr(e.what(), "unexpected end of input") != nullptr;
    if (at_end) {
      *error = path + ": truncated: the JSON ends at byte " + std::to_string(text.size()) +
               " before the report is complete";
    } else {
      *error = path + ": not JSON (parse error at byte " + std::to_string(e.byte) + ")";
    }
    return false;
  }
  namespace key = report_key;
  if (!doc.is_object() || !doc.contains(key::kSchema)) {
    *error = path + ": not a gpuwatch report (no \"schema\": \"gpuwatch-report\")";
    return false;
  }
  if (doc[key::kSchema] != kReportSchemaName) {
    *error = path + ": not a gpuwatch report (its schema is " + doc[key::kSchema].dump() + ")";
    return false;
  }
  const json& version = doc.contains(key::kVersion) ? doc[key::kVersion] : json();
  if (!version.is_number_integer() || version.get<int64_t>() < 1) {
    *error = path + ": gpuwatch report without a valid \"version\"";
    return false;
  }
  if (version.get<int64_t>() > kReportSchemaVersion) {
    *error = path + ": report version " + version.dump() + " is newer than this gpuwatch reads (" +
             std::to_string(kReportSchemaVersion) + "); use a newer gpuwatch";
    return false;
  }
  const char* missing = nullptr;
  if (!doc.contains(key::kTotals) || !doc[key::kTotals].is_object()) {
    missing = "totals";
  } else if (!doc.contains(key::kLeaks) || !doc[key::kLeaks].is_object() ||
             !doc[key::kLeaks].contains(key::kDevice) ||
             !doc[key::kLeaks][key::kDevice].is_object()) {
    missing = "leaks.device";
  } else if (!doc.contains(key::kSites) || !doc[key::kSites].is_array()) {
    missing = "sites";
  }
  if (missing != nullptr) {
    *error = path + ": malformed gpuwatch report: no \"" + missing + "\" section";
    return false;
  }
  ReportModel model;
  std::string problem = ValidateReport(doc, &model);
  if (problem.empty() && model.trace.has_value() && !trace_events.MoveTo(&*model.trace)) {
    problem = trace_events.problem();
  }
  if (!problem.empty()) {
    *error = path + ": malformed gpuwatch report: " + problem;
    return false;
  }
  model.InlineFrameTable();
  out->model = std::move(model);
  out->path = path;
  return true;
}

json ReportDocument(const ReportModel& model) {
  json doc = json::object();
  model.ToJson(&doc, /*trace_events=*/false);
  if (!model.frame_table.empty()) return doc;
  // Every site has its frames, the ones with none too.
  doc.erase(report_key::kFrameTable);
  ForEachReportSite(&doc, [](json& site) {
    if (const auto stack = site.find(report_key::kStack); stack != site.end()) {
      site.erase(stack);
      site[report_key::kFrames] = json::array();
    }
  });
  return doc;
}

std::string CommandLine(const ReportProcess& process) {
  std::string command;
  for (const std::string& arg : process.command) {
    if (!command.empty()) command += ' ';
    command += arg;
  }
  return command;
}

std::string PhasePeakProcess(const PhasePath& path) {
  if (!path.peak_pid.has_value()) return "";
  if (!path.peak_rank.empty()) return "rank " + path.peak_rank;
  return "pid " + std::to_string(*path.peak_pid);
}

bool IsHostKind(std::string_view kind) {
  return kind == "pinned_host" || kind == "registered_host";
}

KindSums SumKinds(const ReportTotals& totals, bool host) {
  KindSums sums;
  for (const auto& [name, k] : totals.kinds) {
    // Imported memory (VMM handles, CUDA IPC) is another process's: neither
    // this process's device nor host memory.
    if (IsHostKind(name) != host || name == "vmm_imported" || name == "ipc_imported") continue;
    sums.allocs += k.allocs;
    sums.alloc_bytes += k.alloc_bytes;
    sums.frees += k.frees;
  }
  return sums;
}

std::string FunctionOf(const ReportSite& site) {
  if (site.frames.empty()) return "";
  // The frame the location names, which in a Python process need not be
  // frame 0 (docs/python.md); frame 0 otherwise.
  for (const ReportFrame& f : site.frames) {
    if (!f.file.empty() &&
        site.location == std::string(Basename(f.file)) + ":" + std::to_string(f.line)) {
      return f.function;
    }
  }
  return site.frames[0].function;
}

std::string Describe(const ReportSite& site) {
  const std::string function = FunctionOf(site);
  if (function.empty() || site.location.find(function) != std::string::npos) return site.location;
  return site.location + " (" + function + ")";
}

std::string SiteKey(const ReportSite& site) {
  if (site.frames.empty()) return "@" + site.location;
  std::string key;
  for (const ReportFrame& f : site.frames) {
    key += f.function;
    key += '@';
    if (!f.file.empty() && f.line != 0) {
      key += Basename(f.file);
      key += ':' + std::to_string(f.line);
    } else {
      key += Basename(f.module);
    }
    key += '|';
  }
  return key;
}

std::vector<FrameView> FrameViewsOf(const ReportSite& site) {
  std::vector<FrameView> views;
  for (const ReportFrame& f : site.frames) views.push_back({f.function, f.file, f.module});
  return views;
}

std::string CategoryOfSite(const ReportSite& site) {
  // gpuwatch's own answer, when the report gives one: an empty category is a
  // decision too (PyTorch's allocator in a per-tensor mode).
  if (site.category.has_value()) return *site.category;
  return std::string(CategoryOf(FrameViewsOf(site)));
}

std::string SuppressionOfSite(const ReportSite& site, SuppressionKind kind,
                              const Suppressions* extra) {
  std::string rule = site.suppressed.value_or("");
  if (rule.empty() && extra != nullptr) {
    if (const Suppression* s = extra->Match(kind, FrameViewsOf(site))) rule = s->Text();
  }
  return rule;
}

LeakSplit SplitLeaks(const LeakList& section, const Suppressions* extra, bool include_categories) {
  LeakSplit split;
  for (const LeakSite& site : section.sites) {
    std::string rule = SuppressionOfSite(site, SuppressionKind::kLeak, extra);
    std::string category = rule.empty() ? CategoryOfSite(site) : std::string();
    switch (
        split.figures.Add(site.bytes, site.count, !rule.empty(), category, include_categories)) {
      case LeakVerdict::kSuppressed:
        split.suppressed.push_back(&site);
        split.suppressed_by.push_back(std::move(rule));
        break;
      case LeakVerdict::kCategorized:
        split.categorized.push_back(&site);
        split.category_of.push_back(std::move(category));
        break;
      case LeakVerdict::kLeaked:
        split.leaked.push_back(&site);
        break;
    }
  }
  split.omitted_bytes = section.omitted_bytes;
  split.leaked_bytes = split.figures.leaked_bytes + split.omitted_bytes;
  split.leaked_count = split.figures.leaked_count;
  split.suppressed_bytes = split.figures.suppressed_bytes;
  split.categorized_bytes = split.figures.categorized_bytes;
  return split;
}

std::string CheckpointTaken(const Report& report) {
  char after[32];
  std::snprintf(after, sizeof(after), "%.1f s",
                static_cast<double>(report.model.process.elapsed_ns) / 1e9);
  std::string text = std::string("a checkpoint taken ") + after + " after attach";
  struct stat st {};
  struct tm utc {};
  char when[32];
  if (stat(report.path.c_str(), &st) == 0 && gmtime_r(&st.st_mtime, &utc) != nullptr &&
      std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc) != 0) {
    text += std::string(" (its file written ") + when + ")";
  }
  return text +
         ", not an exit report: the process had not exited then (killed with SIGKILL, or still "
         "running)";
}

std::string GrowthWindow(const GrowthSite& suspect) {
  char buf[64];
  if (suspect.unit == "mark") {
    std::snprintf(buf, sizeof(buf), "marks %.0f-%.0f", suspect.from, suspect.to);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f-%.1f s", suspect.from, suspect.to);
  }
  return buf;
}

bool ParseBytes(std::string_view text, uint64_t* out) {
  size_t i = 0;
  double value = 0;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    value = value * 10 + (text[i++] - '0');
    digits = true;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    double scale = 0.1;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value += (text[i++] - '0') * scale;
      scale /= 10;
      digits = true;
    }
  }
  if (!digits) return false;
  if (i < text.size() && text[i] == ' ') ++i;
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double multiplier = 1;
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else if (unit == "kib") {
    multiplier = 1024.0;
  } else if (unit == "mib") {
    multiplier = 1024.0 * 1024;
  } else if (unit == "gib") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (unit == "tib") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return false;
  }
  const double bytes = std::round(value * multiplier);
  if (bytes >= 1.8e19) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

std::string SignedBytes(int64_t delta) {
  if (delta == 0) return "0 B";
  const uint64_t magnitude =
      delta < 0 ? static_cast<uint64_t>(-(delta + 1)) + 1 : static_cast<uint64_t>(delta);
  return (delta < 0 ? "-" : "+") + FormatBytes(magnitude);
}

std::string PercentChange(uint64_t base, uint64_t now) {
  if (base == 0) return now == 0 ? "0.0%" : "new";
  char buf[32];
  const double pct =
      (static_cast<double>(now) - static_cast<double>(base)) * 100.0 / static_cast<double>(base);
  std::snprintf(buf, sizeof(buf), "%+.1f%%", pct);
  return buf;
}

}  // namespace gpuwatch::tools
