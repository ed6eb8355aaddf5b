// The report's `trace` section (trace_json.h), built from a trace snapshot
// at report time.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/memory_reserve.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/report/trace_json.h"

namespace gpuwatch {

namespace {

// The row of `key` in `list` (one string per key, in first-seen order),
// made with `make` on its first sight.
template <typename Key, typename Make>
uint32_t RowOf(std::map<Key, uint32_t>* index, Key key, std::vector<std::string>* list,
               const Make& make) {
  const auto [it, added] = index->emplace(key, static_cast<uint32_t>(list->size()));
  if (added) list->push_back(make());
  return it->second;
}

}  // namespace

std::vector<uint32_t> TraceSiteIds(const TraceSnapshot& trace) {
  std::vector<uint32_t> ids;
  for (const TraceEvent& e : trace.events) {
    if (e.kind == TraceKind::kCopy || e.kind == TraceKind::kOom || e.kind == TraceKind::kMemory) {
      ids.push_back(e.site);
    }
  }
  return ids;
}

ReportTrace ReportTraceOf(const TraceSnapshot& trace, const TrackerSnapshot& snap,
                          SiteResolver* sites, const PhasesSnapshot* phases,
                          const std::array<DeviceIdentity, kMaxTrackedDevices>* identity) {
  ReportTrace out;
  out.capacity = trace.capacity;
  out.recorded = trace.recorded;
  out.dropped = trace.dropped;
  // The sites the events name, by id: the events refer to their rows, in
  // increasing order of id. Indexed by canonical id in a flat table (ids
  // are dense, a few bytes each): a checkpoint's ring holds ~20,000 events
  // over ~10,000 sites, whose lookups in a tree cost ~8 M instructions.
  constexpr uint32_t kNoRow = UINT32_MAX;
  std::vector<uint32_t> site_row;  // canonical site -> its row in out.sites
  for (const TraceEvent& e : trace.events) {
    if (e.kind == TraceKind::kCopy || e.kind == TraceKind::kOom || e.kind == TraceKind::kMemory) {
      const uint32_t site = sites->Canonical(e.site);
      if (site >= site_row.size()) site_row.resize(size_t{site} + 1, kNoRow);
      site_row[site] = 0;
    }
  }
  for (uint32_t site = 0; site < site_row.size(); ++site) {
    if (site_row[site] == kNoRow) continue;
    site_row[site] = static_cast<uint32_t>(out.sites.size());
    out.sites.push_back({site, sites->LocationOf(site)});
  }
  // (Every id was resolved before (AnalyzeReport's Prepare), so a site's
  // canonical id is the one seen above; row 0 as the tree gave otherwise.)
  const auto row_of = [&site_row, sites](uint32_t site) {
    const uint32_t canonical = sites->Canonical(site);
    return canonical < site_row.size() && site_row[canonical] != kNoRow ? site_row[canonical] : 0;
  };
  // Kernel names by their interned pointer: an index into "names" keeps the
  // events short in a run of millions of launches of a few kernels.
  std::map<const char*, uint32_t> name_index;
  // Phase paths by id: an index into "phases", as kernel names.
  std::map<uint64_t, uint32_t> phase_index;
  std::map<int, bool> devices;  // seen in an event
  TraceTexts texts(&out);
  // The words are a few fixed names (CopyKindName ...): never 65,536.
  const auto word = [&texts](const char* name) {
    uint16_t index = 0;
    texts.Word(name, &index);
    return index;
  };
  out.events.reserve(trace.events.size());
  for (const TraceEvent& e : trace.events) {
    ThrowIfOutOfMemory();  // near the memory limit: give up here, not in a destructor
    ReportTraceEvent ev;
    ev.time_ns = e.time_ns;
    ev.device = e.device;
    ev.value = e.value;
    // A slice's (copy, kernel, phase) type, end and stream.
    const auto slice = [&ev, &e](TraceEventType type) {
      ev.type = type;
      ev.end_ns = e.slice.end_ns;
      ev.stream = e.slice.stream;
    };
    switch (e.kind) {
      case TraceKind::kMemory:
        ev.type = TraceEventType::kMem;
        ev.ref = row_of(e.site);
        ev.has_ref = true;
        devices[e.device] = true;
        break;
      case TraceKind::kCopy:
        slice(TraceEventType::kCopy);
        ev.word[0] = word(CopyKindName(static_cast<CopyKind>(e.detail & 0xF)));
        ev.word[1] = word(HostKindName(static_cast<HostKind>(e.detail >> 4)));
        ev.ref = row_of(e.site);
        break;
      case TraceKind::kKernel:
        slice(TraceEventType::kKernel);
        ev.value = 0;
        ev.ref = RowOf(&name_index, e.slice.name, &out.names, [&e] {
          return e.slice.name != nullptr ? DemangleKernel(e.slice.name) : std::string("(unknown)");
        });
        break;
      case TraceKind::kMark: {
        ev.type = TraceEventType::kMark;
        ev.device = 0;
        const char* end = static_cast<const char*>(std::memchr(e.label, '\0', sizeof(e.label)));
        ev.ref = texts.Label(std::string_view(
            e.label, (end != nullptr ? end : e.label + sizeof(e.label)) - e.label));
        break;
      }
      case TraceKind::kPeak:
        ev.type = TraceEventType::kPeak;
        ev.device = 0;
        break;
      case TraceKind::kOom:
        ev.type = TraceEventType::kOom;
        ev.word[0] = word(MemKindName(static_cast<MemKind>(e.detail)));
        ev.ref = row_of(e.site);
        break;
      case TraceKind::kPhase:
        slice(TraceEventType::kPhase);
        ev.device = 0;
        ev.value = 0;
        ev.ref = RowOf(&phase_index, e.value, &out.phases, [&e, phases] {
          const int row = phases != nullptr ? phases->IndexOf(static_cast<uint32_t>(e.value)) : -1;
          return row >= 0 ? phases->paths[static_cast<size_t>(row)] : std::string("(unknown)");
        });
        break;
      case TraceKind::kNone:
        continue;
    }
    out.events.push_back(ev);
  }
  for (int d = 0; d < Tracker::kMaxDevices; ++d) {
    if (snap.device_peak_bytes_by_device[d] == 0 && devices.count(d) == 0) continue;
    ReportTraceDevice& row = out.devices.emplace_back();
    row.device = d;
    row.live_bytes = snap.device_bytes_by_device[d];
    row.peak_bytes = snap.device_peak_bytes_by_device[d];
    if (identity != nullptr) {
      const DeviceIdentity& id = (*identity)[d];
      row.uuid = id.uuid;
      row.pci_bus_id = id.pci_bus_id;
      row.gpu = id.gpu;
    }
  }
  return out;
}

}  // namespace gpuwatch
