#include "libgpuwatch/report/checkpoint_text.h"

#include <nlohmann/json.hpp>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch {

namespace {

using nlohmann::json;

// As DumpReport prints a value on one line (not UTF-8: U+FFFD).
std::string OneLine(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

void CheckpointText::UseFor(uint64_t resolver) {
  if (resolver == resolver_) return;
  resolver_ = resolver;
  frames_.clear();
  trace_sites_.clear();
}

void CheckpointText::AddFrames(const std::vector<const Frame*>& table) {
  for (size_t i = frames_.size(); i < table.size(); ++i) {
    frames_.push_back(OneLine(FrameJson(ReportFrameOf(*table[i]))));
  }
}

void CheckpointText::AddTraceSites(const std::vector<ReportTraceSite>& sites) {
  for (const ReportTraceSite& s : sites) {
    if (s.site >= trace_sites_.size()) trace_sites_.resize(size_t{s.site} + 1);
    std::string& row = trace_sites_[s.site];
    if (row.empty()) {
      row = OneLine({{report_key::kSite, s.site}, {report_key::kLocation, s.location}});
    }
  }
}

void CheckpointText::AppendTraceSites(const std::vector<ReportTraceSite>& sites,
                                      std::string* out) const {
  *out += '[';
  for (size_t i = 0; i < sites.size(); ++i) {
    if (i != 0) *out += ',';
    *out += trace_sites_[sites[i].site];
  }
  *out += ']';
}

size_t CheckpointText::bytes() const {
  const auto text = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t n = (frames_.capacity() + trace_sites_.capacity()) * sizeof(std::string);
  for (const std::string& s : frames_) n += text(s);
  for (const std::string& s : trace_sites_) n += text(s);
  return n;
}

}  // namespace gpuwatch
