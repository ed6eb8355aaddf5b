#include "libgpuwatch/report/checkpoint_text.h"

#include <string_view>
#include <utility>

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

// What DumpReport prints of a discarded value, a list's marker.
constexpr std::string_view kMarker = "<discarded>";

// Where each list's rows start: leaks.*.sites[], peak.sites[], sites[].
constexpr std::string_view kLeakIndent = "        ";
constexpr std::string_view kPeakIndent = "      ";
constexpr std::string_view kSitesIndent = "    ";

// A row as DumpReport prints it inside its list: json::dump(2) with the
// stack on one line, every line after the first indented to the list's depth.
std::string RowText(const json& row, std::string_view indent) {
  const std::string text = OneLineStacks(row.dump(2, ' ', false, json::error_handler_t::replace));
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (const char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out;
}

template <typename T>
void Take(std::vector<T>* list, std::string_view indent, std::vector<T>* now,
          std::unordered_map<uint64_t, std::pair<T, std::string>>* kept) {
  *now = std::move(*list);
  list->clear();
  std::unordered_map<uint64_t, std::pair<T, std::string>> next;
  next.reserve(now->size());
  for (const T& row : *now) {
    auto it = kept->find(row.site);
    if (it != kept->end() && it->second.first == row) {
      next.emplace(row.site, std::move(it->second));
    } else {
      next.try_emplace(row.site, row, RowText(SiteRowJson(row), indent));
    }
  }
  *kept = std::move(next);
}

// Appends the rows of `now` in place of the marker found at or after `*at`
// in `head`, copying what lies before it; false when the marker is not
// there on a line of its own at `indent`.
template <typename T>
bool Splice(const std::string& head, const std::vector<T>& now,
            const std::unordered_map<uint64_t, std::pair<T, std::string>>& kept,
            std::string_view indent, size_t* at, std::string* out) {
  if (now.empty()) return true;
  const size_t marker = head.find(kMarker, *at);
  if (marker == std::string::npos || marker < indent.size() + 1 ||
      head.compare(marker - indent.size() - 1, indent.size() + 1, "\n" + std::string(indent)) !=
          0 ||
      head.compare(marker + kMarker.size(), 1, "\n") != 0) {
    return false;
  }
  out->append(head, *at, marker - *at);
  for (size_t i = 0; i < now.size(); ++i) {
    if (i != 0) {
      *out += ",\n";
      *out += indent;
    }
    const auto it = kept.find(now[i].site);
    if (it == kept.end() || !(it->second.first == now[i])) return false;  // a site listed twice
    *out += it->second.second;
  }
  *at = marker + kMarker.size();
  return true;
}

}  // namespace

void CheckpointText::UseFor(uint64_t resolver) {
  if (resolver == resolver_) return;
  resolver_ = resolver;
  frames_.clear();
  trace_sites_.clear();
  for (Rows<LeakSite>& r : leaks_) r.kept.clear();
  peak_.kept.clear();
  sites_.kept.clear();
}

void CheckpointText::TakeRows(ReportModel* m) {
  LeakList* leaks[3] = {&m->leaks_device, &m->leaks_host, &m->leaks_ipc_imported};
  for (int i = 0; i < 3; ++i) Take(&leaks[i]->sites, kLeakIndent, &leaks_[i].now, &leaks_[i].kept);
  Take(&m->peak.sites, kPeakIndent, &peak_.now, &peak_.kept);
  Take(&m->sites, kSitesIndent, &sites_.now, &sites_.kept);
  rows_taken_ = true;
}

void CheckpointText::MarkRows(json* doc) const {
  const json marker = json::array({json(json::value_t::discarded)});
  const char* which[3] = {report_key::kDevice, report_key::kHost, report_key::kIpcImported};
  json& leaks = (*doc)[report_key::kLeaks];
  for (int i = 0; i < 3; ++i) {
    if (!leaks_[i].now.empty()) leaks[which[i]][report_key::kSites] = marker;
  }
  if (!peak_.now.empty()) (*doc)[report_key::kPeak][report_key::kSites] = marker;
  if (!sites_.now.empty()) (*doc)[report_key::kSites] = marker;
}

bool CheckpointText::SpliceRows(std::string* head) const {
  // The markers in the document's key order: leaks (device, host,
  // ipc_imported), peak, sites.
  std::string out;
  size_t at = 0;
  for (const Rows<LeakSite>& r : leaks_) {
    if (!Splice(*head, r.now, r.kept, kLeakIndent, &at, &out)) return false;
  }
  if (!Splice(*head, peak_.now, peak_.kept, kPeakIndent, &at, &out) ||
      !Splice(*head, sites_.now, sites_.kept, kSitesIndent, &at, &out) ||
      head->find(kMarker, at) != std::string::npos) {
    return false;
  }
  out.append(*head, at, std::string::npos);
  head->swap(out);
  return true;
}

void CheckpointText::GiveRowsBack(ReportModel* m) {
  LeakList* leaks[3] = {&m->leaks_device, &m->leaks_host, &m->leaks_ipc_imported};
  for (int i = 0; i < 3; ++i) leaks[i]->sites = leaks_[i].now;
  m->peak.sites = peak_.now;
  m->sites = sites_.now;
  rows_taken_ = false;
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

void CheckpointText::ReleaseRows() {
  for (Rows<LeakSite>& r : leaks_) std::vector<LeakSite>().swap(r.now);
  std::vector<PeakSite>().swap(peak_.now);
  std::vector<AllocSite>().swap(sites_.now);
  rows_taken_ = false;
}

size_t CheckpointText::bytes() const {
  const auto text = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t n = (frames_.capacity() + trace_sites_.capacity()) * sizeof(std::string);
  for (const std::string& s : frames_) n += text(s);
  for (const std::string& s : trace_sites_) n += text(s);
  const auto rows = [&text](const auto& r) {
    size_t b = 0;
    for (const auto& [site, kept] : r.kept) b += sizeof(kept) + 32 + text(kept.second);
    return b;
  };
  for (const Rows<LeakSite>& r : leaks_) n += rows(r);
  return n + rows(peak_) + rows(sites_);
}

}  // namespace gpuwatch
