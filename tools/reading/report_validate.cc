#include "tools/reading/report_validate.h"

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

}  // namespace

std::string ValidateReport(const json& doc, ReportModel* model) {
  ReportFieldReader r;
  CheckStrings(&r, doc, "");
  if (r.failed()) return r.problem();
  ReportModel read;
  std::string problem;
  if (!ReadReportModel(doc, &read, &problem)) return problem;
  if (model != nullptr) *model = std::move(read);
  return "";
}

}  // namespace gpuwatch::tools
