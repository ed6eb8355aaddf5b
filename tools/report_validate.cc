#include "tools/report_validate.h"

#include <string>
#include <string_view>
#include <utility>

#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch::tools {

using nlohmann::json;

std::string CheckNesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxReportDepth) {
        return "nested deeper than " + std::to_string(kMaxReportDepth) + " levels (at byte " +
               std::to_string(i) + ")";
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

namespace {

// Every string (keys too) of the document within kMaxReportString. The
// document is at most kMaxReportDepth deep (CheckNesting), so recursion is
// bounded.
void CheckStrings(ReportFieldReader* r, const json& v, const std::string& path) {
  if (r->failed()) return;
  if (v.is_string()) {
    const size_t n = v.get_ref<const std::string&>().size();
    if (n > kMaxReportString) {
      r->Fail(path, "is a string of " + std::to_string(n) + " bytes (at most " +
                        std::to_string(kMaxReportString) + ")");
    }
  } else if (v.is_object()) {
    for (const auto& [key, member] : v.items()) {
      if (key.size() > kMaxReportString) {
        r->Fail(path, "has a key of " + std::to_string(key.size()) + " bytes");
        return;
      }
      CheckStrings(r, member, ReportFieldReader::Join(path, key.c_str()));
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size() && !r->failed(); ++i) {
      CheckStrings(r, v[i], ReportFieldReader::Element(path, i));
    }
  }
}

// Every element of the array `key` is an object, which `each(element, its
// path)` checks; the first that is not fails the report.
template <typename Each>
void ObjectList(ReportFieldReader* r, const json& obj, const std::string& path, const char* key,
                const Each& each) {
  r->Objects(obj, path, key, each);
}

// The phases section (docs/report-format.md): each path's text, depth and
// counts, its copies by direction and its peak site; the section's counters.
void ValidatePhases(ReportFieldReader* r, const json& phases) {
  const std::string section = report_key::kPhases;
  ObjectList(r, phases, section, "paths", [r](const json& e, const std::string& at) {
    if (r->TextAt(e, at, "path").empty() && !r->failed()) r->Fail(at + ".path", "is empty");
    for (const char* key : {"depth", "opens", "allocs", "alloc_bytes", "host_allocs",
                            "host_alloc_bytes", "live_bytes", "live_count", "host_live_bytes",
                            "host_live_count", "peak_bytes", "launches"}) {
      r->CountAt(e, at, key);
    }
    // Merged reports: how many processes had the path, and whose peak it is.
    r->CountAt(e, at, "processes");
    r->CountAt(e, at, "peak_pid");
    r->OptionalTextAt(e, at, "peak_rank");
    if (const json* copies = r->ObjectAt(e, at, "copies")) {
      for (const auto& [direction, c] : copies->items()) {
        const std::string path = ReportFieldReader::Join(at + ".copies", direction.c_str());
        if (!c.is_object()) {
          r->Expected(path, c, "an object");
          return;
        }
        r->CountAt(c, path, "count");
        r->CountAt(c, path, "bytes");
      }
    }
    if (const json* site = r->ObjectAt(e, at, "peak_site")) {
      r->CountAt(*site, at + ".peak_site", "site");
      r->TextAt(*site, at + ".peak_site", "location");
    }
    if (const json* site = r->ObjectAt(e, at, "peak_top_site")) {
      for (const char* key : {"site", "bytes"}) r->CountAt(*site, at + ".peak_top_site", key);
      r->TextAt(*site, at + ".peak_top_site", "location");
    }
  });
  for (const char* key :
       {"names_dropped", "paths_dropped", "too_deep", "unbalanced_pops", "open_at_thread_exit",
        "ranges_not_tracked", "unmatched_ends", "peak_sites_untracked"}) {
    r->CountAt(phases, section, key);
  }
}

// The regions section (docs/report-format.md): its totals, the sites that
// registered live regions, the allocations and heaps that hold them, and the
// counters.
void ValidateRegions(ReportFieldReader* r, const json& regions) {
  const std::string section = report_key::kRegions;
  for (const char* key : {"live_count", "live_bytes", "outside_count", "outside_bytes",
                          "omitted_sites", "omitted_bytes"}) {
    r->CountAt(regions, section, key);
  }
  ObjectList(r, regions, section, report_key::kSites, [r](const json& e, const std::string& at) {
    ReportSite common;
    r->Site(e, at, &common);
    for (const char* key : {"count", "bytes", "oldest_ns", "outside_count", "outside_bytes"}) {
      r->CountAt(e, at, key);
    }
    r->OptionalTextAt(e, at, "phase");
    r->OptionalTextAt(e, at, "caller");
    if (const json* segment = r->ObjectAt(e, at, "segment")) {
      r->CountAt(*segment, at + ".segment", "site");
      r->TextAt(*segment, at + ".segment", "location");
    }
  });
  for (const char* list : {report_key::kSegments, report_key::kHeaps}) {
    ObjectList(r, regions, section, list, [r, list](const json& e, const std::string& at) {
      ReportSite common;
      r->Site(e, at, &common);
      r->TextAt(e, at, "address");
      for (const char* key : {"size", "region_count", "region_bytes"}) r->CountAt(e, at, key);
      if (std::string_view(list) == report_key::kSegments) r->TextAt(e, at, "kind");
    });
  }
  if (const json* counters = r->ObjectAt(regions, section, "counters")) {
    for (const char* key :
         {"registered", "unregistered", "resized", "released_by_reset", "replaced",
          "unknown_unregisters", "unknown_resizes", "unknown_heaps", "dropped", "heaps_registered",
          "heaps_unregistered", "heaps_reset", "heaps_dropped"}) {
      r->CountAt(*counters, section + ".counters", key);
    }
  }
}

}  // namespace

std::string ValidateReport(const json& doc, ReportModel* model) {
  ReportFieldReader r;
  CheckStrings(&r, doc, "");
  if (r.failed()) return r.problem();
  ReportModel read;
  std::string problem;
  if (!ReadReportModel(doc, &read, &problem)) return problem;
  if (const json* table = ReportFieldReader::Member(doc, report_key::kFrameTable);
      table != nullptr && table->is_array()) {
    r.frame_table_size = table->size();
  }
  if (const json* phases = r.ObjectAt(doc, "", report_key::kPhases)) ValidatePhases(&r, *phases);
  if (const json* regions = r.ObjectAt(doc, "", report_key::kRegions)) {
    ValidateRegions(&r, *regions);
  }
  if (r.failed()) return r.problem();
  if (model != nullptr) *model = std::move(read);
  return "";
}

}  // namespace gpuwatch::tools
