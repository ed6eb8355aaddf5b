// The report's `trace` section (trace_json.h), built from a trace snapshot
// at report time.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/memory_reserve.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/report/trace_json.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

std::vector<uint32_t> TraceSiteIds(const TraceSnapshot& trace) {
  std::vector<uint32_t> ids;
  for (const TraceEvent& e : trace.events) {
    if (e.kind == TraceKind::kCopy || e.kind == TraceKind::kOom) ids.push_back(e.site);
  }
  return ids;
}

nlohmann::json TraceSectionJson(const TraceSnapshot& trace, const TrackerSnapshot& snap,
                                SiteResolver* sites, const PhasesSnapshot* phases) {
  using nlohmann::json;
  // Kernel names by their interned pointer: an index into "names" keeps the
  // events short in a run of millions of launches of a few kernels.
  std::map<const char*, size_t> name_index;
  json names = json::array();
  std::map<uint32_t, std::string> locations;  // canonical site -> location
  std::map<int, bool> devices;                // seen in an event
  json events = json::array();
  // Phase paths by id: an index into "phases", as kernel names.
  std::map<uint64_t, size_t> phase_index;
  json phase_names = json::array();
  for (const TraceEvent& e : trace.events) {
    ThrowIfOutOfMemory();  // near the memory limit: give up here, not in a destructor
    switch (e.kind) {
      case TraceKind::kMemory:
        devices[e.device] = true;
        events.push_back(json::array({"mem", e.time_ns, e.device, e.value}));
        break;
      case TraceKind::kCopy: {
        const uint32_t site = sites->Canonical(e.site);
        if (locations.count(site) == 0) locations[site] = sites->LocationOf(site);
        events.push_back(json::array({"copy", e.time_ns, e.slice.end_ns, e.device, e.slice.stream,
                                      e.value, CopyKindName(static_cast<CopyKind>(e.detail & 0xF)),
                                      HostKindName(static_cast<HostKind>(e.detail >> 4)), site}));
        break;
      }
      case TraceKind::kKernel: {
        auto [it, added] = name_index.emplace(e.slice.name, names.size());
        if (added) {
          names.push_back(e.slice.name != nullptr ? DemangleKernel(e.slice.name)
                                                  : std::string("(unknown)"));
        }
        events.push_back(json::array(
            {"kernel", e.time_ns, e.slice.end_ns, e.device, e.slice.stream, it->second}));
        break;
      }
      case TraceKind::kMark: {
        const char* end = static_cast<const char*>(std::memchr(e.label, '\0', sizeof(e.label)));
        const std::string label(e.label, end != nullptr ? end : e.label + sizeof(e.label));
        events.push_back(json::array({"mark", e.time_ns, e.value, label}));
        break;
      }
      case TraceKind::kPeak:
        events.push_back(json::array({"peak", e.time_ns, e.value}));
        break;
      case TraceKind::kOom: {
        const uint32_t site = sites->Canonical(e.site);
        if (locations.count(site) == 0) locations[site] = sites->LocationOf(site);
        events.push_back(json::array({"oom", e.time_ns, e.device, e.value,
                                      MemKindName(static_cast<MemKind>(e.detail)), site}));
        break;
      }
      case TraceKind::kPhase: {
        auto [it, added] = phase_index.emplace(e.value, phase_names.size());
        if (added) {
          const int row = phases != nullptr ? phases->IndexOf(static_cast<uint32_t>(e.value)) : -1;
          phase_names.push_back(row >= 0 ? phases->paths[static_cast<size_t>(row)]
                                         : std::string("(unknown)"));
        }
        events.push_back(
            json::array({"phase", e.time_ns, e.slice.end_ns, e.slice.stream, it->second}));
        break;
      }
      case TraceKind::kNone:
        break;
    }
  }
  json device_list = json::array();
  for (int d = 0; d < Tracker::kMaxDevices; ++d) {
    if (snap.device_peak_bytes_by_device[d] == 0 && devices.count(d) == 0) continue;
    device_list.push_back({{"device", d},
                           {"live_bytes", snap.device_bytes_by_device[d]},
                           {"peak_bytes", snap.device_peak_bytes_by_device[d]}});
  }
  json site_list = json::array();
  for (const auto& [site, location] : locations) {
    site_list.push_back({{"site", site}, {"location", location}});
  }
  return {{"capacity", trace.capacity}, {"recorded", trace.recorded},
          {"dropped", trace.dropped},   {"devices", device_list},
          {"sites", site_list},         {"names", names},
          {"phases", phase_names},      {"events", events}};
}

}  // namespace gpuwatch
