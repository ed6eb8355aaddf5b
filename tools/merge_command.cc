// `gpuwatch merge FILE... -o OUT`: one report from the reports of many
// processes (DataLoader workers, ranks of a distributed job). The result is a
// gpuwatch report itself (trigger "merge"), so `report`, `check` and `diff`
// read it: totals summed, a per-process table ("processes"), and sites summed
// across processes, matched by their stacks (site ids are renumbered). It is
// written in the schema's current version, with a frame table.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "libgpuwatch/base/version.h"
#include "libgpuwatch/report/file.h"
#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/report_schema.h"
#include "tools/commands.h"
#include "tools/report_reader.h"

namespace gpuwatch::tools {

namespace {

// Sums every numeric field of `from` into `into`, recursively through
// objects; peak fields are summed too (see docs/report-format.md).
void SumNumbers(const json& from, json* into) {
  if (!from.is_object()) return;
  for (const auto& [key, value] : from.items()) {
    if (value.is_number_integer()) {
      (*into)[key] = U64(*into, key.c_str()) + U64(from, key.c_str());
    } else if (value.is_object()) {
      if (!into->contains(key) || !(*into)[key].is_object()) (*into)[key] = json::object();
      SumNumbers(value, &(*into)[key]);
    }
  }
}

class SiteIds {
 public:
  uint32_t IdOf(const json& site) {
    auto [it, inserted] = ids_.emplace(SiteKey(site), static_cast<uint32_t>(ids_.size() + 1));
    return it->second;
  }

 private:
  std::map<std::string, uint32_t> ids_;
};

// Entries of one list merged by stack: `sum` fields added, `max` fields the
// largest, `min` fields the smallest; the rest are taken from the first.
class SiteMerger {
 public:
  SiteMerger(SiteIds* ids, std::vector<const char*> sum, std::vector<const char*> max = {},
             std::vector<const char*> min = {})
      : ids_(ids), sum_(std::move(sum)), max_(std::move(max)), min_(std::move(min)) {}

  void Add(const json& site, const std::string& extra_key = "") {
    const std::string key = SiteKey(site) + extra_key;
    auto it = index_.find(key);
    if (it == index_.end()) {
      json entry = site;
      entry["site"] = ids_->IdOf(site);
      entry["processes"] = 1;
      entry.erase("series");
      index_.emplace(key, merged_.size());
      merged_.push_back(std::move(entry));
      return;
    }
    json& m = merged_[it->second];
    for (const char* f : sum_) {
      if (m.contains(f) && m[f].is_number_float()) {
        m[f] = Number(m, f) + Number(site, f);
      } else {
        m[f] = U64(m, f) + U64(site, f);
      }
    }
    for (const char* f : max_) m[f] = std::max(U64(m, f), U64(site, f));
    for (const char* f : min_) m[f] = std::min(U64(m, f), U64(site, f));
    if (site.contains("kinds") && site["kinds"].is_object()) {
      if (!m.contains("kinds") || !m["kinds"].is_object()) m["kinds"] = json::object();
      SumNumbers(site["kinds"], &m["kinds"]);
    }
    m["processes"] = U64(m, "processes") + 1;
  }

  json Sorted(const char* by) {
    std::stable_sort(merged_.begin(), merged_.end(),
                     [by](const json& a, const json& b) { return U64(a, by) > U64(b, by); });
    return json(merged_);
  }

 private:
  SiteIds* ids_;
  std::vector<const char*> sum_;
  std::vector<const char*> max_;
  std::vector<const char*> min_;
  std::map<std::string, size_t> index_;
  std::vector<json> merged_;
};

json MergeLeakSection(const std::vector<Report>& reports, const char* which, SiteIds* ids) {
  SiteMerger sites(ids, {"bytes", "count"}, {}, {"oldest_ns"});
  json section = {{"bytes", 0}, {"count", 0}, {"omitted_sites", 0}, {"omitted_bytes", 0}};
  for (const Report& r : reports) {
    const json& s = Sub(Sub(r.doc, "leaks"), which);
    for (const char* f : {"bytes", "count", "omitted_sites", "omitted_bytes"}) {
      section[f] = U64(section, f) + U64(s, f);
    }
    const json& list = Sub(s, "sites");
    if (list.is_array()) {
      for (const json& site : list) sites.Add(site);
    }
  }
  section[report_key::kSites] = sites.Sorted("bytes");
  // What counts as leaked, as the library splits it.
  const LeakSplitFigures split = SplitLeaks(section, nullptr, false).figures;
  split.WriteTo(&section);
  return section;
}

json MergeTransfers(const std::vector<Report>& reports) {
  std::map<std::pair<std::string, std::string>, json> totals;
  bool any = false;
  for (const Report& r : reports) {
    const json& t = Sub(Sub(r.doc, "transfers"), "totals");
    if (!t.is_array()) continue;
    any = true;
    for (const json& entry : t) {
      json& m = totals[{Str(entry, "direction"), Str(entry, "host")}];
      if (m.is_null()) m = {{"direction", Str(entry, "direction")}, {"host", Str(entry, "host")}};
      for (const char* f : {"count", "bytes", "timed_count", "duration_ns"}) {
        if (entry.contains(f)) m[f] = U64(m, f) + U64(entry, f);
      }
    }
  }
  if (!any) return nullptr;
  json list = json::array();
  for (auto& [key, entry] : totals) list.push_back(std::move(entry));
  return {{"totals", list}, {"sites", json::array()}, {"findings", json::array()}};
}

}  // namespace

int MergeCommand(const MergeOptions& options, FILE* out) {
  if (options.files.empty()) {
    std::fprintf(stderr, "gpuwatch merge: no input reports given\n");
    return 2;
  }
  if (options.output.empty()) {
    std::fprintf(stderr, "gpuwatch merge: no output file given (-o OUT)\n");
    return 2;
  }
  std::vector<Report> reports(options.files.size());
  std::map<std::pair<std::string, uint64_t>, std::string> seen;  // (host, pid) -> file
  for (size_t i = 0; i < options.files.size(); ++i) {
    std::string error;
    if (!ReadReport(options.files[i], &reports[i], &error)) {
      std::fprintf(stderr, "gpuwatch merge: %s\n", error.c_str());
      return 2;
    }
    const json& process = Sub(reports[i].doc, "process");
    if (Str(reports[i].doc, "trigger") == "merge") {
      std::fprintf(stderr, "gpuwatch merge: %s is a merged report already; merge the originals\n",
                   options.files[i].c_str());
      return 2;
    }
    const auto key = std::make_pair(Str(process, "host"), U64(process, "pid"));
    auto [it, inserted] = seen.emplace(key, options.files[i]);
    if (!inserted) {
      std::fprintf(stderr,
                   "gpuwatch merge: %s and %s are both reports of process %llu on %s; merge "
                   "takes one report per process\n",
                   it->second.c_str(), options.files[i].c_str(),
                   static_cast<unsigned long long>(key.second), key.first.c_str());
      return 2;
    }
  }

  SiteIds ids;
  json totals = json::object();
  json processes = json::array();
  json peak_kinds = json::object();
  uint64_t elapsed = 0;
  int64_t depth = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_sites_bytes = 0;
  SiteMerger peak_sites(&ids, {"bytes"});
  SiteMerger all_sites(&ids,
                       {"allocs", "alloc_bytes", "live_device_bytes", "live_device_count",
                        "host_allocs", "host_alloc_bytes"},
                       {"largest"});
  SiteMerger suspects(&ids, {"rate", "first_bytes", "last_bytes", "growth_bytes"},
                      {"to", "samples"}, {"from"});
  std::set<std::string> bases;
  uint64_t growth_samples = 0;
  for (const Report& r : reports) {
    const json& doc = r.doc;
    const json& t = Sub(doc, "totals");
    SumNumbers(t, &totals);
    const json& process = Sub(doc, "process");
    const LeakSplit split = SplitLeaks(Sub(Sub(doc, "leaks"), "device"), nullptr, false);
    uint64_t allocs = 0;
    const json& kinds = Sub(t, "kinds");
    if (kinds.is_object()) {
      for (const auto& [name, k] : kinds.items()) allocs += U64(k, "allocs");
    }
    processes.push_back({{"file", r.path},
                         {"pid", U64(process, "pid")},
                         {"host", Str(process, "host")},
                         {"rank", Str(process, "rank")},
                         {"command", Sub(process, "command")},
                         {"trigger", Str(doc, "trigger")},
                         {"elapsed_ns", U64(process, "elapsed_ns")},
                         {"device_peak_bytes", U64(t, "device_peak_bytes")},
                         {"device_current_bytes", U64(t, "device_current_bytes")},
                         {"leaked_bytes", split.leaked_bytes},
                         {"allocs", allocs}});
    elapsed = std::max(elapsed, U64(process, "elapsed_ns"));
    if (doc.contains("stack_depth") && doc["stack_depth"].is_number_integer()) {
      depth = std::max(depth, doc["stack_depth"].get<int64_t>());
    }
    const json& peak = Sub(doc, "peak");
    peak_bytes += U64(peak, "device_bytes");
    peak_sites_bytes += U64(peak, "sites_at_device_bytes");
    SumNumbers(Sub(peak, "kinds"), &peak_kinds);
    const json& ps = Sub(peak, "sites");
    if (ps.is_array()) {
      for (const json& s : ps) peak_sites.Add(s);
    }
    const json& as = Sub(doc, "sites");
    for (const json& s : as) all_sites.Add(s);
    const json& growth = Sub(doc, "growth");
    if (growth.is_object()) {
      if (Str(growth, "basis") != "none") bases.insert(Str(growth, "basis"));
      growth_samples = std::max(growth_samples, U64(growth, "samples"));
      const json& list = Sub(growth, "suspects");
      if (list.is_array()) {
        for (const json& s : list) suspects.Add(s, "#" + Str(s, "unit"));
      }
    }
  }
  json merged = {
      {report_key::kSchema, kReportSchemaName},
      {report_key::kVersion, kReportSchemaVersion},
      {"trigger", "merge"},
      {"label", ""},
      {"gpuwatch", {{"version", kGpuwatchVersion}, {"attach", "merge"}, {"cupti", ""}}},
      {"process",
       {{"pid", 0},
        {"host", ""},
        {"rank", ""},
        {"command", json::array()},
        {"elapsed_ns", elapsed}}},
      {"merged_from", reports.size()},
      {"processes", processes},
      {"totals", totals},
      {"stack_depth", depth},
  };
  merged["leaks"] = {{"device", MergeLeakSection(reports, "device", &ids)},
                     {"host", MergeLeakSection(reports, "host", &ids)}};
  merged["peak"] = {{"device_bytes", peak_bytes},
                    {"sites_at_device_bytes", peak_sites_bytes},
                    {"sites_time_ns", 0},
                    {"kinds", peak_kinds},
                    {"sites", peak_sites.Sorted("bytes")}};
  merged["sites"] = all_sites.Sorted("alloc_bytes");
  merged["growth"] = {{"basis", bases.empty()       ? "none"
                                : bases.size() == 1 ? *bases.begin()
                                                    : "mixed"},
                      {"samples", growth_samples},
                      {"suspects", suspects.Sorted("growth_bytes")}};
  json transfers = MergeTransfers(reports);
  if (!transfers.is_null()) merged["transfers"] = std::move(transfers);

  // Written as the library writes a report: each distinct frame once, in the
  // frame table, and each site's `stack` of indices into it.
  const uint64_t leaked_bytes =
      U64(merged[report_key::kLeaks][report_key::kDevice], report_key::kLeakedBytes);
  BuildFrameTable(&merged);
  std::string error;
  if (!WriteFileAtomically(options.output, DumpReport(std::move(merged)), &error)) {
    std::fprintf(stderr, "gpuwatch merge: %s\n", error.c_str());
    return 2;
  }
  std::fprintf(out, "%8s  %5s  %10s  %10s  %s\n", "pid", "rank", "peak", "leaked", "report");
  for (const json& p : processes) {
    std::fprintf(out, "%8llu  %5s  %10s  %10s  %s\n",
                 static_cast<unsigned long long>(U64(p, "pid")),
                 Str(p, "rank").empty() ? "-" : Str(p, "rank").c_str(),
                 FormatBytes(U64(p, "device_peak_bytes")).c_str(),
                 FormatBytes(U64(p, "leaked_bytes")).c_str(), Str(p, "file").c_str());
  }
  std::fprintf(out, "%8s  %5s  %10s  %10s\n", "total", "", FormatBytes(peak_bytes).c_str(),
               FormatBytes(leaked_bytes).c_str());
  std::fprintf(out, "gpuwatch merge: %zu reports merged into %s\n", reports.size(),
               options.output.c_str());
  return 0;
}

}  // namespace gpuwatch::tools
