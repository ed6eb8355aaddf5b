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
  const json* list = r->ArrayAt(obj, path, key);
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size() && !r->failed(); ++i) {
    const json& element = (*list)[i];
    const std::string at = ReportFieldReader::Element(ReportFieldReader::Join(path, key), i);
    if (!element.is_object()) {
      r->Expected(at, element, "an object");
      return;
    }
    each(element, at);
  }
}

// The site lists of the sections ReportModel does not type: what every site
// has, and the counts they carry.
void UntypedSites(ReportFieldReader* r, const json& section, const char* section_key) {
  ObjectList(
      r, section, section_key, report_key::kSites, [r](const json& site, const std::string& at) {
        ReportSite common;
        r->Site(site, at, &common);
        for (const char* key : {"count", "bytes", "timed_count", "duration_ns", "max_bytes"}) {
          r->CountAt(site, at, key);
        }
      });
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
  if (const json* transfers = r.ObjectAt(doc, "", report_key::kTransfers)) {
    ObjectList(&r, *transfers, report_key::kTransfers, "totals",
               [&r](const json& t, const std::string& path) {
                 r.TextAt(t, path, "direction");
                 r.TextAt(t, path, "host");
                 for (const char* key : {"count", "bytes", "timed_count", "duration_ns"}) {
                   r.CountAt(t, path, key);
                 }
               });
    UntypedSites(&r, *transfers, report_key::kTransfers);
    ObjectList(&r, *transfers, report_key::kTransfers, "findings",
               [&r](const json& f, const std::string& path) {
                 for (const char* key : {"type", "message", "advice", "location"}) {
                   r.TextAt(f, path, key);
                 }
               });
  }
  if (const json* timeline = r.ObjectAt(doc, "", report_key::kTimeline)) {
    UntypedSites(&r, *timeline, report_key::kTimeline);
  }
  if (r.failed()) return r.problem();
  if (model != nullptr) *model = std::move(read);
  return "";
}

}  // namespace gpuwatch::tools
