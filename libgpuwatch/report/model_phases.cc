// The `phases` and `regions` sections: their field tables, writer and reader
// (model_phases.h).
#include <string>
#include <utility>

#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

GPUWATCH_COUNTS_OF(PhasePath, GPUWATCH_PHASE_PATH_COUNTS)
GPUWATCH_COUNTS_OF(ReportPhases, GPUWATCH_PHASES_COUNTS)
GPUWATCH_COUNTS_OF(RegionSite, GPUWATCH_REGION_SITE_COUNTS)
GPUWATCH_COUNTS_OF(RegionSegment, GPUWATCH_REGION_HOLDER_COUNTS)
GPUWATCH_COUNTS_OF(RegionHeap, GPUWATCH_REGION_HOLDER_COUNTS)
GPUWATCH_COUNTS_OF(ReportRegionCounters, GPUWATCH_REGION_COUNTERS)
GPUWATCH_COUNTS_OF(ReportRegions, GPUWATCH_REGIONS_COUNTS)

void ReportRegions::ForEachSite(const std::function<void(ReportSite&)>& fn) {
  for (RegionSite& s : sites) fn(s);
  for (RegionSegment& s : segments) fn(s);
  for (RegionHeap& s : heaps) fn(s);
}

// Writing.

namespace {

json SiteRefJson(const ReportSiteRef& ref) {
  return {{key::kSite, ref.site}, {key::kLocation, ref.location}};
}

// A list of T, each entry its site's fields, its counts, then `more`'s.
template <typename T, typename More>
json EntriesJson(const std::vector<T>& entries, const More& more) {
  json list = json::array();
  for (const T& e : entries) {
    json entry = SiteJson(e);
    PutCounts(e, T::Counts(), &entry);
    more(e, &entry);
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace

json PhasesJson(const ReportPhases& phases) {
  json paths = json::array();
  for (const PhasePath& p : phases.paths) {
    json e = {{"path", p.path}, {"depth", p.depth}};
    PutCounts(p, PhasePath::Counts(), &e);
    if (!phases.live_known) {
      for (const char* live : {"live_bytes", "live_count", "host_live_bytes", "host_live_count"}) {
        e.erase(live);
      }
    }
    json copies = json::object();
    for (const auto& [direction, row] : p.copies) {
      PutCounts(row, CopyRow::Counts(), &copies[direction]);
    }
    e["copies"] = std::move(copies);
    if (p.peak_site.has_value()) e["peak_site"] = SiteRefJson(*p.peak_site);
    if (p.peak_top_site.has_value()) {
      json top = SiteRefJson(*p.peak_top_site);
      top[key::kBytes] = p.peak_top_site->bytes;
      e["peak_top_site"] = std::move(top);
    }
    if (p.processes != 0) e[key::kProcesses] = p.processes;
    if (p.peak_pid.has_value()) e["peak_pid"] = *p.peak_pid;
    if (!p.peak_rank.empty()) e["peak_rank"] = p.peak_rank;
    paths.push_back(std::move(e));
  }
  json out = {{"paths", std::move(paths)}};
  PutCounts(phases, ReportPhases::Counts(), &out);
  return out;
}

json RegionsJson(const ReportRegions& regions) {
  json out;
  PutCounts(regions, ReportRegions::Counts(), &out);
  out[key::kSites] = EntriesJson(regions.sites, [](const RegionSite& s, json* e) {
    if (!s.caller.empty()) (*e)["caller"] = s.caller;
    if (!s.phase.empty()) (*e)["phase"] = s.phase;
    if (s.segment.has_value()) (*e)["segment"] = SiteRefJson(*s.segment);
  });
  out[key::kSegments] = EntriesJson(regions.segments, [](const RegionSegment& s, json* e) {
    (*e)["address"] = s.address;
    (*e)["kind"] = s.kind;
  });
  out[key::kHeaps] =
      EntriesJson(regions.heaps, [](const RegionHeap& s, json* e) { (*e)["address"] = s.address; });
  PutCounts(regions.counters, ReportRegionCounters::Counts(), &out["counters"]);
  return out;
}

// Reading.

namespace {

// Each element of the array `key` of `obj`, which must be an object:
// `each(element, its path)`; stops at the first problem.
template <typename Each>
void EachObject(ReportFieldReader* r, const json& obj, const std::string& path, const char* key,
                const Each& each) {
  const json* list = r->ArrayAt(obj, path, key);
  for (size_t i = 0; list != nullptr && i < list->size() && !r->failed(); ++i) {
    const std::string at = ReportFieldReader::Element(ReportFieldReader::Join(path, key), i);
    if (!(*list)[i].is_object()) {
      r->Expected(at, (*list)[i], "an object");
      return;
    }
    each((*list)[i], at);
  }
}

// A list of T (ReportSite and T's counts), each completed by `more`.
template <typename T, typename More>
std::vector<T> ReadEntries(ReportFieldReader* r, const json& obj, const std::string& path,
                           const char* key, const More& more) {
  std::vector<T> out;
  EachObject(r, obj, path, key, [&](const json& e, const std::string& at) {
    T entry;
    r->Site(e, at, &entry);
    more(e, at, &entry);
    out.push_back(std::move(entry));
  });
  return out;
}

// {"site", "location"} at `obj`'s `key`, when present.
std::optional<ReportSiteRef> SiteRefAt(ReportFieldReader* r, const json& obj,
                                       const std::string& path, const char* key) {
  const json* ref = r->ObjectAt(obj, path, key);
  if (ref == nullptr) return std::nullopt;
  const std::string at = ReportFieldReader::Join(path, key);
  ReportSiteRef out;
  out.site = r->CountAt(*ref, at, key::kSite);
  out.location = r->TextAt(*ref, at, key::kLocation);
  return out;
}

PhasePath ReadPhasePath(ReportFieldReader* r, const json& e, const std::string& at) {
  PhasePath p;
  p.path = r->TextAt(e, at, "path");
  if (p.path.empty() && !r->failed()) r->Fail(at + ".path", "is empty");
  p.depth = r->CountAt(e, at, "depth");
  r->CountsAt(e, at, PhasePath::Counts(), &p);
  p.processes = r->CountAt(e, at, key::kProcesses);
  if (ReportFieldReader::Member(e, "peak_pid") != nullptr) {
    p.peak_pid = r->CountAt(e, at, "peak_pid");
  }
  p.peak_rank = r->TextAt(e, at, "peak_rank");
  if (const json* copies = r->ObjectAt(e, at, "copies")) {
    for (const auto& [direction, c] : copies->items()) {
      const std::string path = ReportFieldReader::Join(at + ".copies", direction.c_str());
      if (!c.is_object()) {
        r->Expected(path, c, "an object");
        break;
      }
      r->CountsAt(c, path, CopyRow::Counts(), &p.copies[direction]);
    }
  }
  p.peak_site = SiteRefAt(r, e, at, "peak_site");
  if (const json* top = r->ObjectAt(e, at, "peak_top_site")) {
    const std::string top_at = at + ".peak_top_site";
    PhaseTopSite& t = p.peak_top_site.emplace();
    t.site = r->CountAt(*top, top_at, key::kSite);
    t.bytes = r->CountAt(*top, top_at, key::kBytes);
    t.location = r->TextAt(*top, top_at, key::kLocation);
  }
  return p;
}

}  // namespace

ReportPhases ReadPhases(ReportFieldReader* r, const json& phases) {
  ReportPhases out;
  EachObject(r, phases, key::kPhases, "paths", [&](const json& e, const std::string& at) {
    if (out.paths.empty()) out.live_known = e.contains("live_bytes");
    out.paths.push_back(ReadPhasePath(r, e, at));
  });
  r->CountsAt(phases, key::kPhases, ReportPhases::Counts(), &out);
  return out;
}

ReportRegions ReadRegions(ReportFieldReader* r, const json& regions) {
  ReportRegions out;
  const std::string path = key::kRegions;
  r->CountsAt(regions, path, ReportRegions::Counts(), &out);
  out.sites = ReadEntries<RegionSite>(r, regions, path, key::kSites,
                                      [r](const json& e, const std::string& at, RegionSite* s) {
                                        r->CountsAt(e, at, RegionSite::Counts(), s);
                                        s->phase = r->TextAt(e, at, "phase");
                                        s->caller = r->TextAt(e, at, "caller");
                                        s->segment = SiteRefAt(r, e, at, "segment");
                                      });
  out.segments =
      ReadEntries<RegionSegment>(r, regions, path, key::kSegments,
                                 [r](const json& e, const std::string& at, RegionSegment* s) {
                                   s->address = r->TextAt(e, at, "address");
                                   r->CountsAt(e, at, RegionSegment::Counts(), s);
                                   s->kind = r->TextAt(e, at, "kind");
                                 });
  out.heaps = ReadEntries<RegionHeap>(r, regions, path, key::kHeaps,
                                      [r](const json& e, const std::string& at, RegionHeap* s) {
                                        s->address = r->TextAt(e, at, "address");
                                        r->CountsAt(e, at, RegionHeap::Counts(), s);
                                      });
  if (const json* counters = r->ObjectAt(regions, path, "counters")) {
    r->CountsAt(*counters, path + ".counters", ReportRegionCounters::Counts(), &out.counters);
  }
  return out;
}

}  // namespace gpuwatch
